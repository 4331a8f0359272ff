//! Policy at the HTTP edge and on destructive calls: bad, missing and revoked keys get 401
//! before any upstream is reached; `/mcp/p/<profile>` picks a profile; destructive calls
//! wait for the user's answer through elicitation.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use rmcp::model::ElicitationAction;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn post(
    url: &str,
    auth: Option<&str>,
    session: Option<&str>,
    body: Value,
) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string());
    if let Some(a) = auth {
        r = r.header("authorization", a);
    }
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    r
}

async fn upstream_pid(dir: &TestDir, server: &str) -> u32 {
    for _ in 0..100 {
        if let [pid] = upstream_pids(dir, server)[..] {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no single {server} upstream process");
}

#[tokio::test]
async fn bad_missing_and_revoked_keys_get_401_before_any_upstream() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "direct", ""), &[]);
    let url = gw.url.clone();
    let good = format!("Bearer {WRITER}");
    // A real session, opened with a good key.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let r = post(&url, Some(&good), None, init.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    drop(r.bytes().await);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = post(&url, Some(&good), Some(&session), initialized)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());

    // The call would make the upstream exit (the fixture's `_crash` knob): if any of these
    // requests reached it, its process would be gone.
    let pid = upstream_pid(&dir, "files").await;
    let crash = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "files_write_file", "arguments": {"path": "/x", "_crash": true}}});
    let revoked = format!("Bearer {REVOKED}");
    for (auth, says) in [
        (None, "requires an API key"),
        (Some("Bearer tg_not_a_key"), "not valid"),
        (Some(revoked.as_str()), "revoked"),
        (Some("Basic d3JpdGVyOng="), "requires an API key"),
    ] {
        for (body, session) in [
            (init.clone(), None),
            (crash.clone(), Some(session.as_str())),
        ] {
            let r = post(&url, auth, session, body).send().await.unwrap();
            assert_eq!(r.status(), 401, "{auth:?}");
            assert_eq!(r.headers()["www-authenticate"], "Bearer");
            let body: Value = r.json().await.unwrap();
            assert!(
                body["message"].as_str().unwrap().contains(says),
                "{auth:?}: {body}"
            );
        }
    }
    assert_eq!(
        upstream_pids(&dir, "files"),
        vec![pid],
        "the upstream is untouched"
    );
    assert!(
        calls(&dir, "files/write_file").is_empty(),
        "no call was audited as run"
    );
    let auth: Vec<Value> = audit(&dir)
        .into_iter()
        .filter(|r| r["type"] == "auth")
        .collect();
    assert_eq!(auth.len(), 8, "{auth:?}");
    assert!(auth.iter().all(|r| r["decision"] == "refused"));
    assert_eq!(
        auth.iter().filter(|r| r["key"] == "old").count(),
        2,
        "a revoked key is named"
    );

    // The same request with the good key does reach it: the check above could have failed.
    let sent = tokio::spawn(post(&url, Some(&good), Some(&session), crash).send());
    let mut gone = false;
    for _ in 0..100 {
        if !upstream_pids(&dir, "files").contains(&pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the permitted call reached the upstream");
    sent.abort();
}

#[tokio::test]
async fn the_path_picks_the_profile_and_unknown_profiles_are_404() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "guided", ""), &[]);
    // The admin key has no profile: /mcp shows everything, /mcp/p/reader the reader's view.
    let all = connect_keyed(&gw.url, Some(ADMIN), test_client().0).await;
    let s = structured(&call_on(&all, "route", json!({"task": "files/secret_dump"})).await);
    assert_eq!(s["name"], "secret_dump", "{s}");
    all.cancel().await.unwrap();
    let reader = connect_as(&format!("{}/mcp/p/reader", gw.base()), ADMIN).await;
    let s = structured(&call_on(&reader, "route", json!({"task": "files/secret_dump"})).await);
    assert_ne!(s["name"], "secret_dump", "{s}");
    reader.cancel().await.unwrap();
    let r = post(
        &format!("{}/mcp/p/nope", gw.base()),
        Some(&format!("Bearer {ADMIN}")),
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 404);
    let body = r.text().await.unwrap();
    assert!(body.contains("nope") && body.contains("reader"), "{body}");
    let routes: Vec<Value> = audit(&dir)
        .into_iter()
        .filter(|r| r["type"] == "route")
        .collect();
    assert_eq!(routes[0]["profile"], Value::Null);
    assert_eq!(routes[1]["profile"], "reader");
}

