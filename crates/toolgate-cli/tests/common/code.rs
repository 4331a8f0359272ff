//! Code mode test helpers: a gateway with code mode on and short limits, and running
//! programs through it.

use super::*;
use serde_json::{json, Value};

/// The shared test catalog plus tools for names, destruction and strict schemas. Its
/// unannotated tools say they are not destructive (`destructiveHint: false`): the policy
/// reads an unannotated tool as destructive, and programs may not call those.
pub fn catalog() -> Value {
    let mut c = test_catalog();
    for entry in c.as_array_mut().unwrap() {
        let tool = entry["tool"].as_object_mut().unwrap();
        tool.entry("annotations")
            .or_insert_with(|| json!({"destructiveHint": false}));
    }
    let extra = json!([
        {"server": "gamma", "tool": {"name": "__proto__", "description": "A tool with a hostile name.",
            "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": false}}},
        {"server": "gamma", "tool": {"name": "delete-item", "description": "Delete an item for good.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "annotations": {"destructiveHint": true}}},
    ]);
    c.as_array_mut()
        .unwrap()
        .extend(extra.as_array().unwrap().iter().cloned());
    c
}

/// A gateway with code mode on and short limits, so hostile programs end fast.
pub fn setup(code: &str) -> (TestDir, std::path::PathBuf) {
    // Generous, so a program that should finish does on a loaded machine; programs that
    // should time out ask for `HOSTILE_TIMEOUT_MS` themselves (see `expect`).
    setup_with(10_000, code)
}

/// The deadline a program expected to time out runs with, so the test stays short.
pub const HOSTILE_TIMEOUT_MS: u64 = 1500;

/// `setup` with another run deadline.
pub fn setup_with(timeout_ms: u64, code: &str) -> (TestDir, std::path::PathBuf) {
    let dir = TestDir::new();
    dir.write("catalog.json", &catalog().to_string());
    let mut tables = vec![format!(
        "[code]\nenabled = true\ntimeout_ms = {timeout_ms}\ngrace_ms = 500\nmax_tool_result_bytes = 1048576\n{code}\n"
    )];
    for s in ["alpha", "beta", "gamma"] {
        tables.push(dir.stdio_upstream(s, s, &[]));
    }
    let config = dir.config("mode = \"guided\"", &tables);
    (dir, config)
}

/// `setup(code)` with `extra` TOML after it and an audit log at `<dir>/audit.jsonl`
/// (`audit` TOML goes in its `[policy.audit]` table; read it with `audit_records`).
#[allow(dead_code, reason = "not every code-mode test audits")]
pub fn setup_audited(code: &str, extra: &str, audit: &str) -> (TestDir, std::path::PathBuf) {
    let (dir, config) = setup(code);
    let base = std::fs::read_to_string(&config).unwrap();
    let path = dir.path("audit.jsonl").display().to_string();
    let config = dir.write(
        "toolgate.toml",
        &format!("{base}\n{extra}\n[policy.audit]\n{audit}\npath = {path:?}\n"),
    );
    (dir, config)
}

pub use super::structured;

/// Runs a program; returns the structured answer and the text.
pub async fn run(client: &Client, code: &str) -> (Value, String) {
    let r = call(client, "execute_code", json!({"code": code})).await;
    (structured(&r), text(&r))
}

/// Runs a program with its own deadline (at most the configured one).
pub async fn run_with(client: &Client, code: &str, timeout_ms: u64) -> (Value, String) {
    let r = call(
        client,
        "execute_code",
        json!({"code": code, "timeout_ms": timeout_ms}),
    )
    .await;
    (structured(&r), text(&r))
}

/// Runs a program and checks how it ended.
pub async fn expect(client: &Client, code: &str, status: &str) -> Value {
    let (s, t) = if status == "timeout" {
        run_with(client, code, HOSTILE_TIMEOUT_MS).await
    } else {
        run(client, code).await
    };
    assert_eq!(s["status"], status, "{code}\n{t}");
    assert!(s["calls"].is_array(), "calls are always there: {s}");
    s
}

/// Waits (bounded, generous) until programs see `tools.<server>.<tool>`: on a loaded machine
/// an upstream can miss the startup wait (a first connect that fails counts as settled)
/// and join a little later.
pub async fn wait_for_tool(client: &Client, server: &str, tool: &str) {
    let probe = format!("return typeof tools.{server}?.{tool}");
    let mut last = String::new();
    for _ in 0..120 {
        let (s, t) = run(client, &probe).await;
        if s["result"] == "function" {
            return;
        }
        last = t;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    panic!("tools.{server}.{tool} never appeared: {last}");
}

pub async fn healthy(client: &Client) {
    let (s, t) = run(client, "return 40 + 2").await;
    assert_eq!(s["result"], 42, "{t}");
}
