//! Route learns from the models' choices (issue 39), end to end over HTTP with the embedded
//! store: a clarification answered by `execute` with one candidate's selectionId teaches;
//! once two principals of a profile agree, the same task (and a paraphrase) selects for
//! that profile, and only for it; a restart keeps what was learned; one principal alone
//! moves no selection however often it repeats; a destructive tool still asks; a call that
//! fails teaches nothing; `mode = "off"` learns nothing. Every learned example is audited;
//! `toolgate route learned` lists, exports, forgets and imports them. Two replicas on one
//! Redis learn together: a question asked on one and answered on the other teaches both.

mod common;
#[allow(dead_code, reason = "each test binary uses a part of these helpers")]
mod fleet;
mod policy_support;
use common::*;
use policy_support::{connect_as, hash, KeyedClient};
use serde_json::{json, Value};
use std::path::PathBuf;

const ANN: &str = "tg_learning_key_ann";
const BEN: &str = "tg_learning_key_ben";
const CAT: &str = "tg_learning_key_cat";
const OPS: &str = "tg_learning_key_ops";

/// Notes whose names the task words match equally well, so route asks.
fn catalog() -> Value {
    let text = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    json!([
        {"server": "notes", "tool": {"name": "add_note", "description": "Add a note to the notebook.",
            "inputSchema": text.clone(), "annotations": {"readOnlyHint": false, "destructiveHint": false}}},
        {"server": "notes", "tool": {"name": "append_note", "description": "Append text to an existing note.",
            "inputSchema": text.clone(), "annotations": {"readOnlyHint": false, "destructiveHint": false}}},
        {"server": "notes", "tool": {"name": "delete_note", "description": "Delete a note permanently.",
            "inputSchema": text.clone(), "annotations": {"destructiveHint": true}}},
        {"server": "files", "tool": {"name": "read_file", "description": "Read a file and return its text.",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}}},
    ])
}

/// Ann and Ben share the profile `team`; Cat is of profile `other`. All may call every tool;
/// Ops reads the dashboard.
fn config(dir: &TestDir, learning: &str) -> PathBuf {
    dir.write("catalog.json", &catalog().to_string());
    let mut policy = format!(
        "[guided]\nwait_secs = 5\n{learning}\n[policy.audit]\npath = {:?}\n\
         [policy.profiles.team]\ntools = [\"*\"]\n[policy.profiles.other]\ntools = [\"*\"]\n",
        dir.path("audit.jsonl").display().to_string(),
    );
    for (name, key, profile) in [
        ("ann", ANN, "team"),
        ("ben", BEN, "team"),
        ("cat", CAT, "other"),
    ] {
        policy.push_str(&format!(
            "[policy.keys.{name}]\nhash = \"{}\"\nscopes = [\"*\"]\ntier = \"destructive\"\nprofile = \"{profile}\"\n",
            hash(key)
        ));
    }
    policy.push_str(&format!(
        "[policy.keys.ops]\nhash = \"{}\"\nscopes = [\"admin\"]\n",
        hash(OPS)
    ));
    dir.config(
        "",
        &[
            policy,
            dir.stdio_upstream("notes", "notes", &[]),
            dir.stdio_upstream("files", "files", &[]),
        ],
    )
}

async fn route(client: &KeyedClient<TestClient>, task: &str) -> Value {
    let r = request(client, "route", json!({ "task": task })).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    structured(&r)
}

async fn request(
    client: &KeyedClient<TestClient>,
    name: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    policy_support::call_on(client, name, args).await
}

/// Answers `task`'s clarification by executing the candidate `tool` (`server/name`), as a
/// model would; returns whether the call succeeded.
async fn answer(
    client: &KeyedClient<TestClient>,
    task: &str,
    tool: &str,
    arguments: Value,
) -> bool {
    let r = route(client, task).await;
    assert_eq!(r["decision"], "clarify", "{task}: {r}");
    let sel = r["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            format!(
                "{}/{}",
                c["server"].as_str().unwrap(),
                c["name"].as_str().unwrap()
            ) == tool
        })
        .unwrap_or_else(|| panic!("{tool} is not a candidate of {task}: {r}"))["selectionId"]
        .as_str()
        .unwrap()
        .to_string();
    let r = request(
        client,
        "execute",
        json!({"selectionId": sel, "arguments": arguments}),
    )
    .await;
    r.is_error != Some(true)
}

