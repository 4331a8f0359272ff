//! An upstream with tasks of its own, behind the gateway: the fixture speaking only
//! 2026-07-28 (`--modern-only`), as a child process and over HTTP. The gateway passes the
//! client's declaration on and follows the upstream's task; its task survives a lost
//! connection to the upstream, a restart of the gateway, and the end of the replica running
//! it (another, on the same Redis, takes it over).

mod common;
#[allow(dead_code, reason = "each test binary uses a part of these helpers")]
mod fleet;
mod tasks_support;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;
use tasks_support::{
    asking_capabilities, call, cancelled_count, task_id, task_request, until_done,
};

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

/// An upstream's own task outlives a restart of the gateway: the restarted gateway, asked
/// after the task, takes it over and follows the upstream's task to its end (the fixture
/// over HTTP, 2026-07-28 only, keeps running and keeps its task). The upstream ran the
/// call once and was never told to cancel it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_own_task_outlives_a_gateway_restart() {
    let dir = TestDir::new();
    let fixture = HttpFixture::spawn(&["--conformance", "--modern-only"]);
    let upstream = format!("[upstreams.cf]\nurl = {:?}\n", fixture.url);
    let grace = "[gateway.limits]\nshutdown_grace_secs = 0.1\n".to_string();
    let config = dir.config("mode = \"direct\"", &[upstream, grace]);
    let mut gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/direct", gw.url);
    let slow = json!({"seconds": 4, "label": "across"});
    let id = task_id(&call(&url, "cf_slow_compute", slow, None).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // SIGTERM; the drain's grace (a tenth of a second) ends long before the task.
    gw.stop();

    // The same configuration, so the same embedded store, on a new port.
    let gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/direct", gw.url);
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("slow_compute across done"), "{text}");
    // The upstream's first task answered: the call was not made again.
    assert_eq!(
        done["result"]["_meta"]["fixture/task"], "fx-task-1",
        "{done}"
    );
    assert_eq!(cancelled_count(&url, "0").await, "0");
}

/// The same through guided `execute`: its operation, followed after the restart as a
/// task (`g.` id) or by `continue`, ends with the upstream's task's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guided_operation_on_an_upstreams_own_task_outlives_a_gateway_restart() {
    let dir = TestDir::new();
    let fixture = HttpFixture::spawn(&["--conformance", "--modern-only"]);
    let tables = [
        format!("[upstreams.cf]\nurl = {:?}\n", fixture.url),
        "[gateway.limits]\nshutdown_grace_secs = 0.1\n".to_string(),
        "[guided]\nwait_secs = 0.2\n".to_string(),
    ];
    let config = dir.config("mode = \"guided\"", &tables);
    let mut gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/guided", gw.url);
    let slow = json!({"tool": "cf_slow_compute", "arguments": {"seconds": 4, "label": "guided"}});
    let id = task_id(&call(&url, "execute", slow, None).await);
    assert!(id.starts_with("g."), "{id}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    gw.stop();

    let gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/guided", gw.url);
    let done = until_done(&url, &id, None).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"].to_string();
    assert!(text.contains("slow_compute guided done"), "{text}");
}

/// The store's sealing key both replicas share.
const KEY: &str = "8d2e4f6a1c3b5d7e9f0a2c4e6b8d0f1a3c5e7b9d1f3a5c7e9b0d2f4a6c8e0b1d";

/// Two replicas on one Redis: the one running an upstream's task stops; the other, asked
/// after the task, says it runs until the first one's heartbeat is gone, then takes it
/// over and ends it with the upstream's first task's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_takes_over_an_upstreams_task_when_the_one_running_it_stops() {
    let dir = TestDir::new();
    let Some((_redis, store)) = fleet::redis_store(&dir) else {
        return;
    };
    let fixture = HttpFixture::spawn(&["--conformance", "--modern-only"]);
    let tables = [
        format!("[upstreams.cf]\nurl = {:?}\n", fixture.url),
        "[gateway.limits]\nshutdown_grace_secs = 0.1\n".to_string(),
        store,
    ];
    let config = dir.config("mode = \"direct\"", &tables);
    let env = [("TOOLGATE_STORE_KEY", KEY)];
    let (mut a, _) = HttpGateway::start_with_env(&config, &[], None, &env);
    let (b, _) = HttpGateway::start_with_env(&config, &[], None, &env);
    let slow = json!({"seconds": 4, "label": "replicas"});
    let on_a = format!("{}/direct", a.url);
    let id = task_id(&call(&on_a, "cf_slow_compute", slow, None).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.stop();

    let on_b = format!("{}/direct", b.url);
    let mut got = Value::Null;
    for _ in 0..200 {
        got = task_request(&on_b, "tasks/get", &id, None).await["result"].clone();
        if got["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(got["status"], "completed", "{got}");
    let text = got["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("slow_compute replicas done"), "{text}");
    assert_eq!(got["result"]["_meta"]["fixture/task"], "fx-task-1", "{got}");
}
