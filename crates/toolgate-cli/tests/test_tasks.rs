//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) on the direct surface,
//! over real HTTP, with `fixture --conformance` as a real upstream child process. A
//! 2026-07-28 client that declares the extension gets a plain answer from a quick call and
//! a task from a slow one; `tasks/get` follows it to its inlined result; a tool's error is
//! `completed` with `isError`, an upstream's protocol error `failed` with the error; a
//! cancelled task cancels the upstream call; a client without the extension never gets a
//! task and may not use the task methods; a task belongs to the key that started it.

mod common;
mod policy_support;

use common::*;
use policy_support::hash;
use serde_json::{json, Value};
use std::time::Duration;

const A: &str = "tg_tasks_key_a_for_tests";
const B: &str = "tg_tasks_key_b_for_tests";

/// The gateway in direct mode, the conformance fixture as upstream `cf`; keys `a` and `b`
/// when `keys` is set.
fn gateway(dir: &TestDir, keys: bool) -> HttpGateway {
    let mut tables = vec![dir.conformance_upstream("cf")];
    if keys {
        tables.push(format!(
            "[policy.keys.a]\nhash = \"{}\"\nscopes = [\"*\"]\ntier = \"destructive\"\n\
             [policy.keys.b]\nhash = \"{}\"\nscopes = [\"*\"]\ntier = \"destructive\"\n",
            hash(A),
            hash(B)
        ));
    }
    let config = dir.config("mode = \"direct\"", &tables);
    HttpGateway::start(&config, &[])
}

