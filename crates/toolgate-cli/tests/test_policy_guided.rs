//! Policy on the guided surface, end to end: profiles decide what route names, keys decide
//! what execute runs, shadow tools route but do not run, and the audit log says so.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use serde_json::json;

/// What a session with the reader key (profile `reader`) may see and do.
async fn reader_scenario<H: rmcp::ClientHandler>(c: &KeyedClient<H>, dir: &TestDir) {
    // Hidden by the profile: route does not name it, by task or by exact name.
    for task in ["dump the vault of secrets", "files/secret_dump"] {
        let s = structured(&call_on(c, "route", json!({"task": task})).await);
        assert_ne!(s["name"], "secret_dump", "{task}: {s}");
        let named: Vec<&str> = s["candidates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(!named.contains(&"secret_dump"), "{task}: {s}");
    }
    // ...yet the key may call it, so an exact-name execute runs (and is audited as hidden).
    let r = call_on(
        c,
        "execute",
        json!({"tool": "files/secret_dump", "arguments": {}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("secret_dump"));

    // Visible and routable, but the read-only key may not run a write tool.
    let s = structured(&call_on(c, "route", json!({"task": "write text to a file"})).await);
    assert_eq!(
        (s["decision"].as_str(), s["name"].as_str()),
        (Some("select"), Some("write_file")),
        "{s}"
    );
    let r = call_on(
        c,
        "execute",
        json!({"selectionId": s["selectionId"], "arguments": {"path": "/tmp/x"}}),
    )
    .await;
    assert!(is_error(&r));
    assert!(
        text(&r).contains("tier \"write\"") && text(&r).contains("allows up to read"),
        "{}",
        text(&r)
    );

    // Visible but outside the key's scopes.
    let r = call_on(
        c,
        "execute",
        json!({"tool": "files/delete_file", "arguments": {"path": "/x"}}),
    )
    .await;
    assert!(
        is_error(&r) && text(&r).contains("scope \"files/delete_file\""),
        "{}",
        text(&r)
    );

    // A shadow tool routes, but execute says it is not enabled and who to ask.
    let s = structured(&call_on(c, "route", json!({"task": "weather forecast for a city"})).await);
    assert_eq!(s["name"], "forecast", "{s}");
    let r = call_on(
        c,
        "execute",
        json!({"selectionId": s["selectionId"], "arguments": {"city": "Oslo"}}),
    )
    .await;
    assert!(is_error(&r));
    assert!(
        text(&r).contains("not enabled") && text(&r).contains("#platform"),
        "{}",
        text(&r)
    );

    // The allowed read runs.
    let r = call_on(
        c,
        "execute",
        json!({"tool": "files/read_file", "arguments": {"path": "/etc/motd"}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));

    // Every decision is in the audit log, with the key's name and never the key.
    let log = std::fs::read_to_string(dir.path("audit.jsonl")).unwrap();
    assert!(
        !log.contains(READER) && !log.contains("tg_"),
        "the key itself is never logged"
    );
    let one = |tool: &str| {
        let c = calls(dir, tool);
        assert_eq!(c.len(), 1, "{tool}: {c:?}");
        c.into_iter().next().unwrap()
    };
    let dump = one("files/secret_dump");
    assert_eq!(
        (dump["decision"].as_str(), dump["visible"].as_bool()),
        (Some("allowed"), Some(false))
    );
    assert_eq!(dump["outcome"], "ok");
    assert!(dump["reason"].as_str().unwrap().contains("exact name"));
    assert_eq!(
        (
            dump["key"].as_str(),
            dump["profile"].as_str(),
            dump["surface"].as_str()
        ),
        (Some("reader"), Some("reader"), Some("guided"))
    );
    let write = one("files/write_file");
    assert_eq!(write["decision"], "refused");
    assert!(write.get("outcome").is_none(), "a refused call never ran");
    assert_eq!(one("files/delete_file")["decision"], "refused");
    assert_eq!(one("newsrv/forecast")["decision"], "shadow");
    let read = one("files/read_file");
    assert_eq!(read["decision"], "allowed");
    assert!(read["resultTokens"].as_u64().unwrap() > 0 && read["latencyMs"].is_number());
    assert_eq!(read["argumentsHmac"].as_str().unwrap().len(), 64);
    assert!(
        read.get("arguments").is_none(),
        "arguments only when configured"
    );
    let routes: Vec<_> = audit(dir)
        .into_iter()
        .filter(|r| r["type"] == "route")
        .collect();
    assert!(routes.len() >= 4, "{routes:?}");
    assert!(routes
        .iter()
        .any(|r| r["decision"] == "select" && r["tool"] == "newsrv/forecast"));
    assert!(routes
        .iter()
        .all(|r| r["taskHmac"].as_str().unwrap().len() == 64));
}

#[tokio::test]
async fn guided_over_http_with_a_read_only_key() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "guided", ""), &[]);
    let c = connect_as(&gw.url, READER).await;
    assert_eq!(tool_names(&c).await, vec!["continue", "execute", "route"]);
    reader_scenario(&c, &dir).await;
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn guided_over_stdio_as_a_configured_key() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "guided", "");
    let (c, _n) = connect_stdio(&config, &["--key", "reader", "--profile", "reader"]).await;
    reader_scenario(&c, &dir).await;
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn stdio_defaults_to_the_local_identity_with_full_access() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "guided", "");
    let (c, _n) = connect_stdio(&config, &[]).await;
    // No profile: the hidden tool routes; no key limits: the write tool runs.
    let s = structured(&call(&c, "route", json!({"task": "files/secret_dump"})).await);
    assert_eq!(s["name"], "secret_dump", "{s}");
    let r = call(
        &c,
        "execute",
        json!({"tool": "files/write_file", "arguments": {"path": "/x"}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(calls(&dir, "files/write_file")[0]["key"], "local");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn stdio_refuses_an_unknown_profile_or_key() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "guided", "");
    for (flag, value, expect) in [
        ("--profile", "nope", "reader"),
        ("--key", "nobody", "policy.keys.nobody"),
        ("--key", "old", "revoked"),
    ] {
        let out = std::process::Command::new(toolgate())
            .args(["serve", "--stdio", "--config"])
            .arg(&config)
            .args([flag, value])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(value) && err.contains(expect), "{err}");
    }
}

