//! Session caps over HTTP (`gateway.limits`): an `initialize` past the per-principal cap
//! is refused with a JSON-RPC error that names the cap, a session ended frees its place,
//! and under pressure the least recently used idle sessions are closed for new ones.

mod common;

use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A raw `initialize` (protocol 2025-06-18, so it opens a session): status line and body.
fn initialize(gw: &HttpGateway) -> (String, String) {
    let body = r#"{"jsonrpc":"2.0","id":41,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let addr = gw.base().trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, rest) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        rest.to_string(),
    )
}

fn session_of(head_and_body: &(String, String)) -> bool {
    head_and_body.0.starts_with("HTTP/1.1 200")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_over_the_per_principal_cap_is_refused_and_an_ended_session_frees_a_place() {
    let (_dir, gw) = limited_gateway("max_sessions_per_principal = 2\nmax_sessions = 10\n");
    let (first, _) = connect_http(&gw.url).await;
    let (_second, _) = connect_http(&gw.url).await;
    let gw = std::sync::Arc::new(gw);
    let g = gw.clone();
    let (status, body) = tokio::task::spawn_blocking(move || initialize(&g))
        .await
        .unwrap();
    assert!(status.contains("429"), "{status} {body}");
    let answer: Value = serde_json::from_str(body.trim()).unwrap_or_else(|_| message(&body));
    assert_eq!(answer["id"], 41, "{answer}");
    let why = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("gateway.limits.max_sessions_per_principal = 2"),
        "{why}"
    );
    assert!(why.contains("HTTP DELETE"), "{why}");
    // Ending a session (rmcp's client sends DELETE) frees its place.
    first.cancel().await.unwrap();
    for _ in 0..200 {
        let g = gw.clone();
        let r = tokio::task::spawn_blocking(move || initialize(&g))
            .await
            .unwrap();
        if session_of(&r) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no session could be opened after one ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_pressure_idle_sessions_make_way_for_new_ones() {
    // Pressure starts at 3 open sessions; idle means unused for 1 s (a tenth of 10 s).
    let (_dir, gw) = limited_gateway(
        "max_sessions = 4\nmax_sessions_per_principal = 4\nsession_idle_secs = 10\n",
    );
    let gw = std::sync::Arc::new(gw);
    let mut opened = Vec::new();
    for _ in 0..3 {
        let g = gw.clone();
        let r = tokio::task::spawn_blocking(move || initialize(&g))
            .await
            .unwrap();
        assert!(session_of(&r), "{r:?}");
        opened.push(r);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Three more: each closes the oldest idle one first; without that the fifth is refused.
    for n in 0..3 {
        let g = gw.clone();
        let r = tokio::task::spawn_blocking(move || initialize(&g))
            .await
            .unwrap();
        assert!(session_of(&r), "session {} was refused: {r:?}", n + 4);
    }
}
