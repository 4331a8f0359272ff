//! A call nothing waits for any more still ends: its upstream is told to stop, and its audit
//! record gets its `end`. A guided operation cancelled with `continue` ends the way a
//! client's cancellation does ("the call was cancelled"); a call a program left running when
//! it returned is abandoned, and says so.

mod common;
use common::code::*;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

/// Code mode, guided's one-second wait, and an audit log with the arguments in it.
fn audited() -> (TestDir, std::path::PathBuf) {
    setup_audited("", "[guided]\nwait_secs = 1", "arguments = true")
}

/// The `end` record of the echo call whose message was `message`, once it is written (the
/// 60 s bound is a safety net: the echo it waits for would take a minute to answer).
async fn end_of(dir: &TestDir, message: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = audit_records(dir);
        let ids: Vec<&Value> = log
            .iter()
            .filter(|r| r["phase"] == "start" && r["arguments"]["message"] == message)
            .map(|r| &r["callId"])
            .collect();
        if let Some(end) = log
            .iter()
            .find(|r| r["phase"] == "end" && ids.contains(&&r["callId"]))
        {
            return end.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no end record for {message:?}: {log:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_cancelled_operation_ends_its_audit_record() {
    let (dir, config) = audited();
    let (client, _) = connect_stdio(&config, &[]).await;
    wait_for_tool(&client, "alpha", "echo").await;
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "never", "_delay_ms": 60000}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["status"], "running", "{s}");
    let op = s["operationId"].as_str().unwrap().to_string();
    let r = call(
        &client,
        "continue",
        json!({"operationId": op, "cancel": true}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "cancelled", "{r:?}");
    // The call heard the cancellation itself (so its upstream was sent
    // notifications/cancelled) rather than being dropped unheard.
    let end = end_of(&dir, "never").await;
    assert_eq!(end["outcome"], "error", "{end}");
    assert_eq!(end["error"], "the call was cancelled", "{end}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_call_a_program_left_running_is_recorded_as_abandoned() {
    let (dir, config) = audited();
    let (client, _) = connect_stdio(&config, &[]).await;
    wait_for_tool(&client, "alpha", "echo").await;
    // The first call is left running; the second (a round trip to the upstream) gives the
    // first time to be admitted and started before the program returns.
    let (s, t) = run(
        &client,
        "tools.alpha.echo({message: 'left', _delay_ms: 60000}); \
         await tools.alpha.echo({message: 'awaited', _delay_ms: 300}); return 1",
    )
    .await;
    assert_eq!(s["status"], "ok", "{t}");
    let end = end_of(&dir, "left").await;
    assert_eq!(end["outcome"], "error", "{end}");
    assert!(
        end["error"].as_str().unwrap_or("").starts_with("abandoned"),
        "{end}"
    );
    // The awaited one ended as usual.
    assert_eq!(end_of(&dir, "awaited").await["outcome"], "ok");
    client.cancel().await.unwrap();
}

/// The upstream's side of an abandoned call: a program that returns while one of its calls
/// waits drops that call, and the upstream is told (`notifications/cancelled`), so it stops
/// working for nobody. The conformance fixture counts the cancellations it hears.
#[tokio::test]
async fn an_abandoned_call_is_cancelled_upstream() {
    let dir = TestDir::new();
    // The conformance tools carry no annotations, so the policy reads them as destructive;
    // the operator lets programs call these two.
    let code = "[code]\nenabled = true\ntimeout_ms = 10000\ngrace_ms = 500\n\
                allow_destructive = [\"a/test_cancellable\", \"a/test_cancelled_count\"]\n";
    let config = dir.config(
        "mode = \"guided\"",
        &[code.to_string(), dir.conformance_upstream("a")],
    );
    let (client, _) = connect_stdio(&config, &[]).await;
    wait_for_tool(&client, "a", "test_cancellable").await;
    // test_cancellable waits 30 s for a cancellation. It is left running; the round trips
    // after it (to the same upstream, sent after it) let it reach the upstream before the
    // program returns and drops it.
    let (s, t) = run(
        &client,
        "tools.a.test_cancellable({}); \
         for (let i = 0; i < 5; i++) await tools.a.test_cancelled_count({}); return 1",
    )
    .await;
    assert_eq!(s["status"], "ok", "{t}");
    // The notification is sent from a task of its own after the drop: poll for it (the
    // deadline is a safety net; it arrives within milliseconds).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (s, t) = run(&client, "return await tools.a.test_cancelled_count({})").await;
        assert_eq!(s["status"], "ok", "{t}");
        // The tool's text, "1", read as JSON.
        if s["result"] == json!(1) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream never heard of the abandoned call: {s}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.cancel().await.unwrap();
}