#[tokio::test]
async fn stdio_asks_before_destructive_calls_when_approval_is_on() {
    let dir = TestDir::new();
    // Global approval: the local identity may call everything, but asks first.
    let config = policy_config(&dir, "guided", "approval = true");
    for (answer, runs) in [
        (Some(rmcp::model::ElicitationAction::Accept), true),
        (Some(rmcp::model::ElicitationAction::Decline), false),
        (None, false),
    ] {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let handler = Approving {
            answer: answer.clone(),
            audit: dir.path("audit.jsonl"),
            asked: asked.clone(),
        };
        let c = connect_stdio_with(&config, &[], handler).await;
        let r = call_on(
            &c,
            "execute",
            json!({"tool": "files/delete_file", "arguments": {"path": "/data"}}),
        )
        .await;
        assert_eq!(!is_error(&r), runs, "{answer:?}: {}", text(&r));
        assert_eq!(asked.lock().unwrap().len(), usize::from(answer.is_some()));
        let rec = calls(&dir, "files/delete_file").pop().unwrap();
        assert_eq!(rec["key"], "local");
        let expected = match (&answer, runs) {
            (_, true) => "allowed",
            (Some(_), false) => "approval_declined",
            (None, _) => "approval_unavailable",
        };
        assert_eq!(rec["decision"], expected, "{rec}");
        c.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn code_mode_only_for_the_keys_and_profiles_named() {
    // Code mode for the writer key alone: the reader key (same profile) gets neither the
    // tools nor the instructions, and calling execute_code anyway is refused.
    let dir = TestDir::new();
    let config = policy_config_with(
        &dir,
        "mode = \"guided\"",
        "[code]\nenabled = true\nkeys = [\"writer\"]",
        "",
    );
    let gw = HttpGateway::start(&config, &[]);
    let writer = connect_as(&gw.url, WRITER).await;
    let reader = connect_as(&gw.url, READER).await;
    let names = tool_names(&writer).await;
    assert!(names.contains(&"execute_code".to_string()), "{names:?}");
    assert!(names.contains(&"describe_tools".to_string()), "{names:?}");
    let rules = |c: &KeyedClient<TestClient>| c.peer_info().unwrap().instructions.clone();
    assert!(rules(&writer).unwrap().contains("execute_code"));
    let r = call_on(&writer, "execute_code", json!({"code": "return 6 * 7"})).await;
    assert_eq!(structured(&r)["result"], 42, "{}", text(&r));

    let names = tool_names(&reader).await;
    assert!(
        !names
            .iter()
            .any(|n| n == "execute_code" || n == "describe_tools"),
        "{names:?}"
    );
    assert!(!rules(&reader).unwrap().contains("execute_code"));
    let r = call_on(&reader, "execute_code", json!({"code": "return 1"})).await;
    assert!(
        is_error(&r) && text(&r).contains("Unknown tool"),
        "{}",
        text(&r)
    );
    writer.cancel().await.unwrap();
    reader.cancel().await.unwrap();

    // A name that is neither a key nor a profile is a configuration error.
    let bad = policy_config_with(
        &dir,
        "mode = \"guided\"",
        "[code]\nenabled = true\nprofiles = [\"nobody\"]",
        "",
    );
    let out = std::process::Command::new(toolgate())
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("code.profiles: \"nobody\""),
        "{err}"
    );
}
