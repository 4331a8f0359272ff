//! Upstreams that speak only MCP 2026-07-28 (the fixture with `--modern-only` refuses
//! `initialize` with -32022) connect over stdio and HTTP beside an older one: listed,
//! called, and reported with the protocol each agreed.

mod common;
use common::*;
use serde_json::{json, Value};
use std::process::Command;

/// alpha: stdio, modern-only; beta: HTTP, modern-only; gamma: stdio, both eras.
fn config(dir: &TestDir, beta: &HttpFixture) -> std::path::PathBuf {
    let beta = format!("[upstreams.beta]\nurl = {:?}\n", beta.url);
    dir.config(
        "mode = \"direct\"",
        &[
            dir.stdio_upstream("alpha", "alpha", &["--modern-only"]),
            beta,
            dir.stdio_upstream("gamma", "alpha", &[]),
        ],
    )
}

fn run_cli(args: &[&str], config: &std::path::Path) -> (String, String) {
    let out = Command::new(toolgate())
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn modern_only_upstreams_are_listed_called_and_reported() {
    let dir = TestDir::new();
    let beta = HttpFixture::start_with(&dir, "beta", &["--modern-only"]);
    let config = config(&dir, &beta);

    let (out, err) = run_cli(&["check", "--json"], &config);
    let rows: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let protocol = |name: &str| {
        let row = rows.iter().find(|r| r["upstream"] == name);
        let row = row.unwrap_or_else(|| panic!("{name} in {out}\n{err}"));
        assert_eq!(row["status"], "ready", "{row}\n{err}");
        row["protocol"].as_str().unwrap_or("").to_string()
    };
    assert_eq!(protocol("alpha"), "2026-07-28");
    assert_eq!(protocol("beta"), "2026-07-28");
    assert_eq!(
        protocol("gamma"),
        "2025-11-25",
        "both eras: the older one first"
    );
    let (_, err) = run_cli(&["tools"], &config);
    assert!(err.contains("alpha: MCP 2026-07-28"), "{err}");

    let (client, _n) = connect_stdio(&config, &[]).await;
    let names = tool_names(&client).await;
    for n in ["alpha_add_numbers", "beta_status", "gamma_add_numbers"] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
    }
    for tool in ["alpha_add_numbers", "gamma_add_numbers"] {
        let r = call(&client, tool, json!({"a": 2, "b": 3})).await;
        assert_ne!(r.is_error, Some(true), "{tool}: {}", text(&r));
        // The fixture echoes what it was called with.
        assert!(
            text(&r).contains(r#""arguments":{"a":2,"b":3}"#),
            "{tool}: {}",
            text(&r)
        );
    }
    let r = call(&client, "beta_status", json!({})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_refused_handshake_says_what_the_server_answered() {
    let dir = TestDir::new();
    // A server that refuses both eras (a script: it says why on stderr, answers -32022 to
    // initialize and -32601 to server/discover).
    let script = dir.write(
        "refuse.sh",
        "#!/bin/sh\necho 'refusing: this server is broken on purpose' >&2\nread line\necho '{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32022,\"message\":\"Unsupported protocol version\"}}'\nread line\necho '{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32601,\"message\":\"no discover either\"}}'\nsleep 1\n",
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let up = format!(
        "[upstreams.bad]\ncommand = {:?}\nconnect_timeout_secs = 10\n",
        script.display().to_string()
    );
    let config = dir.config("mode = \"direct\"", &[up]);
    let (out, err) = run_cli(&["check", "--json"], &config);
    let row: Value = out
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("{out}\n{err}"));
    let detail = row["detail"].as_str().unwrap();
    assert!(detail.contains("Unsupported protocol version"), "{detail}");
    assert!(detail.contains("server/discover was refused"), "{detail}");
    assert!(
        detail.contains("broken on purpose"),
        "stderr lines: {detail}"
    );
    assert!(!detail.contains("exited before"), "{detail}");
}
