//! What the tasks tests share: 2026-07-28 requests of a client that declared tasks
//! (`tools/call`, `tasks/*`), polling a task to its end, the fixture's cancellation count.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "A test binary uses a subset; `pub` is for its sibling modules"
)]

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;

pub async fn call(url: &str, tool: &str, args: Value, key: Option<&str>) -> Value {
    let params = json!({"name": tool, "arguments": args});
    let (status, answer) = post_modern(url, "tools/call", params, tasks_capabilities(), key).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

pub async fn task_request(url: &str, method: &str, id: &str, key: Option<&str>) -> Value {
    let params = json!({"taskId": id});
    post_modern(url, method, params, tasks_capabilities(), key)
        .await
        .1
}

/// Polls `tasks/get` until the task ends; its last state.
pub async fn until_done(url: &str, id: &str, key: Option<&str>) -> Value {
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
pub async fn cancelled_count(url: &str, want: &str) -> String {
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

pub fn task_id(answer: &Value) -> String {
    assert_eq!(answer["result"]["resultType"], "task", "a task: {answer}");
    answer["result"]["taskId"].as_str().unwrap().to_string()
}

/// A client that declared tasks and elicitation.
pub fn asking_capabilities() -> Value {
    let mut caps = tasks_capabilities();
    caps["elicitation"] = json!({});
    caps
}
