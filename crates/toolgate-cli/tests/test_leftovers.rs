//! Leftovers of a hostile world: a grandchild that left its upstream's process group
//! (`setsid`) does not outlive SIGTERM of the gateway, which says it killed it, and a clean
//! shutdown says nothing of the kind; the group's members do not outlive SIGKILL of it; a
//! second `initialize` on an open session is refused.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

fn grandchildren(dir: &TestDir, which: &str) -> Vec<u32> {
    let marker = dir.path("catalog.json").display().to_string();
    processes_mentioning(&marker)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(which))
                .unwrap_or(false)
        })
        .collect()
}

/// Waits (bounded) until `f` holds.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..600 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

/// A gateway whose upstream spawns both kinds of grandchild, once both run, and its log.
async fn start(dir: &TestDir) -> (HttpGateway, std::sync::mpsc::Receiver<String>) {
    let up = dir.stdio_upstream("alpha", "alpha", &["--fault", "spawn-grandchildren"]);
    let config = dir.config("mode = \"direct\"", &[up]);
    let (gw, log) = HttpGateway::start_logging(&config, &[], None);
    until("both grandchildren run", || {
        !grandchildren(dir, "escaped-grandchild").is_empty()
            && !grandchildren(dir, "group-grandchild").is_empty()
    })
    .await;
    (gw, log)
}

/// Stops the gateway with SIGTERM; its log's "left behind" line, if it wrote one.
async fn stop(mut gw: HttpGateway, log: std::sync::mpsc::Receiver<String>) -> Option<String> {
    let status = tokio::task::spawn_blocking(move || gw.stop())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    // The log's reader ends with the gateway's stderr.
    log.iter().find(|line| line.contains("left behind"))
}

#[tokio::test]
async fn a_grandchild_that_called_setsid_does_not_outlive_sigterm() {
    let dir = TestDir::new();
    let (gw, log) = start(&dir).await;
    let said = stop(gw, log).await;
    let left = wait_no_processes(&dir).await;
    assert!(
        left.is_empty(),
        "processes left behind after SIGTERM: {left:?}"
    );
    // The escaped shell (and, once it is gone, its `sleep`): said, and counted.
    let said = said.expect("the gateway says it killed what was left behind");
    assert!(
        said.contains("killed 1 ") || said.contains("killed 2 "),
        "{said}"
    );
}

#[tokio::test]
async fn a_clean_shutdown_says_nothing_was_left_behind() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let (gw, log) = HttpGateway::start_logging(&config, &[], None);
    let said = stop(gw, log).await;
    // The upstream exits when its stdin closes, and its group guard when its pipe does:
    // neither was left behind.
    assert_eq!(said, None);
    assert!(wait_no_processes(&dir).await.is_empty());
}

#[tokio::test]
async fn group_members_do_not_outlive_sigkill_of_the_gateway() {
    let dir = TestDir::new();
    let (mut gw, _log) = start(&dir).await;
    let escaped = grandchildren(&dir, "escaped-grandchild");
    gw.child.kill().unwrap();
    gw.child.wait().unwrap();
    let mut left = Vec::new();
    for _ in 0..600 {
        left = dir.processes();
        if left.iter().all(|p| escaped.contains(p)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let survivors: Vec<_> = left.iter().filter(|p| !escaped.contains(p)).collect();
    // Known limit: a grandchild in a session of its own survives a SIGKILLed gateway.
    // It leads its own group (setsid): that group goes, its `sleep` with it.
    for pid in escaped.iter().chain(&left) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        survivors.is_empty(),
        "group members outlived the gateway: {survivors:?}"
    );
}

#[tokio::test]
async fn a_second_initialize_on_an_open_session_is_refused() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let (mut child, mut stdin, mut stdout) = raw_stdio_gateway(&config);
    let init = |id: u64, name: &str| {
        json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":name,"version":"0"}}}).to_string()
    };
    for line in [
        init(1, "first"),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}).to_string(),
        init(2, "second"),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"message":"same session"}}}).to_string(),
    ] {
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    }
    stdin.flush().await.unwrap();
    let mut answers = std::collections::HashMap::<u64, Value>::new();
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = v["id"].as_u64() {
                answers.insert(id, v);
            }
            if (1..=3).all(|k| answers.contains_key(&k)) {
                break;
            }
        }
    })
    .await
    .expect("every request answered");
    assert!(answers[&1]["result"].is_object(), "{}", answers[&1]);
    let refused = &answers[&2];
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let msg = refused["error"]["message"].as_str().unwrap();
    assert!(msg.contains("already initialized"), "{msg}");
    assert!(
        answers[&3].to_string().contains("same session"),
        "the session still serves: {}",
        answers[&3]
    );
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    assert!(wait_no_processes(&dir).await.is_empty());
}
