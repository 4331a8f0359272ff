//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) on the direct surface,
//! over real HTTP, with `fixture --conformance` as a real upstream child process. A
//! 2026-07-28 client that declares the extension gets a plain answer from a quick call and
//! a task from a slow one; `tasks/get` follows it to its inlined result; a tool's error is
//! `completed` with `isError`, an upstream's protocol error `failed` with the error; a
//! cancelled task cancels the upstream call; a client without the extension never gets a
//! task and may not use the task methods; a task belongs to the key that started it.

mod common;
mod policy_support;
mod tasks_support;

use common::*;
use policy_support::hash;
use serde_json::{json, Value};
use std::time::Duration;
use tasks_support::{
    asking_capabilities, call, cancelled_count, task_id, task_request, until_done,
};

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