async fn call(url: &str, tool: &str, args: Value, key: Option<&str>) -> Value {
    let params = json!({"name": tool, "arguments": args});
    let (status, answer) = post_modern(url, "tools/call", params, tasks_capabilities(), key).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

async fn task_request(url: &str, method: &str, id: &str, key: Option<&str>) -> Value {
    let params = json!({"taskId": id});
    post_modern(url, method, params, tasks_capabilities(), key)
        .await
        .1
}

/// Polls `tasks/get` until the task ends; its last state.
async fn until_done(url: &str, id: &str, key: Option<&str>) -> Value {
    for _ in 0..150 {
        let got = task_request(url, "tasks/get", id, key).await;
        let status = got["result"]["status"]
            .as_str()
            .unwrap_or_else(|| panic!("{got}"));
        if matches!(status, "completed" | "failed" | "cancelled") {
            return got["result"].clone();
        }
        assert!(matches!(status, "working"), "{got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {id} did not end within 15 s");
}

/// What the fixture counted as cancelled (`cf_test_cancelled_count`), polled for up to five
/// seconds until it reads `want`.
async fn cancelled_count(url: &str, want: &str) -> String {
    let mut seen = String::new();
    for _ in 0..50 {
        let count = call(url, "cf_test_cancelled_count", json!({}), None).await;
        seen = count["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        if seen == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

fn task_id(answer: &Value) -> String {
    assert_eq!(answer["result"]["resultType"], "task", "a task: {answer}");
    answer["result"]["taskId"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_slow_call_becomes_a_task_that_ends_with_its_result() {
    let dir = TestDir::new();
    let gw = gateway(&dir, false);
    let url = format!("{}/direct", gw.url);

    // A quick call is answered plainly.
    let quick = call(&url, "cf_greet", json!({"name": "World"}), None).await;
    assert_eq!(quick["result"]["resultType"], "complete", "{quick}");
    assert_eq!(quick["result"]["content"][0]["text"], "Hello, World!");

    let slow = call(
        &url,
        "cf_slow_compute",
        json!({"seconds": 1, "label": "t1"}),
        None,
    )
    .await;
    let id = task_id(&slow);
    let created = &slow["result"];
    assert_eq!(created["status"], "working", "{slow}");
    assert!(created["ttlMs"].as_u64().unwrap() > 0 && created["pollIntervalMs"].as_u64().is_some());
    assert!(created.get("result").is_none() && created.get("requestState").is_none());
    // Readable at once, and working.
    let now = task_request(&url, "tasks/get", &id, None).await;
    assert_eq!(now["result"]["status"], "working", "{now}");

    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("slow_compute t1 done"), "{text}");
    assert_eq!(done["createdAt"], created["createdAt"], "the same task");
    // Read again: still there (a retried poll gets the same answer).
    let again = task_request(&url, "tasks/get", &id, None).await;
    assert_eq!(again["result"]["status"], "completed", "{again}");
}

#[tokio::test]
async fn a_tools_error_completes_and_an_upstreams_protocol_error_fails() {
    let dir = TestDir::new();
    let gw = gateway(&dir, false);
    let url = format!("{}/direct", gw.url);

    let id = task_id(&call(&url, "cf_failing_job", json!({}), None).await);
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], true, "{done}");

    let id = task_id(&call(&url, "cf_protocol_error_job", json!({}), None).await);
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done.get("result").is_none(), "{done}");
    assert_eq!(done["error"]["code"], -32603, "{done}");
    let message = done["error"]["message"].as_str().unwrap();
    assert!(message.contains("protocol_error_job"), "{message}");
}

#[tokio::test]
async fn a_cancelled_task_cancels_its_upstream_call() {
    let dir = TestDir::new();
    let gw = gateway(&dir, false);
    let url = format!("{}/direct", gw.url);

    let id = task_id(&call(&url, "cf_test_cancellable", json!({}), None).await);
    let ack = task_request(&url, "tasks/cancel", &id, None).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    // The upstream saw the cancellation (the fixture counts what it was told to stop).
    let seen = cancelled_count(&url, "1").await;
    assert_eq!(seen, "1", "the upstream call was cancelled");
    // Cancelling an ended task is acknowledged the same way.
    let ack = task_request(&url, "tasks/cancel", &id, None).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    // An unknown task id is invalid params.
    let unknown = task_request(&url, "tasks/get", "op-nope.1", None).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn a_client_without_the_extension_gets_no_task_and_no_task_methods() {
    let dir = TestDir::new();
    let gw = gateway(&dir, false);
    let url = format!("{}/direct", gw.url);
    let params = json!({"name": "cf_slow_compute", "arguments": {"seconds": 0.5, "label": "sync"}});
    let (status, answer) = post_modern(&url, "tools/call", params, json!({}), None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert!(answer["result"].get("taskId").is_none(), "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("slow_compute sync done"), "{text}");

    let params = json!({"taskId": "op-anything.1"});
    let (_, refused) = post_modern(&url, "tasks/get", params, json!({}), None).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}

#[tokio::test]
async fn a_task_belongs_to_the_key_that_started_it() {
    let dir = TestDir::new();
    let gw = gateway(&dir, true);
    let url = format!("{}/direct", gw.url);

    let id = task_id(&call(&url, "cf_slow_compute", json!({"seconds": 1}), Some(A)).await);
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let params = match method {
            "tasks/update" => json!({"taskId": id, "inputResponses": {}}),
            _ => json!({"taskId": id}),
        };
        let (_, other) = post_modern(&url, method, params, tasks_capabilities(), Some(B)).await;
        assert_eq!(
            other["error"]["code"], -32602,
            "{method} by another key: {other}"
        );
        let said = other["error"]["message"].as_str().unwrap();
        assert!(
            !said.contains("another caller"),
            "nothing said about whose it is: {said}"
        );
    }
    // Untouched by B's attempts: A follows it to its result.
    let done = until_done(&url, &id, Some(A)).await;
    assert_eq!(done["status"], "completed", "{done}");
}

#[tokio::test]
async fn a_task_outlives_a_gateway_restart_as_far_as_it_can() {
    let dir = TestDir::new();
    let mut gw = gateway(&dir, false);
    let url = format!("{}/direct", gw.url);
    let ended = task_id(
        &call(
            &url,
            "cf_slow_compute",
            json!({"seconds": 0.6, "label": "kept"}),
            None,
        )
        .await,
    );
    let running = task_id(&call(&url, "cf_slow_compute", json!({"seconds": 60}), None).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    gw.stop();

    // The same configuration, so the same embedded store, on a new port.
    let config = dir.path("toolgate.toml");
    let gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/direct", gw.url);
    // The task that ended before the restart: its result was kept.
    let done = until_done(&url, &ended, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        done.to_string().contains("slow_compute kept done"),
        "{done}"
    );
    // The one still running when the gateway stopped: failed, saying why.
    let lost = until_done(&url, &running, None).await;
    assert_eq!(lost["status"], "failed", "{lost}");
    let message = lost["error"]["message"].as_str().unwrap();
    assert!(message.contains("restarted"), "{message}");
}

/// A client that declared tasks and elicitation.
fn asking_capabilities() -> Value {
    let mut caps = tasks_capabilities();
    caps["elicitation"] = json!({});
    caps
}

/// Polls `tasks/get` until the task waits for `n` answers; its state then.
async fn until_asked(url: &str, id: &str, n: usize) -> Value {
    for _ in 0..100 {
        let params = json!({"taskId": id});
        let (_, got) = post_modern(url, "tasks/get", params, asking_capabilities(), None).await;
        let asked = got["result"]["inputRequests"]
            .as_object()
            .map_or(0, |m| m.len());
        if got["result"]["status"] == "input_required" && asked == n {
            return got["result"].clone();
        }
        assert!(got["result"]["status"] == "working" || asked > 0, "{got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} never waited for {n} answers");
}

async fn answer(url: &str, id: &str, responses: Value) -> Value {
    let params = json!({"taskId": id, "inputResponses": responses});
    post_modern(url, "tasks/update", params, asking_capabilities(), None)
        .await
        .1
}

/// Both upstream eras: the 2026-07-28-only fixture answers `input_required`, the older one
/// sends `elicitation/create` requests during the call; either way the task waits.
#[tokio::test]
async fn a_task_waits_for_the_answers_its_upstream_asks_for() {
    for modern_only in [true, false] {
        let dir = TestDir::new();
        let fixture = match modern_only {
            true => format!(
                "[upstreams.cf]\ncommand = {:?}\nargs = [\"fixture\", \"--conformance\", \"--modern-only\"]\n",
                toolgate().display().to_string()
            ),
            false => dir.conformance_upstream("cf"),
        };
        let config = dir.config("mode = \"direct\"", &[fixture]);
        let gw = HttpGateway::start(&config, &[]);
        let url = format!("{}/direct", gw.url);

        // One question: asked, answered, and the call goes on to its result.
        let params = json!({"name": "cf_confirm_delete", "arguments": {"filename": "a.txt"}});
        let (_, created) =
            post_modern(&url, "tools/call", params, asking_capabilities(), None).await;
        let id = task_id(&created);
        let waiting = until_asked(&url, &id, 1).await;
        let (key, request) = waiting["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        assert_eq!(request["method"], "elicitation/create", "{waiting}");
        let ack = answer(
            &url,
            &id,
            json!({key: {"action": "accept", "content": {"confirm": true}}}),
        )
        .await;
        assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
        let done = until_done(&url, &id, None).await;
        assert_eq!(done["status"], "completed", "{done}");
        let text = done["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("confirm_delete a.txt: confirm=true"),
            "{text}"
        );

        // Two questions at once, answered one at a time: the task keeps waiting for the
        // other, which alone is still asked.
        let params = json!({"name": "cf_multi_input", "arguments": {}});
        let (_, created) =
            post_modern(&url, "tools/call", params, asking_capabilities(), None).await;
        let id = task_id(&created);
        let waiting = until_asked(&url, &id, 2).await;
        let keys: Vec<String> = waiting["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let content = json!({"action": "accept", "content": {"name": "Ada", "confirm": true}});
        answer(&url, &id, json!({&keys[0]: content})).await;
        let left = until_asked(&url, &id, 1).await;
        assert!(left["inputRequests"].get(&keys[1]).is_some(), "{left}");
        // A key that is not pending is left alone.
        answer(
            &url,
            &id,
            json!({&keys[0]: content, "never-asked": content}),
        )
        .await;
        assert_eq!(until_asked(&url, &id, 1).await["status"], "input_required");
        answer(&url, &id, json!({&keys[1]: content})).await;
        let done = until_done(&url, &id, None).await;
        let text = done["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("name=Ada") && text.contains("confirm=true"),
            "{text}"
        );
    }
}

/// Guided mode: `execute` that outlives `guided.wait` answers a client that declared tasks
/// with a task (the operation `continue` would follow), and its result is shaped as
/// `continue` shapes it: the first page within the budget, a cursor for the rest.
#[tokio::test]
async fn guided_execute_that_outlives_its_wait_is_a_task_shaped_like_continue() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"guided\"",
        &[
            "[guided]\nwait_secs = 0.2\n".to_string(),
            dir.stdio_upstream("alpha", "alpha", &[]),
        ],
    );
    let gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/guided", gw.url);
    let slow = json!({"tool": "alpha_echo", "arguments": {"message": "m", "_delay_ms": 800, "_result_bytes": 60_000}});
    let answer = call(&url, "execute", slow, None).await;
    let id = task_id(&answer);
    assert!(id.starts_with("g."), "{id}");
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    let cursor = done["result"]["structuredContent"]["nextCursor"].as_str();
    let cursor = cursor
        .unwrap_or_else(|| panic!("a paged result: {done}"))
        .to_string();
    let text = done["result"]["content"].to_string();
    assert!(text.contains("page 1 of"), "{text}");
    // The rest with continue, as for any execute.
    let next = call(&url, "continue", json!({"cursor": cursor}), None).await;
    assert_eq!(next["result"]["isError"], false, "{next}");

    // A quick execute is answered plainly, and a client without the extension gets the
    // operationId to follow with continue.
    let quick = call(
        &url,
        "execute",
        json!({"tool": "alpha_echo", "arguments": {"message": "q"}}),
        None,
    )
    .await;
    assert_eq!(quick["result"]["resultType"], "complete", "{quick}");
    let params = json!({"name": "execute", "arguments": {"tool": "alpha_echo", "arguments": {"message": "s", "_delay_ms": 800}}});
    let (_, plain) = post_modern(&url, "tools/call", params, json!({}), None).await;
    assert_eq!(
        plain["result"]["structuredContent"]["status"], "running",
        "{plain}"
    );
}

/// A 2026-07-28 upstream with tasks of its own (the fixture, `--modern-only`): the gateway
/// passes the client's declaration on and follows the upstream's task; until the client
/// has its answer, the upstream's `input_required` is the client's (MRTR, no task yet);
/// a tool that needs a task refuses a client that did not declare the extension with the
/// upstream's own -32021; cancelling the gateway's task cancels the upstream's.
#[tokio::test]
async fn an_upstream_with_tasks_of_its_own_is_followed_through_them() {
    let dir = TestDir::new();
    let fixture = format!(
        "[upstreams.cf]\ncommand = {:?}\nargs = [\"fixture\", \"--conformance\", \"--modern-only\"]\n",
        toolgate().display().to_string()
    );
    let config = dir.config("mode = \"direct\"", &[fixture]);
    let gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/direct", gw.url);

    // Round one: the upstream's question, as it asked it, and no task.
    let params = json!({"name": "cf_test_tool_with_task", "arguments": {}});
    let (_, asked) = post_modern(&url, "tools/call", params, asking_capabilities(), None).await;
    let round = &asked["result"];
    assert_eq!(round["resultType"], "input_required", "{asked}");
    assert!(round.get("taskId").is_none(), "{asked}");
    assert!(round["inputRequests"].get("user_name").is_some(), "{asked}");
    // Round two: the answer; the upstream makes its task, and the client gets one at once.
    let params = json!({
        "name": "cf_test_tool_with_task", "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": round["requestState"],
    });
    let (_, created) = post_modern(&url, "tools/call", params, asking_capabilities(), None).await;
    let id = task_id(&created);
    assert!(created["result"].get("requestState").is_none(), "{created}");
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    // The upstream's task answered (its id is in the text), not a call the gateway made a task.
    assert!(
        text.contains("Hello, Alice!") && text.contains("[fx-task-"),
        "{text}"
    );

    // Without the extension: the upstream's -32021, its data naming what to declare.
    let params = json!({"name": "cf_failing_job", "arguments": {}});
    let (_, refused) = post_modern(&url, "tools/call", params, json!({}), None).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let needed = &refused["error"]["data"]["requiredCapabilities"]["extensions"];
    assert!(
        needed.get("io.modelcontextprotocol/tasks").is_some(),
        "{refused}"
    );
    // With it: the upstream's task, whose tool error ends it as completed with isError.
    let id = task_id(&call(&url, "cf_failing_job", json!({}), None).await);
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], true, "{done}");

    // Cancelling the gateway's task cancels the upstream's (the fixture counts it).
    let slow = json!({"seconds": 60, "label": "long"});
    let id = task_id(&call(&url, "cf_slow_compute", slow, None).await);
    let ack = task_request(&url, "tasks/cancel", &id, None).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(until_done(&url, &id, None).await["status"], "cancelled");
    let seen = cancelled_count(&url, "1").await;
    assert_eq!(seen, "1", "the upstream's task was cancelled");
}

/// A TCP proxy between the gateway and an upstream whose connections can be cut: `cut`
/// drops every open one and, for a while, closes each new one at once.
struct CuttableProxy {
    addr: std::net::SocketAddr,
    refusing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl CuttableProxy {
    async fn start(target: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Self {
            addr: listener.local_addr().unwrap(),
            refusing: Default::default(),
            open: Default::default(),
        };
        let (refusing, open) = (proxy.refusing.clone(), proxy.open.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if refusing.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let pipe = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                open.lock().unwrap().push(pipe.abort_handle());
            }
        });
        proxy
    }

    /// Drops every connection, and refuses new ones for `how_long`.
    fn cut(&self, how_long: Duration) {
        self.refusing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.open.lock().unwrap().drain(..).for_each(|c| c.abort());
        let refusing = self.refusing.clone();
        tokio::spawn(async move {
            tokio::time::sleep(how_long).await;
            refusing.store(false, std::sync::atomic::Ordering::SeqCst);
        });
    }
}

/// The connection to an upstream lost while its own task runs does not fail the call: the
/// gateway connects again and asks after the task (the fixture over HTTP, 2026-07-28 only,
/// keeps running and keeps its task; a proxy between them cuts every connection for two
/// seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_task_outlives_a_lost_connection_to_it() {
    let dir = TestDir::new();
    let fixture = HttpFixture::spawn(&["--conformance", "--modern-only"]);
    let target: reqwest::Url = fixture.url.parse().unwrap();
    let target_addr = target.socket_addrs(|| None).unwrap()[0];
    let proxy = CuttableProxy::start(target_addr).await;
    let mut through = target.clone();
    through.set_port(Some(proxy.addr.port())).unwrap();
    let upstream = format!("[upstreams.cf]\nurl = {:?}\n", through.to_string());
    let gw = HttpGateway::start(&dir.config("mode = \"direct\"", &[upstream]), &[]);
    let url = format!("{}/direct", gw.url);

    let slow = json!({"seconds": 3, "label": "through"});
    let id = task_id(&call(&url, "cf_slow_compute", slow, None).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.cut(Duration::from_secs(2));
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    // The upstream's own task's result, read after the cut (a call in flight would have
    // failed with the connection).
    assert!(text.contains("slow_compute through done"), "{text}");
}
