//! Every way to reach a tool passes the same gate: guided execute, the direct surface, a
//! pinned tool, an expanded tool, a program's call, a skill's call, and describe_tools.
//! One real gateway over HTTP (its guided and direct endpoints, one API key, so one owner
//! of PII tokens), the fixture as stdio upstreams, real sandbox workers. Each path shows
//! the same refusal for a tool the profile hides and the key forbids, the same validation
//! error, the same PII token, a bound on a large result, and one audit record per call.

mod common;
mod policy_support;
use common::skills::write_skill;
use common::*;
use policy_support::{audit, call_on, connect_as, hash, KeyedClient};
use rmcp::model::CallToolResult;
use serde_json::{json, Value};

const AGENT: &str = "tg_agent_key_for_gate_tests";
/// The per-tool budget of the two echoing tools, in tokens.
const BUDGET: usize = 1000;
const MAIL: &str = "ann@example.com";

fn catalog() -> Value {
    let message = json!({"type": "object", "properties": {"message": {"type": "string"}},
        "required": ["message"]});
    json!([
        {"server": "alpha", "tool": {"name": "echo", "description": "Echo the message back.",
            "inputSchema": message, "annotations": {"readOnlyHint": true}}},
        {"server": "alpha", "tool": {"name": "note", "description": "Take a note of a message.",
            "inputSchema": message, "annotations": {"readOnlyHint": true}}},
        {"server": "crm", "tool": {"name": "delete_record", "description": "Delete a CRM record.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
            "annotations": {"destructiveHint": true}}},
    ])
}

/// A skill that makes whatever call its input names.
const RELAY_MD: &str = "---
name: relay
description: Relay one tool call through a skill.
servers: [alpha]
input_schema:
  type: object
  properties:
    server: {type: string}
    tool: {type: string}
    args: {type: object}
  required: [server, tool, args]
---
";
const RELAY_JS: &str = "return await tools.call(input.server, input.tool, input.args);";

fn setup() -> (TestDir, std::path::PathBuf) {
    let dir = TestDir::new();
    dir.write("catalog.json", &catalog().to_string());
    write_skill(&dir, "relay", RELAY_MD, RELAY_JS);
    let tables = format!(
        r#"[guided]
wait_secs = 10
pinned = ["alpha/echo", "crm/delete_record"]
expand_selected = true
tool_budgets = {{ "alpha/echo" = {BUDGET}, "alpha/note" = {BUDGET} }}
[code]
enabled = true
timeout_ms = 10000
grace_ms = 500
pii = true
pii_fields = ["name"]
skills_dir = "skills"
max_tool_result_bytes = 100000
[policy.audit]
path = {audit:?}
[policy.profiles.sales]
tools = ["alpha/*", "skills/*"]
[policy.keys.agent]
hash = "{h}"
scopes = ["alpha/*", "skills/*"]
tier = "write"
profile = "sales"
"#,
        audit = dir.path("audit.jsonl").display().to_string(),
        h = hash(AGENT),
    );
    let config = dir.config(
        "mode = \"guided\"",
        &[
            tables,
            dir.stdio_upstream("alpha", "alpha", &[]),
            dir.stdio_upstream("crm", "crm", &[]),
        ],
    );
    (dir, config)
}

struct Paths {
    guided: KeyedClient<TestClient>,
    direct: KeyedClient<TestClient>,
}

/// One call of `server/tool` with `args` on `path`; the answer as JSON (the program's
/// and the skill's: their structured answer).
async fn on_path(p: &Paths, path: &str, tool: &str, args: Value) -> CallToolResult {
    let (server, name) = tool.split_once('/').unwrap();
    let exposed = format!("{server}_{name}");
    match path {
        "execute" => {
            call_on(
                &p.guided,
                "execute",
                json!({"tool": tool, "arguments": args}),
            )
            .await
        }
        "direct" => call_on(&p.direct, &exposed, args).await,
        "pinned" | "expanded" => call_on(&p.guided, &exposed, args).await,
        "program" => {
            let code = format!(
                "try {{ return await tools.call({server:?}, {name:?}, input) }} catch (e) {{ return {{code: e.code, message: e.message}} }}"
            );
            call_on(
                &p.guided,
                "execute_code",
                json!({"code": code, "input": args}),
            )
            .await
        }
        "skill" => {
            let input = json!({"server": server, "tool": name, "args": args});
            call_on(
                &p.guided,
                "execute",
                json!({"tool": "skills/relay", "arguments": input}),
            )
            .await
        }
        other => unreachable!("{other}"),
    }
}

