//! Each configuration keeps its state in a store of its own by default, so two gateways
//! of different configurations run side by side for one user; a port already taken is
//! reported as such, before anything about the store.

mod common;

use common::*;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `toolgate serve --http ADDR --config CONFIG` with one state folder for every gateway
/// of the test (as one user's `~/.local/state`); the endpoint from its banner, or its
/// stderr when it exits first.
fn serve(config: &Path, addr: &str, state: &Path) -> Result<(Child, String), String> {
    let mut child = Command::new(toolgate())
        .args(["serve", "--http", addr, "--config"])
        .arg(config)
        .env("XDG_STATE_HOME", state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[toolgate] {line}");
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
        if let Some(rest) = line.strip_prefix("MCP endpoint: ") {
            let url = rest.split_whitespace().next().unwrap_or("").to_string();
            return Ok((child, url));
        }
        said.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(said.join("\n"))
}

fn stop(mut child: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_configurations_serve_at_once_each_with_its_own_store() {
    let state = tempfile::tempdir().unwrap();
    let (a, b) = (TestDir::new(), TestDir::new());
    let config_a = a.config("", &[a.stdio_upstream("alpha", "alpha", &[])]);
    let config_b = b.config("", &[b.stdio_upstream("beta", "beta", &[])]);
    let (first, url_a) =
        serve(&config_a, "127.0.0.1:0", state.path()).expect("the first gateway starts");
    let (second, url_b) = serve(&config_b, "127.0.0.1:0", state.path())
        .unwrap_or_else(|e| panic!("a second configuration runs beside the first: {e}"));
    for (url, tool) in [(&url_a, "alpha/echo"), (&url_b, "beta/status")] {
        let (client, _) = connect_http(url).await;
        let r = call(
            &client,
            "execute",
            json!({"tool": tool, "arguments": {"message": "hi"}}),
        )
        .await;
        assert_ne!(r.is_error, Some(true), "{url}: {}", text(&r));
        client.cancel().await.unwrap();
    }
    let folders: Vec<String> = std::fs::read_dir(state.path().join("toolgate"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(folders.len(), 2, "{folders:?}");
    for f in &folders {
        assert!(f.starts_with("toolgate-"), "{f}");
        assert!(
            state
                .path()
                .join("toolgate")
                .join(f)
                .join("state.redb")
                .is_file(),
            "{f}"
        );
    }

    // The first configuration again, on the first one's port: the port is what is in the
    // way, and that is what is said (not that its store is in use, which follows from it).
    let addr = url_a
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let err = serve(&config_a, &addr, state.path()).expect_err("the port is taken");
    assert!(
        err.contains("port is in use") && err.contains(&addr),
        "{err}"
    );
    assert!(!err.contains("store"), "the store is not mentioned: {err}");
    // The same configuration on a free port: its store is the first one's, and in use.
    let err = serve(&config_a, "127.0.0.1:0", state.path()).expect_err("one process per store");
    assert!(err.contains("in use by another toolgate"), "{err}");
    stop(first);
    stop(second);
}
