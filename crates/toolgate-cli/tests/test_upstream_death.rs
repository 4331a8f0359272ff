//! A stdio upstream that dies is reported with its exit (the signal or the status, and its
//! last stderr lines), not only as a connection that closed: its stdout closes as it dies,
//! and the supervisor gives the exit a moment to be seen.

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