fn selected(r: &Value) -> Option<String> {
    (r["decision"] == "select").then(|| {
        format!(
            "{}/{}",
            r["server"].as_str().unwrap_or(""),
            r["name"].as_str().unwrap_or("")
        )
    })
}

fn learned_records(dir: &TestDir) -> Vec<Value> {
    audit_records(dir)
        .into_iter()
        .filter(|r| r["decision"] == "learned")
        .collect()
}

const TASK: &str = "note that Bob likes coffee";
const PARAPHRASE: &str = "note that Bob likes tea";

#[tokio::test]
async fn agreed_choices_select_for_their_profile_and_survive_a_restart() {
    let dir = TestDir::new();
    let cfg = config(&dir, "");
    let mut gw = HttpGateway::start(&cfg, &[]);
    let ann = connect_as(&gw.url, ANN).await;
    let ben = connect_as(&gw.url, BEN).await;
    let cat = connect_as(&gw.url, CAT).await;

    // Cold: route asks.
    assert_eq!(route(&ann, TASK).await["decision"], "clarify");
    // Ann answers by executing append_note (third when cold): one principal, no selection yet, however often.
    for _ in 0..3 {
        assert!(
            answer(
                &ann,
                TASK,
                "notes/append_note",
                json!({"text": "Bob: coffee"})
            )
            .await
        );
    }
    let r = route(&ann, TASK).await;
    assert_eq!(
        r["decision"], "clarify",
        "one principal alone selected: {r}"
    );
    assert_eq!(
        r["candidates"][0]["name"], "append_note",
        "what was learned moves the tool up the candidates: {r}"
    );
    // Ben agrees: now the task and a paraphrase select for the profile.
    assert!(
        answer(
            &ben,
            TASK,
            "notes/append_note",
            json!({"text": "Bob: coffee"})
        )
        .await
    );
    for (who, task) in [(&ann, TASK), (&ben, TASK), (&ann, PARAPHRASE)] {
        let r = route(who, task).await;
        assert_eq!(
            selected(&r).as_deref(),
            Some("notes/append_note"),
            "{task}: {r}"
        );
    }
    // Cat, of another profile, is not affected.
    let r = route(&cat, TASK).await;
    assert_eq!(
        r["decision"], "clarify",
        "another profile's choices moved Cat's: {r}"
    );
    assert_ne!(r["candidates"][0]["name"], "append_note", "{r}");
    // Every learned example is audited, with who taught it.
    let learned = learned_records(&dir);
    assert!(learned.len() >= 2, "{learned:?}");
    assert!(
        learned.iter().all(|r| r["tool"] == "notes/append_note"),
        "{learned:?}"
    );

    // The dashboard shows what was learned and from whom.
    let data: Value = reqwest::Client::new()
        .get(format!("{}/ui/data", gw.base()))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        data["learned"]["total"], 2,
        "one example each: {}",
        data["learned"]
    );
    let shown: std::collections::BTreeSet<&str> = data["learned"]["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["principal"].as_str().unwrap())
        .collect();
    assert_eq!(shown.len(), 2, "{}", data["learned"]);

    ann.cancel().await.unwrap();
    ben.cancel().await.unwrap();
    cat.cancel().await.unwrap();
    gw.stop();

    // A restart on the same store keeps it.
    let mut gw = HttpGateway::start(&cfg, &[]);
    let ben = connect_as(&gw.url, BEN).await;
    let r = route(&ben, TASK).await;
    assert_eq!(
        selected(&r).as_deref(),
        Some("notes/append_note"),
        "after a restart: {r}"
    );
    // The operator's command cannot take the file from a running gateway, and says why.
    let (ok, _, err) = learned_cli(&cfg, &["list"]);
    assert!(!ok && err.contains("in use"), "{err}");
    ben.cancel().await.unwrap();
    gw.stop();

    // `toolgate route learned`: list shows who taught what; export writes route_examples
    // lines; forget undoes it (the next start asks again); import brings it back.
    let (ok, out, err) = learned_cli(&cfg, &["list", "--json"]);
    assert!(ok, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let teachers: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["principal"].as_str().unwrap())
        .collect();
    assert_eq!(teachers.len(), 2, "{out}");
    assert!(
        rows.iter()
            .all(|r| r["name"] == "append_note" && r["profile"] == "team"),
        "{out}"
    );
    let exported = dir.path("learned.jsonl");
    let (ok, _, err) = learned_cli(&cfg, &["export", "--out", exported.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines: Vec<Value> = std::fs::read_to_string(&exported)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), rows.len());
    assert!(
        lines
            .iter()
            .all(|l| l["query"] == TASK && l["expected"] == json!(["notes/append_note"])),
        "{lines:?}"
    );
    let (ok, _, err) = learned_cli(&cfg, &["forget"]);
    assert!(
        !ok && err.contains("--tool"),
        "forget without a filter: {err}"
    );
    let (ok, out, err) = learned_cli(&cfg, &["forget", "--tool", "notes/append_note"]);
    assert!(
        ok && out.contains(&format!("forgot {} examples", rows.len())),
        "{out}{err}"
    );
    let mut gw = HttpGateway::start(&cfg, &[]);
    let ben = connect_as(&gw.url, BEN).await;
    let r = route(&ben, TASK).await;
    assert_eq!(r["decision"], "clarify", "after forget: {r}");
    assert_ne!(
        r["candidates"][0]["name"], "append_note",
        "after forget: {r}"
    );
    ben.cancel().await.unwrap();
    gw.stop();
    let (ok, out, err) = learned_cli(&cfg, &["import", exported.to_str().unwrap()]);
    assert!(
        ok && out.contains(&format!("imported {}", rows.len())),
        "{out}{err}"
    );
    let gw = HttpGateway::start(&cfg, &[]);
    let ann = connect_as(&gw.url, ANN).await;
    let r = route(&ann, PARAPHRASE).await;
    assert_eq!(
        selected(&r).as_deref(),
        Some("notes/append_note"),
        "after import: {r}"
    );
    ann.cancel().await.unwrap();
}

