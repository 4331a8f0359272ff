//! How a legacy session's SSE answers leave the front (`front/gather.rs`): a quick answer
//! in one piece, with a length (its priming event and its message together); a slow one as
//! a stream whose priming event comes first, and whose progress notifications come while
//! the call is still running, not held until its answer; a long one whole.
//!
//! The upstream's slow tools wait 1.5 s and more, far past the front's wait (10 ms), so
//! which answers stream does not depend on how loaded the machine is; no time is asserted.

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

mod support;
use support::raw_http::{messages, RawClient, STEP};

const CATALOG: &str = r#"[
  {"server":"fx","tool":{"name":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}},
  {"server":"fx","tool":{"name":"slow","description":"Answers after a while.","inputSchema":{"type":"object"}}},
  {"server":"fx","tool":{"name":"steps","description":"Reports progress, then answers.","inputSchema":{"type":"object"}}},
  {"server":"fx","tool":{"name":"big","description":"A long answer.","inputSchema":{"type":"object"}}}
]"#;
const KNOBS: &str = r#"{"slow": {"_delay_ms": 1500}, "steps": {"_delay_ms": 4000, "_progress": 2},
  "big": {"_result_bytes": 70000}}"#;
/// The fixture's `big` answer: past the most the front joins into one body (64 KiB).
const BIG: usize = 70_000;

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": id}}})
}

/// Whether an SSE text holds an event with a JSON-RPC message (not only priming events).
fn has_message(events: &str) -> bool {
    !messages(events).is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_answers_leave_whole_and_slow_ones_stream_as_they_come() {
    let stop = CancellationToken::new();
    let inproc = support::inproc::start(CATALOG, KNOBS, &stop).await;
    let (gw, front) = (inproc.gw, inproc.front);
    let mut client = RawClient::connect(front).await;
    client.open_session().await;

    // Quick calls: every one answered right; each a whole SSE body (a priming event and the
    // message) or, when the machine was too slow for the front's wait, a chunked stream of
    // the same events. Of twenty, at least one must be whole.
    let mut whole = 0;
    for i in 1..=20 {
        let message = format!("call {i}");
        let answer = client
            .post(&call(i, "fx_echo", json!({"message": message})))
            .await;
        assert_eq!(answer.head.status, 200, "call {i}: {}", answer.body);
        let events = messages(&answer.body);
        let last = events.last().expect("a message");
        assert_eq!(last["id"], i, "call {i}: {last}");
        let text = last["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(text.contains(&message), "call {i} answered {last}");
        if !answer.head.chunked() {
            let length = answer.head.header("content-length").expect("a length");
            assert_eq!(length.parse::<usize>().unwrap(), answer.body.len());
            assert!(
                answer.body.contains("retry:"),
                "the priming event is kept: {}",
                answer.body
            );
            whole += 1;
        }
    }
    assert!(whole > 0, "no quick answer left the front in one piece");

    // A long answer, past the most joined into one body: whole and right all the same.
    let answer = client.post(&call(50, "fx_big", json!({}))).await;
    assert_eq!(answer.head.status, 200);
    let last = messages(&answer.body).pop().expect("a message");
    assert_eq!(last["id"], 50, "{last}");
    let text = last["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert_eq!(text.len(), BIG, "the long answer arrived whole");

    // A slow call: the headers and the priming event first, alone; then the answer.
    client.send(&call(100, "fx_slow", json!({}))).await;
    let head = tokio::time::timeout(STEP, client.read_head())
        .await
        .unwrap();
    assert_eq!(head.status, 200);
    assert!(head.chunked(), "a slow answer streams");
    let first = tokio::time::timeout(STEP, client.read_chunk())
        .await
        .unwrap()
        .expect("a first chunk");
    assert!(first.contains("retry:"), "the priming event first: {first}");
    assert!(
        !has_message(&first),
        "the first chunk came before the answer existed: {first}"
    );
    let mut rest = String::new();
    while let Some(chunk) = tokio::time::timeout(STEP, client.read_chunk())
        .await
        .unwrap()
    {
        rest.push_str(&chunk);
    }
    let answer = messages(&rest).pop().expect("the answer");
    assert_eq!(answer["id"], 100, "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");

    // Progress: each notification reaches the client while the call still runs, in a chunk
    // of its own, before the answer.
    client.send(&call(200, "fx_steps", json!({}))).await;
    let head = tokio::time::timeout(STEP, client.read_head())
        .await
        .unwrap();
    assert!(head.chunked(), "a slow answer streams");
    let mut seen = Vec::new();
    while let Some(chunk) = tokio::time::timeout(STEP, client.read_chunk())
        .await
        .unwrap()
    {
        seen.push(messages(&chunk));
    }
    let kinds: Vec<Vec<&str>> = (seen.iter())
        .map(|events| {
            (events.iter())
                .map(|m| {
                    if m["method"] == "notifications/progress" {
                        "progress"
                    } else if m["id"] == 200 {
                        "answer"
                    } else {
                        "other"
                    }
                })
                .collect()
        })
        .filter(|k: &Vec<&str>| !k.is_empty())
        .collect();
    assert_eq!(
        kinds,
        vec![vec!["progress"], vec!["progress"], vec!["answer"]],
        "each progress notification in a chunk of its own, then the answer: {seen:?}"
    );

    stop.cancel();
    gw.shutdown().await;
}
