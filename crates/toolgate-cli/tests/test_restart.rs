//! A restarted gateway on the same embedded store: cursors continue where they were,
//! operations that finished before the restart are delivered, one that was still running
//! is reported lost (and can be called again), code mode's `state` is still there, and
//! nothing is kept in plain text.

mod common;

use common::*;

use serde_json::json;
use std::time::Duration;

fn restart_config(dir: &TestDir) -> std::path::PathBuf {
    // A short wait, so a call of a few hundred milliseconds becomes an operation; a short
    // drain, so the call still running at SIGTERM is cut (and kept as running) at once.
    let store = "[guided]\nwait_secs = 0.05\n[code]\nenabled = true\n[store]\nbackend = \"embedded\"\npath = \"state.redb\"\n[gateway.limits]\nshutdown_grace_secs = 1\n";
    dir.config(
        "mode = \"guided\"",
        &[store.to_string(), dir.stdio_upstream("alpha", "alpha", &[])],
    )
}

/// Waits (bounded) for the gateway to log that operation `op` ended (its log names an
/// id by its first 8 characters).
fn wait_for_ending(log: &std::sync::mpsc::Receiver<String>, op: &str) {
    let head = &op["op-".len().."op-".len() + 8];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match log.recv_timeout(left) {
            Ok(line) if line.contains("operation ended") && line.contains(head) => return,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    panic!("the gateway did not log the operation's end within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_gateway_continues_cursors_and_delivers_what_finished() {
    let dir = TestDir::new();
    let config = restart_config(&dir);
    let original = toolgate_fixture::payload::sized_text("echo", 60_000);

    // Before: page one and two of a large result, one operation finished but not
    // collected, one still running.
    let (mut first, log) =
        HttpGateway::start_logging(&config, &[], Some("info,toolgate_core::exec=debug"));
    let (client, _) = connect_http(&first.url).await;
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha_echo", "arguments": {"message": "m", "_result_bytes": 60_000}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let mut joined = body(&r);
    let cursor = structured(&r)["nextCursor"].as_str().unwrap().to_string();
    let r = call(&client, "continue", json!({"cursor": cursor})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    joined.push_str(&body(&r));
    let mut cursor = structured(&r)["nextCursor"]
        .as_str()
        .expect("more than two pages")
        .to_string();

    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "finished-before", "_delay_ms": 300}}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    let finished = structured(&r)["operationId"].as_str().unwrap().to_string();
    wait_for_ending(&log, &finished);
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "never", "_delay_ms": 60_000}}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    let running = structured(&r)["operationId"].as_str().unwrap().to_string();
    let r = call(
        &client,
        "execute_code",
        json!({"code": "await state.set('where', {page: 2}); return 'kept'"}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "ok", "{}", text(&r));
    let _ = client.cancel().await;
    assert!(first.stop().success(), "the first gateway stops cleanly");

    // After: a new process on the same store and key file.
    let mut second = HttpGateway::start(&config, &[]);
    let (client, _) = connect_http(&second.url).await;
    let mut pages = 2;
    loop {
        let r = call(&client, "continue", json!({"cursor": cursor})).await;
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        joined.push_str(&body(&r));
        pages += 1;
        assert_eq!(structured(&r)["page"], pages, "{}", text(&r));
        match structured(&r)["nextCursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
        assert!(pages < 100);
    }
    assert!(
        joined == original,
        "pages read across the restart join to exactly the original"
    );

    let r = call(&client, "continue", json!({"operationId": finished})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("finished-before"), "{}", text(&r));

    let r = call(&client, "continue", json!({"operationId": running})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let says = text(&r);
    assert!(
        says.contains("was lost")
            && says.contains("restarted")
            && says.contains("call execute again"),
        "{says}"
    );

    // Code mode's state too.
    let r = call(
        &client,
        "execute_code",
        json!({"code": "return await state.get('where')"}),
    )
    .await;
    assert_eq!(structured(&r)["result"], json!({"page": 2}), "{}", text(&r));

    // A handle the store never had is still "unknown".
    let r = call(
        &client,
        "continue",
        json!({"cursor": format!("pg-{:032x}-1", 7)}),
    )
    .await;
    assert!(text(&r).contains("unknown cursor"), "{}", text(&r));
    let _ = client.cancel().await;
    assert!(second.stop().success());

    // Results are sealed: the database never holds the text in the clear.
    let raw = std::fs::read(dir.path("state.redb")).unwrap();
    assert!(
        raw.len() > 10_000,
        "the pages were written ({} bytes)",
        raw.len()
    );
    assert!(!raw.windows(15).any(|w| w == b"quick brown fox"));
    assert!(!raw.windows(15).any(|w| w == b"finished-before"));
    let key = std::fs::read_to_string(dir.path("state.redb.key")).unwrap();
    assert_eq!(key.trim().len(), 64, "a key file beside the store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_used_stops_serve_with_a_message() {
    let dir = TestDir::new();
    let config = restart_config(&dir);
    let (gateway, _) = HttpGateway::start_logging(&config, &[], None);
    // The same store from a second process: refused at start, naming the file.
    let out = std::process::Command::new(toolgate())
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in use by another toolgate") && err.contains("state.redb"),
        "{err}"
    );
    drop(gateway);

    // A malformed key in the variable is refused with how to make one.
    let out = std::process::Command::new(toolgate())
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env("TOOLGATE_STORE_KEY", "not-hex")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TOOLGATE_STORE_KEY") && err.contains("64 hex digits"),
        "{err}"
    );
}
