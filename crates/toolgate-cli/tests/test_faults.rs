//! Hostile and broken upstreams: each time the others keep serving, the error is clear,
//! and no process is left behind.

mod common;
use common::*;
use serde_json::json;
use std::time::Duration;

fn faulty_config(dir: &TestDir) -> std::path::PathBuf {
    let hung = dir
        .stdio_upstream("hung", "beta", &["--fault", "no-initialize"])
        .replace("connect_timeout_secs = 10", "connect_timeout_secs = 2");
    dir.config(
        "mode = \"direct\"\nstartup_wait_ms = 1000",
        &[
            dir.stdio_upstream("alpha", "alpha", &[]),
            hung,
            dir.stdio_upstream("dead", "beta", &["--fault", "exit-at-start"]),
            dir.stdio_upstream("garbage", "beta", &["--fault", "garbage-stdout"]),
            dir.stdio_upstream("flood", "beta", &["--fault", "flood-stderr"]),
        ],
    )
}

#[tokio::test]
async fn broken_upstreams_do_not_take_the_others_down() {
    let dir = TestDir::new();
    let (client, _n) = connect_stdio(&faulty_config(&dir), &[]).await;

    // The first list answers with what is up; the hung and dead upstreams are simply absent.
    let names = tool_names(&client).await;
    assert!(names.contains(&"alpha_echo".to_string()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("hung_") || n.starts_with("dead_")),
        "{names:?}"
    );

    // A banner and garbage on stdout are skipped, a flood of stderr is absorbed.
    for name in ["garbage_status", "flood_status"] {
        let mut found = names.contains(&name.to_string());
        for _ in 0..50 {
            if found {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            found = tool_names(&client).await.contains(&name.to_string());
        }
        assert!(found, "{name} never appeared");
        let r = call(&client, name, json!({})).await;
        assert_ne!(r.is_error, Some(true), "{name}: {}", text(&r));
    }

    // An upstream killed mid-call: the call fails promptly, naming it; the others go on.
    let r = call(
        &client,
        "alpha_echo",
        json!({"message": "x", "_crash": true}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let msg = text(&r);
    assert!(
        msg.contains("\"alpha\""),
        "the error names the upstream: {msg}"
    );
    let r = call(&client, "garbage_status", json!({})).await;
    assert_ne!(r.is_error, Some(true));

    // ...and it comes back by itself (reconnect with backoff).
    let mut back = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = call(&client, "alpha_echo", json!({"message": "again"})).await;
        if r.is_error != Some(true) {
            back = true;
            break;
        }
    }
    assert!(back, "alpha did not reconnect");

    client.cancel().await.unwrap();
    let left = wait_no_processes(&dir).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[tokio::test]
async fn check_reports_each_failure_clearly() {
    let dir = TestDir::new();
    let hung = dir
        .stdio_upstream("hung", "beta", &["--fault", "no-initialize"])
        .replace("connect_timeout_secs = 10", "connect_timeout_secs = 1");
    let missing = "[upstreams.missing]\ncommand = \"/nonexistent/mcp-server\"\n".to_string();
    let config = dir.config(
        "startup_wait_ms = 1000",
        &[
            dir.stdio_upstream("alpha", "alpha", &[]),
            hung,
            dir.stdio_upstream("dead", "beta", &["--fault", "exit-at-start"]),
            missing,
        ],
    );
    let out = tokio::process::Command::new(toolgate())
        .args(["check", "--json", "--config"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "check fails when an upstream is down"
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = |n: &str| rows.iter().find(|r| r["upstream"] == n).unwrap().clone();
    assert_eq!(row("alpha")["status"], "ready");
    assert_eq!(row("alpha")["tools"], 3);
    assert!(row("alpha")["latency_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(row("hung")["status"], "down");
    assert!(
        row("hung")["detail"]
            .as_str()
            .unwrap()
            .contains("connect_timeout_secs"),
        "{:?}",
        row("hung")
    );
    assert_eq!(row("dead")["status"], "down");
    assert!(
        row("dead")["detail"]
            .as_str()
            .unwrap()
            .contains("exit status: 3"),
        "{:?}",
        row("dead")
    );
    assert!(
        row("missing")["detail"]
            .as_str()
            .unwrap()
            .contains("cannot start"),
        "{:?}",
        row("missing")
    );
    assert!(wait_no_processes(&dir).await.is_empty());
}