/// One destructive call (delete_file) on `surface` by the admin key, whose calls need approval.
async fn destructive_call(
    gw: &HttpGateway,
    dir: &TestDir,
    surface: &str,
    answer: Option<ElicitationAction>,
) -> (rmcp::model::CallToolResult, Vec<(String, usize)>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let handler = Approving {
        answer,
        audit: dir.path("audit.jsonl"),
        asked: asked.clone(),
    };
    let c = connect_keyed(
        &format!("{}/mcp/{surface}", gw.base()),
        Some(ADMIN),
        handler,
    )
    .await;
    let r = match surface {
        "direct" => call_on(&c, "files_delete_file", json!({"path": "/data"})).await,
        _ => {
            call_on(
                &c,
                "execute",
                json!({"tool": "files/delete_file", "arguments": {"path": "/data"}}),
            )
            .await
        }
    };
    // A write call (not destructive) runs without asking.
    let w = match surface {
        "direct" => call_on(&c, "files_write_file", json!({"path": "/w"})).await,
        _ => {
            call_on(
                &c,
                "execute",
                json!({"tool": "files/write_file", "arguments": {"path": "/w"}}),
            )
            .await
        }
    };
    assert!(!is_error(&w), "{}", text(&w));
    c.cancel().await.unwrap();
    let asked = asked.lock().unwrap().clone();
    (r, asked)
}

#[tokio::test]
async fn destructive_calls_wait_for_the_users_answer() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "guided", ""), &[]);
    for surface in ["guided", "direct"] {
        // Accepted: asked once, before the call ran; then it runs.
        let (r, asked) =
            destructive_call(&gw, &dir, surface, Some(ElicitationAction::Accept)).await;
        assert!(!is_error(&r), "{surface}: {}", text(&r));
        assert!(text(&r).contains("delete_file"), "{}", text(&r));
        assert_eq!(asked.len(), 1, "{surface}: {asked:?}");
        assert!(asked[0].0.contains("files/delete_file") && asked[0].0.contains("/data"));
        let ran_before = asked[0].1;
        let rec = calls(&dir, "files/delete_file").pop().unwrap();
        assert_eq!(
            (
                rec["decision"].as_str(),
                rec["approved"].as_bool(),
                rec["outcome"].as_str()
            ),
            (Some("allowed"), Some(true), Some("ok")),
            "{rec}"
        );
        assert_eq!(
            calls(&dir, "files/delete_file")
                .iter()
                .filter(|r| r["decision"] == "allowed")
                .count(),
            ran_before + 1,
            "the question came before the call ran"
        );

        // Declined: nothing runs.
        let (r, asked) =
            destructive_call(&gw, &dir, surface, Some(ElicitationAction::Decline)).await;
        assert!(
            is_error(&r) && text(&r).contains("declined"),
            "{}",
            text(&r)
        );
        assert_eq!(asked.len(), 1);
        let rec = calls(&dir, "files/delete_file").pop().unwrap();
        assert_eq!(
            (rec["decision"].as_str(), rec["approved"].as_bool()),
            (Some("approval_declined"), Some(false))
        );
        assert!(rec.get("outcome").is_none());

        // No elicitation capability: a clear refusal, never a silent run.
        let (r, asked) = destructive_call(&gw, &dir, surface, None).await;
        assert!(
            is_error(&r) && text(&r).contains("elicitation"),
            "{}",
            text(&r)
        );
        assert!(asked.is_empty());
        let rec = calls(&dir, "files/delete_file").pop().unwrap();
        assert_eq!(rec["decision"], "approval_unavailable");
        assert_eq!(rec["surface"], surface);
    }
    // Arguments are validated before the user is asked: nobody approves a call that cannot run.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let handler = Approving {
        answer: Some(ElicitationAction::Accept),
        audit: dir.path("audit.jsonl"),
        asked: asked.clone(),
    };
    let c = connect_keyed(&format!("{}/mcp/guided", gw.base()), Some(ADMIN), handler).await;
    let r = call_on(
        &c,
        "execute",
        json!({"tool": "files/delete_file", "arguments": {"path": 5}}),
    )
    .await;
    assert!(is_error(&r) && text(&r).contains("/path"), "{}", text(&r));
    assert!(asked.lock().unwrap().is_empty());
    assert_eq!(
        calls(&dir, "files/delete_file").pop().unwrap()["outcome"],
        "not_run"
    );
    c.cancel().await.unwrap();
    let runs = calls(&dir, "files/delete_file")
        .iter()
        .filter(|r| r["outcome"] == "ok")
        .count();
    assert_eq!(runs, 2, "only the accepted calls ran");
}

#[tokio::test]
async fn key_new_prints_a_key_once_and_a_table_that_works() {
    let out = std::process::Command::new(toolgate())
        .args(["key", "new", "laptop"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let table = String::from_utf8(out.stderr).unwrap();
    assert!(key.starts_with("tg_") && key.len() == 67, "{key}");
    assert!(
        !table.contains(&key),
        "the configuration holds the hash, never the key"
    );
    let start = table
        .find("[policy.keys.laptop]")
        .expect("a table to paste");
    let table = &table[start..];
    // Pasted as printed, the key opens a session and may call a read tool.
    let dir = TestDir::new();
    let config = policy_config(&dir, "direct", "");
    let written = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{written}\n{table}")).unwrap();
    let gw = HttpGateway::start(&config, &[]);
    let c = connect_as(&gw.url, &key).await;
    let r = call_on(&c, "files_read_file", json!({"path": "/x"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(calls(&dir, "files/read_file")[0]["key"], "laptop");
    c.cancel().await.unwrap();
    let bad = std::process::Command::new(toolgate())
        .args(["key", "new", "a b"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
