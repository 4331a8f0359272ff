//! Tasks in their 2025-11-25 form (task-augmented `tools/call`, `tasks/get`,
//! `tasks/result`, `tasks/cancel`) at the front, over a real HTTP session and over stdio,
//! with `fixture --conformance` as a real upstream child process: the `initialize` answer
//! declares the `tasks` capability and `tools/list` each tool's `execution.taskSupport`; a
//! task-augmented call answers `{task}` at once; `tasks/result` waits for the call's own
//! result (on the guided surface, the meta-tool's answer); a cancelled task cancels its
//! upstream call; `tasks/list` lists the caller's tasks; and two replicas on one Redis serve
//! each other's tasks. (The Python SDK's own client for this form is driven by
//! tests/peers/test_tasks_2025.py.)

mod common;
#[allow(dead_code, reason = "this test starts Redis only, not HAProxy")]
mod fleet;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

/// A 2025-11-25 session over HTTP: initialize (declaring tasks), initialized, requests.
struct Session {
    http: reqwest::Client,
    url: String,
    id: String,
    next: u64,
}

impl Session {
    async fn open(url: &str) -> (Self, Value) {
        let http = reqwest::Client::new();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {"requests": {"elicitation": {"create": {}}}}},
            "clientInfo": {"name": "tasks-2025", "version": "1"}}});
        let r = (http.post(url).header("accept", ACCEPT).json(&init).send())
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        let id = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let answer = message(&r.text().await.unwrap());
        let session = Session {
            http,
            url: url.to_string(),
            id,
            next: 1,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = session.post(&note).await;
        assert!(r.status().is_success(), "{}", r.status());
        (session, answer)
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        (self.http.post(&self.url))
            .header("accept", ACCEPT)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-11-25")
            .json(body)
            .send()
            .await
            .unwrap()
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let r = self.post(&body).await;
        assert!(r.status().is_success(), "{method}: {}", r.status());
        let answer = message(&r.text().await.unwrap());
        assert_eq!(answer["id"], self.next, "{answer}");
        answer
    }

    /// A task-augmented call: its task id.
    async fn task(&mut self, tool: &str, args: Value) -> String {
        let params = json!({"name": tool, "arguments": args, "task": {"ttl": 60000}});
        let answer = self.request("tools/call", params).await;
        let task = &answer["result"]["task"];
        assert_eq!(task["status"], "working", "{answer}");
        assert!(
            task["ttl"].is_u64() && task["pollInterval"].is_u64(),
            "{answer}"
        );
        assert!(
            task["createdAt"].as_str().unwrap().ends_with('Z'),
            "{answer}"
        );
        task["taskId"].as_str().unwrap().to_string()
    }
}

/// The sealing key of the Redis test's state store.
const KEY: &str = "5f1c0a9e3b7d2468ace013579bdf2468ace013579bdf2468ace013579bdf2468";

/// The gateway in direct mode, the conformance fixture as upstream `cf`, `tables` added to
/// its configuration.
fn gateway(dir: &TestDir, tables: &[String]) -> HttpGateway {
    let mut all = vec![dir.conformance_upstream("cf")];
    all.extend_from_slice(tables);
    let config = dir.config("mode = \"direct\"", &all);
    HttpGateway::start_with_env(&config, &[], None, &[("TOOLGATE_STORE_KEY", KEY)]).0
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"))
}

