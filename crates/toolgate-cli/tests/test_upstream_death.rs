//! A stdio upstream that dies is reported with its exit (the signal or the status, and its
//! last stderr lines), not only as a connection that closed: its stdout closes as it dies,
//! and the supervisor gives the exit a moment to be seen. An HTTP upstream killed during a
//! call ends that call at once, saying the server no longer accepts connections (not
//! blaming `max_message_bytes`).

mod common;
use common::*;
use std::time::Duration;

#[tokio::test]
async fn a_killed_upstream_is_reported_with_its_exit() {
    let dir = TestDir::new();
    let alpha = dir.stdio_upstream("alpha", "alpha", &[]);
    let config = dir.config("mode = \"direct\"", &[alpha]);
    let (_gw, log) = HttpGateway::start_logging(&config, &[], None);
    // The fixture (and its group guard): every process naming this test's catalog.
    let marker = dir.path("catalog.json").display().to_string();
    let mut pids = processes_mentioning(&marker);
    for _ in 0..200 {
        if !pids.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        pids = processes_mentioning(&marker);
    }
    assert!(!pids.is_empty(), "the upstream never started");
    for pid in &pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    // The 30 s bound is a safety net: the report comes as soon as the child is reaped.
    let down = loop {
        match log.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line.contains("down:") => break line,
            Ok(_) => continue,
            Err(e) => panic!("no \"down:\" report after the upstream was killed: {e}"),
        }
    };
    assert!(down.contains("exited"), "{down}");
}

#[tokio::test]
async fn a_killed_http_upstream_ends_the_call_in_flight_saying_the_server_is_down() {
    let dir = TestDir::new();
    let mut beta = HttpFixture::start(&dir, "beta");
    let up = format!(
        "[upstreams.beta]\nurl = {:?}\ncall_timeout_secs = 120\n",
        beta.url
    );
    let config = dir.config("mode = \"direct\"", &[up]);
    let gw = HttpGateway::start(&config, &[]);
    let (client, _notes) = connect_http(&gw.url).await;
    let slow = rmcp::model::CallToolRequestParams::new("status")
        .with_arguments(args(serde_json::json!({"_delay_ms": 60000})));
    let pending = tokio::spawn(async move {
        let r = client.call_tool(slow).await;
        (client, r)
    });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let _ = beta.child.kill();
    let _ = beta.child.wait();
    let (client, r) = pending.await.unwrap();
    let said = match r {
        Ok(r) => {
            assert_eq!(r.is_error, Some(true), "{r:?}");
            text(&r)
        }
        Err(e) => e.to_string(),
    };
    assert!(!said.contains("max_message_bytes"), "{said}");
    assert!(
        said.contains("closed the connection") && said.contains("no longer accepts connections"),
        "{said}"
    );
    let _ = client.cancel().await;
}
