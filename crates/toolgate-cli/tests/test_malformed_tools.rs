//! Upstreams that list tools no client can use (the fixture's `--fault malformed-tools`:
//! an `inputSchema` that is a string, an empty name, a name listed twice), over stdio and
//! over HTTP: the bad tools are skipped with a warning naming them and the upstream, and
//! the rest of each upstream is served.

mod common;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// Waits (up to 60 s) until the gateway's log has a line containing every one of `parts`.
fn wait_for_log(log: &std::sync::mpsc::Receiver<String>, seen: &mut Vec<String>, parts: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if seen.iter().any(|l| parts.iter().all(|p| l.contains(p))) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match log.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("no log line with {parts:?}; the log: {seen:#?}"),
        }
    }
}

#[tokio::test]
async fn malformed_tools_are_skipped_and_the_rest_served() {
    let dir = TestDir::new();
    let beta = HttpFixture::start_with(&dir, "beta", &["--fault", "malformed-tools"]);
    let config = dir.config(
        "mode = \"direct\"",
        &[
            // Two tools per page: every page carries its own bad tools.
            dir.stdio_upstream(
                "alpha",
                "alpha",
                &["--fault", "malformed-tools", "--page-size", "2"],
            ),
            format!("[upstreams.beta]\nurl = {:?}\n", beta.url),
        ],
    );
    let (mut gateway, log) = HttpGateway::start_logging(&config, &[], Some("warn"));
    let (client, _n) = connect_http(&gateway.url).await;

    let names = tool_names(&client).await;
    for want in [
        "alpha_echo",
        "alpha_add_numbers",
        "alpha_status",
        "beta_status",
    ] {
        assert!(
            names.contains(&want.to_string()),
            "{want} missing: {names:?}"
        );
    }
    assert!(
        !names
            .iter()
            .any(|n| n.contains("malformed") || n.ends_with('_')),
        "a bad tool was exposed: {names:?}"
    );
    // Each name once, and the first of the two `echo`s is the one served.
    let mut unique = names.clone();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    let listed = client.list_all_tools().await.unwrap();
    let echo = listed.iter().find(|t| t.name == "alpha_echo").unwrap();
    assert_eq!(
        echo.description.as_deref(),
        Some("Echo the message back."),
        "the second `echo` replaced the first"
    );

    // Both upstreams answer calls.
    let r = call(&client, "alpha_echo", json!({"message": "hi"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("hi"), "{}", text(&r));
    let r = call(&client, "beta_status", json!({})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));

    // Every skipped tool is named in a warning, with its upstream and the reason.
    let mut seen = Vec::new();
    for up in ["\"alpha\"", "\"beta\""] {
        wait_for_log(
            &log,
            &mut seen,
            &[
                "skipped tool \"malformed_schema\"",
                up,
                "not a valid MCP tool",
            ],
        );
        wait_for_log(&log, &mut seen, &["(no name)", up, "its name is empty"]);
        wait_for_log(&log, &mut seen, &["more than once", up]);
    }
    assert!(
        !seen.iter().any(|l| l.contains("tools/list failed")),
        "an upstream failed its list: {seen:#?}"
    );

    client.cancel().await.unwrap();
    gateway.stop();
    drop(beta);
    let left = wait_no_processes(&dir).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