fn all_text(r: &CallToolResult) -> String {
    serde_json::to_string(r).unwrap()
}

/// The refusal code each path reports: the structured `error` of execute and direct, the
/// `(refused: CODE)` a program's or a skill's ToolError message ends with.
fn refusal_code(path: &str, r: &CallToolResult) -> String {
    let s = structured(r);
    let message = match path {
        "program" => s["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        "skill" => s["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        _ => return s["error"].as_str().unwrap_or_default().to_string(),
    };
    let code = message.rsplit_once("(refused: ").map(|(_, c)| c);
    code.and_then(|c| c.split(')').next())
        .unwrap_or_default()
        .to_string()
}

/// The call records of `tool` written since the log had `before` lines (start records
/// left out: a call that ran has a start and an end).
fn new_records(dir: &TestDir, before: usize, tool: &str) -> Vec<Value> {
    audit(dir)
        .into_iter()
        .skip(before)
        .filter(|r| {
            r["type"] == "call"
                && r["phase"] != "start"
                && format!(
                    "{}/{}",
                    r["server"].as_str().unwrap(),
                    r["tool"].as_str().unwrap()
                ) == tool
        })
        .collect()
}

/// The PII tokens in a text.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("[[EMAIL:") {
        let end = rest[i..]
            .find("]]")
            .map(|e| i + e + 2)
            .unwrap_or(rest.len());
        out.push(rest[i..end].to_string());
        rest = &rest[end..];
    }
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn every_path_passes_the_same_gate() {
    let (dir, config) = setup();
    let gw = HttpGateway::start(&config, &[]);
    let paths = Paths {
        guided: connect_as(&format!("{}/mcp/guided", gw.base()), AGENT).await,
        direct: connect_as(&format!("{}/mcp/direct", gw.base()), AGENT).await,
    };
    // Expanded: route selects alpha/note by name, and the session lists it from then on.
    let r = call_on(&paths.guided, "route", json!({"task": "alpha/note"})).await;
    assert_eq!(structured(&r)["decision"], "select", "{}", text(&r));
    let listed = tool_names(&paths.guided).await;
    assert!(listed.contains(&"alpha_note".to_string()), "{listed:?}");
    assert!(
        listed.contains(&"alpha_echo".to_string()),
        "pinned: {listed:?}"
    );
    assert!(
        !listed.contains(&"crm_delete_record".to_string()),
        "hidden: {listed:?}"
    );

    // A tool the profile hides and the key forbids: the same refusal, `scope`, on every
    // path that can name it (route never selects it, so it is never expanded), and one
    // audit record each with that code.
    let hidden = "crm/delete_record";
    for path in ["execute", "direct", "pinned", "program", "skill"] {
        let before = audit(&dir).len();
        let r = on_path(&paths, path, hidden, json!({"id": "r1"})).await;
        assert_eq!(refusal_code(path, &r), "scope", "{path}: {}", all_text(&r));
        let records = new_records(&dir, before, hidden);
        assert_eq!(records.len(), 1, "{path}: {records:?}");
        assert_eq!(records[0]["code"], "scope", "{path}: {records:?}");
        assert_eq!(records[0]["decision"], "refused", "{path}: {records:?}");
    }
    // describe_tools and route never reveal it.
    let r = call_on(&paths.guided, "describe_tools", json!({"tools": [hidden]})).await;
    assert!(r.is_error == Some(true) && !text(&r).contains("declare namespace tools.crm"));
    let r = call_on(
        &paths.guided,
        "describe_tools",
        json!({"search": "delete a record"}),
    )
    .await;
    assert!(!all_text(&r).contains("delete_record"), "{}", all_text(&r));
    let r = call_on(
        &paths.guided,
        "route",
        json!({"task": "delete a CRM record"}),
    )
    .await;
    assert!(!all_text(&r).contains("crm"), "{}", all_text(&r));

    // Bad arguments: the same validation error (the same report) on every path.
    let mut reports = Vec::new();
    for (path, tool) in [
        ("execute", "alpha/echo"),
        ("direct", "alpha/echo"),
        ("pinned", "alpha/echo"),
        ("expanded", "alpha/note"),
        ("execute", "alpha/note"),
        ("program", "alpha/echo"),
        ("skill", "alpha/echo"),
    ] {
        let before = audit(&dir).len();
        let r = on_path(&paths, path, tool, json!({"message": 5})).await;
        assert_eq!(
            refusal_code(path, &r),
            "invalid_arguments",
            "{path}: {}",
            all_text(&r)
        );
        let shown = all_text(&r);
        assert!(
            shown.contains("/message") && shown.contains("string"),
            "{path}: {shown}"
        );
        if ["execute", "direct", "pinned", "expanded"].contains(&path) {
            let report = structured(&r)["validation"].clone();
            assert!(report.is_object(), "{path}: {shown}");
            reports.push(report);
        }
        let records = new_records(&dir, before, tool);
        assert_eq!(records.len(), 1, "{path}: {records:?}");
        assert_eq!(
            records[0]["code"], "invalid_arguments",
            "{path}: {records:?}"
        );
        assert_eq!(records[0]["outcome"], "not_run", "{path}: {records:?}");
    }
    assert!(reports.windows(2).all(|w| w[0] == w[1]), "{reports:?}");

    // PII: every path hands back the same token for the same address, never the address,
    // and one audit record per call (a program's and a skill's linked to their run).
    let mut seen = Vec::new();
    for (path, tool) in [
        ("execute", "alpha/echo"),
        ("direct", "alpha/echo"),
        ("pinned", "alpha/echo"),
        ("expanded", "alpha/note"),
        ("program", "alpha/echo"),
        ("skill", "alpha/echo"),
    ] {
        let before = audit(&dir).len();
        let r = on_path(
            &paths,
            path,
            tool,
            json!({"message": format!("write to {MAIL}")}),
        )
        .await;
        assert_ne!(r.is_error, Some(true), "{path}: {}", all_text(&r));
        let shown = all_text(&r);
        assert!(!shown.contains(MAIL), "{path}: {shown}");
        let found = tokens(&shown);
        assert_eq!(found.len(), 1, "{path}: {shown}");
        seen.push(found[0].clone());
        let records = new_records(&dir, before, tool);
        assert_eq!(records.len(), 1, "{path}: {records:?}");
        assert_eq!(records[0]["outcome"], "ok", "{path}: {records:?}");
        if path == "program" || path == "skill" {
            let run = records[0]["run"]
                .as_str()
                .expect("a program's call names its run");
            let runs: Vec<Value> = audit(&dir)
                .into_iter()
                .skip(before)
                .filter(|r| r["type"] == "run" && r["run"] == run)
                .collect();
            let phases: Vec<&str> = runs.iter().filter_map(|r| r["phase"].as_str()).collect();
            assert_eq!(phases, ["start", "end"], "{path}: {runs:?}");
            assert_eq!(runs[1]["status"], "ok", "{runs:?}");
        } else {
            assert!(records[0].get("run").is_none(), "{path}: {records:?}");
        }
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    // The token goes back in as the address on every path: the tool's answer is the
    // same token again (a forged one is refused, so it was restored, not passed through).
    for (path, tool) in [
        ("execute", "alpha/echo"),
        ("direct", "alpha/echo"),
        ("expanded", "alpha/note"),
    ] {
        let r = on_path(&paths, path, tool, json!({"message": seen[0]})).await;
        assert_eq!(
            tokens(&all_text(&r)),
            [seen[0].clone()],
            "{path}: {}",
            all_text(&r)
        );
        let forged = on_path(&paths, path, tool, json!({"message": "[[EMAIL:zzzzzz]]"})).await;
        assert_eq!(
            refusal_code(path, &forged),
            "pii_token",
            "{path}: {}",
            all_text(&forged)
        );
    }

    // A large result: bounded on every path. Execute pages it (a cursor for the rest);
    // direct, pinned and expanded cut it at the tool's budget with a note; a program may
    // not take in more than code.max_tool_result_bytes.
    let big = json!({"message": "big", "_result_bytes": 200000});
    let r = on_path(&paths, "execute", "alpha/echo", big.clone()).await;
    assert!(structured(&r)["nextCursor"].is_string(), "{}", text(&r));
    assert!(text(&r).len() < 200000);
    for (path, tool) in [
        ("direct", "alpha/echo"),
        ("pinned", "alpha/echo"),
        ("expanded", "alpha/note"),
    ] {
        let r = on_path(&paths, path, tool, big.clone()).await;
        let t = text(&r);
        assert!(t.len() < 200000, "{path}: {} chars", t.len());
        assert!(
            t.contains(&format!("[toolgate] result cut at {BUDGET} tokens"))
                && t.contains("left out"),
            "{path}: {}",
            &t[t.len().saturating_sub(600)..]
        );
    }
    let r = on_path(&paths, "program", "alpha/echo", big).await;
    assert_eq!(
        structured(&r)["result"]["code"],
        "limit",
        "{}",
        all_text(&r)
    );

    // The whole trail still verifies.
    let out = std::process::Command::new(toolgate())
        .args(["audit", "verify", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
