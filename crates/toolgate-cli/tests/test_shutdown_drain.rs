//! SIGTERM with calls in flight (`gateway.limits.shutdown_grace_secs`): a call that ends
//! within the grace gets its own answer; one still running after it gets an error that says
//! the gateway is shutting down; a call asked during the drain is not run; each is audited.

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

fn setup(grace: &str) -> (TestDir, std::path::PathBuf) {
    let dir = TestDir::new();
    let up = dir.stdio_upstream("alpha", "alpha", &[]);
    let audit = format!(
        "[policy.audit]\npath = {:?}\n",
        dir.path("audit.jsonl").display().to_string()
    );
    let config = dir.config(
        &format!("mode = \"direct\"\nstartup_wait_ms = 30000\n[gateway.limits]\nshutdown_grace_secs = {grace}\n"),
        &[up, audit],
    );
    (dir, config)
}

fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits until the audit log holds `n` `start` records: those calls reached the upstream.
async fn until_started(path: &Path, n: usize) {
    for _ in 0..600 {
        let started = records(path)
            .iter()
            .filter(|r| r["phase"] == "start")
            .count();
        if started >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the calls never started: {:?}", records(path));
}

/// A call of `alpha_echo` taking `delay_ms`, on a session of its own, once the gateway has
/// audited its start; the task ends with the client and the answer.
async fn slow_call(
    gw: &HttpGateway,
    dir: &TestDir,
    message: &str,
    delay_ms: u64,
) -> tokio::task::JoinHandle<(Client, rmcp::model::CallToolResult)> {
    let (client, _) = connect_http(&gw.url).await;
    let arguments = json!({"message": message, "_delay_ms": delay_ms});
    let running = tokio::spawn(async move {
        let r = call(&client, "alpha_echo", arguments).await;
        (client, r)
    });
    until_started(&dir.path("audit.jsonl"), 1).await;
    running
}

fn sigterm(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_ends_within_the_grace_gets_its_own_answer() {
    let (dir, config) = setup("60");
    let mut gw = HttpGateway::start(&config, &[]);
    let running = slow_call(&gw, &dir, "kept", 1500).await;
    let pid = gw.child.id();
    sigterm(pid);
    let (_client, r) = running.await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("kept"), "{}", text(&r));
    let status = tokio::task::spawn_blocking(move || gw.stop())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    let ends: Vec<Value> = records(&dir.path("audit.jsonl"))
        .into_iter()
        .filter(|r| r["phase"] == "end")
        .collect();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["outcome"], "ok", "{ends:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_still_running_after_the_grace_is_answered_shutting_down_and_audited() {
    let (dir, config) = setup("1");
    let mut gw = HttpGateway::start(&config, &[]);
    let running = slow_call(&gw, &dir, "cut", 120000).await;
    sigterm(gw.child.id());
    let (_client, r) = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the call in flight was answered")
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains("the gateway is shutting down")
            && t.contains("may or may not have taken effect"),
        "{t}"
    );
    let status = tokio::task::spawn_blocking(move || gw.stop())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    let end = records(&dir.path("audit.jsonl"))
        .into_iter()
        .find(|r| r["phase"] == "end")
        .expect("an end record for the cut call");
    assert_eq!(end["outcome"], "error", "{end}");
    assert!(
        end["error"].as_str().unwrap().contains("shutting down"),
        "{end}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_stdio_a_call_asked_during_the_drain_is_not_run() {
    let (dir, config) = setup("60");
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.args(["serve", "--stdio", "--config"]).arg(&config);
    let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = transport.id().unwrap();
    // The gateway says when the drain has begun; read its stderr for that line.
    let (began_tx, mut began) = tokio::sync::mpsc::channel::<()>(1);
    tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stderr.unwrap()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[toolgate] {line}");
            if line.contains("shutting down: waiting up to") {
                let _ = began_tx.send(()).await;
            }
        }
    });
    let (handler, _) = test_client();
    let client = std::sync::Arc::new(rmcp::ServiceExt::serve(handler, transport).await.unwrap());
    let c = client.clone();
    let running = tokio::spawn(async move {
        call(
            &c,
            "alpha_echo",
            json!({"message": "long", "_delay_ms": 3000}),
        )
        .await
    });
    until_started(&dir.path("audit.jsonl"), 1).await;
    sigterm(pid);
    tokio::time::timeout(Duration::from_secs(60), began.recv())
        .await
        .expect("the gateway logged the drain");
    let refused = call(&client, "alpha_echo", json!({"message": "late"})).await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(
        text(&refused).contains("alpha/echo was not run"),
        "{}",
        text(&refused)
    );
    let r = running.await.unwrap();
    assert!(
        text(&r).contains("long"),
        "the call in flight finished: {}",
        text(&r)
    );
    let ends: Vec<Value> = records(&dir.path("audit.jsonl"))
        .into_iter()
        .filter(|r| r["phase"] == "end")
        .collect();
    assert_eq!(ends.len(), 2, "both calls have an end record: {ends:?}");
    assert!(
        wait_no_processes(&dir).await.is_empty(),
        "processes were left"
    );
}