#[tokio::test]
async fn a_2025_session_gets_tasks_it_follows_to_their_results() {
    let dir = TestDir::new();
    let gw = gateway(&dir, &[]);
    let url = format!("{}/direct", gw.url);
    let (mut s, init) = Session::open(&url).await;
    // What a 2025-11-25 client reads before it asks for a task.
    let tasks = &init["result"]["capabilities"]["tasks"];
    assert_eq!(tasks["requests"]["tools"]["call"], json!({}), "{init}");
    assert_eq!(tasks["cancel"], json!({}), "{init}");
    assert_eq!(tasks["list"], json!({}), "{init}");
    let listed = s.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(!tools.is_empty(), "{listed}");
    for tool in tools {
        assert_eq!(tool["execution"]["taskSupport"], "optional", "{tool}");
    }

    // A task-augmented call is a task at once, however quick; tasks/result waits for it.
    let kept = s
        .task("cf_slow_compute", json!({"seconds": 0.8, "label": "kept"}))
        .await;
    let id = kept.clone();
    let got = s.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["taskId"], id.as_str(), "{got}");
    assert_eq!(got["result"]["status"], "working", "{got}");
    let done = s.request("tasks/result", json!({"taskId": id})).await;
    let result = &done["result"];
    assert!(text(result).contains("slow_compute kept done"), "{done}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "{done}"
    );
    let got = s.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    // Asked again, the same result.
    let again = s.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(text(&again["result"]), text(result), "{again}");

    // A tool's own error completes the task; its result says so.
    let erred = s.task("cf_test_error_handling", json!({})).await;
    let id = erred.clone();
    let done = s.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(done["result"]["isError"], true, "{done}");

    // Cancelling a running task cancels its upstream call; a second cancel is refused.
    let cancelled_id = s.task("cf_test_cancellable", json!({})).await;
    let id = cancelled_id.clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled = s.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let got = s.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    let twice = s.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(twice["error"]["code"], -32602, "{twice}");
    assert!(
        twice["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already ended"),
        "{twice}"
    );
    let result = s.request("tasks/result", json!({"taskId": id})).await;
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{result}"
    );
    let mut count = String::new();
    for _ in 0..50 {
        let r = s
            .request("tools/call", json!({"name": "cf_test_cancelled_count"}))
            .await;
        count = text(&r["result"]).to_string();
        if count == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(count, "1", "the fixture saw its call cancelled");

    // tasks/list: the caller's tasks, oldest first, with the ids their calls answered.
    let running = s
        .task("cf_slow_compute", json!({"seconds": 30, "label": "listed"}))
        .await;
    let list = s.request("tasks/list", json!({})).await;
    let listed: Vec<(&str, &str)> = (list["result"]["tasks"].as_array())
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| (t["taskId"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            (kept.as_str(), "completed"),
            (erred.as_str(), "completed"),
            (cancelled_id.as_str(), "cancelled"),
            (running.as_str(), "working"),
        ],
        "{list}"
    );
    assert!(list["result"]["nextCursor"].is_null(), "{list}");
    // Listing delivered nothing: the first result is still there.
    let again = s.request("tasks/result", json!({"taskId": kept})).await;
    assert!(text(&again["result"]).contains("kept done"), "{again}");
    let bad = s.request("tasks/list", json!({"cursor": "page-2"})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let cancelled = s.request("tasks/cancel", json!({"taskId": running})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");

    // Unknown ids, and a plain call on the same session.
    let unknown = s.request("tasks/get", json!({"taskId": "op-0.1"})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let plain = s
        .request(
            "tools/call",
            json!({"name": "cf_slow_compute", "arguments": {"seconds": 0}}),
        )
        .await;
    assert!(plain["result"]["task"].is_null(), "{plain}");
    assert!(text(&plain["result"]).contains("done"), "{plain}");

    // On the guided surface, a meta-tool's call as a task ends with that tool's answer.
    let (mut g, _) = Session::open(&format!("{}/guided", gw.url)).await;
    let listed = g.request("tools/list", json!({})).await;
    let route = (listed["result"]["tools"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .find(|n| n.ends_with("route"))
        .unwrap_or_else(|| panic!("{listed}"));
    let id = g
        .task(&route, json!({"task": "compute something slowly"}))
        .await;
    let done = g.request("tasks/result", json!({"taskId": id})).await;
    assert!(text(&done["result"]).contains("slow_compute"), "{done}");
}

#[tokio::test]
async fn a_2025_task_over_stdio() {
    use tokio::io::AsyncWriteExt;
    let dir = TestDir::new();
    let config = dir.config("mode = \"direct\"", &[dir.conformance_upstream("cf")]);
    let (_child, mut stdin, mut lines) = raw_stdio_gateway(&config);
    let mut send = async |message: Value| {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    };
    // The answer to request `id` (notifications between are skipped).
    let mut read = async |id: u64| -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("an answer within 30 s")
                .unwrap()
                .expect("a line");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "tasks-2025", "version": "1"}}}),
    )
    .await;
    let init = read(0).await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{init}"
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    let listed = read(1).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .all(|t| t["execution"]["taskSupport"] == "optional"),
        "{listed}"
    );
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "cf_slow_compute", "arguments": {"seconds": 0.3, "label": "piped"},
        "task": {"ttl": 60000}}}),
    )
    .await;
    let made = read(2).await;
    let id = made["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}}))
        .await;
    let done = read(3).await;
    assert_eq!(done["id"], 3, "{done}");
    assert!(
        text(&done["result"]).contains("slow_compute piped done"),
        "{done}"
    );
}

#[tokio::test]
async fn two_replicas_on_one_redis_serve_each_others_2025_tasks() {
    let dir = TestDir::new();
    let Some((_redis, store)) = fleet::redis_store(&dir) else {
        return;
    };
    let a = gateway(&dir, &[store]);
    let env = [("TOOLGATE_STORE_KEY", KEY)];
    let (b, _) = HttpGateway::start_with_env(&dir.path("toolgate.toml"), &[], None, &env);
    let (mut on_a, _) = Session::open(&format!("{}/direct", a.url)).await;
    let (mut on_b, _) = Session::open(&format!("{}/direct", b.url)).await;
    let id = on_a
        .task("cf_slow_compute", json!({"seconds": 1, "label": "shared"}))
        .await;
    // The other replica says it runs, waits for its end, and delivers its result.
    let got = on_b.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    let list = on_b.request("tasks/list", json!({})).await;
    assert_eq!(list["result"]["tasks"][0]["taskId"], id.as_str(), "{list}");
    assert_eq!(list["result"]["tasks"][0]["status"], "working", "{list}");
    let done = on_b.request("tasks/result", json!({"taskId": id})).await;
    assert!(
        text(&done["result"]).contains("slow_compute shared done"),
        "{done}"
    );
    let got = on_b.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    let list = on_a.request("tasks/list", json!({})).await;
    let tasks = list["result"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{list}");
    assert_eq!(tasks[0]["status"], "completed", "{list}");
}