/// Runs `toolgate route learned ARGS --config CFG` on the store the test's gateways use
/// (`HttpGateway` puts it under the test's folder): (success, stdout, stderr).
fn learned_cli(cfg: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(toolgate())
        .env("XDG_STATE_HOME", cfg.parent().unwrap().join("state"))
        .args(["route", "learned"])
        .args(args)
        .arg("--config")
        .arg(cfg)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn destructive_tools_failed_calls_and_mode_off_select_nothing() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&config(&dir, ""), &[]);
    let ann = connect_as(&gw.url, ANN).await;
    let ben = connect_as(&gw.url, BEN).await;
    // Two principals agree on a destructive tool: it moves up, but route still asks.
    let task = "note Eve has moved away";
    for who in [&ann, &ben] {
        assert!(answer(who, task, "notes/delete_note", json!({"text": "Eve"})).await);
    }
    let r = route(&ann, task).await;
    assert_eq!(
        r["decision"], "clarify",
        "a destructive tool selected on learned evidence: {r}"
    );
    assert_eq!(r["candidates"][0]["name"], "delete_note", "{r}");
    // Calls that fail teach nothing: the fixture errors on `_error`.
    let task = "note the budget meeting";
    for who in [&ann, &ben] {
        assert!(
            !answer(
                who,
                task,
                "notes/append_note",
                json!({"_error": "no such note"})
            )
            .await,
            "the call was meant to fail"
        );
    }
    let r = route(&ann, task).await;
    assert_eq!(r["decision"], "clarify", "{r}");
    assert!(
        !learned_records(&dir)
            .iter()
            .any(|r| r["tool"] == "notes/append_note"),
        "a failed call was learned"
    );
    ann.cancel().await.unwrap();
    ben.cancel().await.unwrap();

    // mode = "off": the same agreement teaches nothing.
    let dir = TestDir::new();
    let gw = HttpGateway::start(&config(&dir, "[guided.learning]\nmode = \"off\""), &[]);
    let ann = connect_as(&gw.url, ANN).await;
    let ben = connect_as(&gw.url, BEN).await;
    for who in [&ann, &ben] {
        assert!(
            answer(
                who,
                TASK,
                "notes/append_note",
                json!({"text": "Bob: coffee"})
            )
            .await
        );
    }
    let r = route(&ann, TASK).await;
    assert_eq!(r["decision"], "clarify", "{r}");
    assert_ne!(
        r["candidates"][0]["name"], "append_note",
        "learned with mode off: {r}"
    );
    assert!(learned_records(&dir).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_one_redis_learn_together() {
    let dir = TestDir::new();
    let Some((_redis, store)) = fleet::redis_store(&dir) else {
        return;
    };
    let cfg = config(&dir, &store);
    let env = [(
        "TOOLGATE_STORE_KEY",
        "0f1c0a9e3b7d2468ace013579bdf2468ace013579bdf2468ace013579bdf2468",
    )];
    let (a, _) = HttpGateway::start_with_env(&cfg, &[], None, &env);
    let (b, _) = HttpGateway::start_with_env(&cfg, &[], None, &env);
    let ann_a = connect_as(&a.url, ANN).await;
    let ann_b = connect_as(&b.url, ANN).await;
    let ben_b = connect_as(&b.url, BEN).await;

    // Ann is asked on A and answers on B (a load balancer without stickiness).
    let r = route(&ann_a, TASK).await;
    assert_eq!(r["decision"], "clarify", "{r}");
    let sel = r["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "append_note")
        .unwrap()["selectionId"]
        .as_str()
        .unwrap()
        .to_string();
    let r = request(
        &ann_b,
        "execute",
        json!({"selectionId": sel, "arguments": {"text": "Bob: coffee"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    // Ben agrees on B.
    assert!(
        answer(
            &ben_b,
            TASK,
            "notes/append_note",
            json!({"text": "Bob: coffee"})
        )
        .await
    );
    assert_eq!(learned_records(&dir).len(), 2, "both choices taught");
    // A reads the shared set again within seconds, and selects.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = route(&ann_a, PARAPHRASE).await;
        if selected(&r).as_deref() == Some("notes/append_note") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replica A never saw what B learned: {r}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    for c in [ann_a, ann_b, ben_b] {
        c.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_browse_followed_by_a_call_of_a_listed_tool_teaches() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&config(&dir, ""), &[]);
    let ann = connect_as(&gw.url, ANN).await;
    let ben = connect_as(&gw.url, BEN).await;
    let browse = |who| async move {
        let r = request(who, "route", json!({"task": TASK, "detail": "names"})).await;
        let s = structured(&r);
        assert_eq!(s["decision"], "list", "{s}");
        assert!(
            s["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "append_note"),
            "{s}"
        );
    };
    // Ann browses, then calls the tool by its name.
    browse(&ann).await;
    let r = request(
        &ann,
        "execute",
        json!({"tool": "notes/append_note", "arguments": {"text": "Bob: coffee"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    // Ben browses, routes the listed name (as the listing says to) and executes that.
    browse(&ben).await;
    let r = route(&ben, "notes/append_note").await;
    let sel = r["selectionId"].as_str().unwrap_or_else(|| panic!("{r}"));
    let r = request(
        &ben,
        "execute",
        json!({"selectionId": sel, "arguments": {"text": "Bob: coffee"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(learned_records(&dir).len(), 2);
    let r = route(&ann, PARAPHRASE).await;
    assert_eq!(selected(&r).as_deref(), Some("notes/append_note"), "{r}");
    // A call of a tool the browse did not list teaches nothing: read_file after a browse
    // of the notes server's tools.
    let r = request(
        &ann,
        "route",
        json!({"task": "note the budget", "detail": "names", "server": "notes"}),
    )
    .await;
    let listed = structured(&r)["tools"].clone();
    assert!(
        !listed
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "read_file"),
        "{listed}"
    );
    let r = request(
        &ann,
        "execute",
        json!({"tool": "files/read_file", "arguments": {"path": "x"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(
        learned_records(&dir).len(),
        2,
        "a tool the browse did not list was learned"
    );
    ann.cancel().await.unwrap();
    ben.cancel().await.unwrap();
}
