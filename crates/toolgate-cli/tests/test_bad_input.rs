//! Bad input at the front: malformed JSON-RPC, unknown methods, oversized messages and
//! foreign Host headers get an error; the session survives where the protocol allows.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
) -> reqwest::Response {
    let mut req = http
        .post(url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .body(body);
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-06-18");
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn http_front_rejects_bad_input_and_keeps_the_session() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"\nmax_body_bytes = 65536",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let gw = HttpGateway::start(&config, &[]);
    // No connection reuse: the server closes a connection after refusing an oversized
    // body, and a pooled client would then fail the next request on a dead socket.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let r = post(&http, &gw.url, None, init.to_string()).await;
    assert!(r.status().is_success());
    let session = r
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        session.len() >= 16,
        "session ids are long enough not to guess: {session}"
    );
    let _ = r.text().await;
    let r = post(
        &http,
        &gw.url,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    )
    .await;
    assert!(r.status().is_success());

    // Not JSON at all.
    let r = post(&http, &gw.url, Some(&session), "{not json".into()).await;
    assert!(
        r.status().is_client_error(),
        "malformed JSON: {}",
        r.status()
    );

    // Well-formed, but not a method MCP has.
    let r = post(
        &http,
        &gw.url,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/explode"}).to_string(),
    )
    .await;
    let body = r.text().await.unwrap();
    let m = message(&body);
    assert_eq!(m["id"], 7);
    assert_eq!(m["error"]["code"], -32601, "{m}");

    // Over the configured body limit.
    let big = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "alpha_echo",
        "arguments": {"message": "x".repeat(200_000)}}});
    let r = post(&http, &gw.url, Some(&session), big.to_string()).await;
    assert_eq!(r.status().as_u16(), 413, "oversized body");
    // A body that does not say it is JSON is never read past the limit: refused for its
    // type in a session (415, unread), for its size before one (413).
    for (session, status) in [(Some(session.as_str()), 415), (None, 413)] {
        let mut req = http
            .post(&gw.url)
            .header("accept", ACCEPT)
            .header("content-type", "text/plain")
            .body("x".repeat(200_000));
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        let r = req.send().await.unwrap();
        assert_eq!(
            r.status().as_u16(),
            status,
            "oversized text body, session {session:?}"
        );
    }

    // DNS-rebinding protection: a foreign Host is refused before any session logic.
    let r = http
        .post(&gw.url)
        .header("host", "evil.example.com")
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error(), "foreign Host: {}", r.status());

    // The session still works.
    let r = post(
        &http,
        &gw.url,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string(),
    )
    .await;
    let m = message(&r.text().await.unwrap());
    assert_eq!(m["id"], 9);
    assert_eq!(m["result"]["tools"].as_array().unwrap().len(), 3, "{m}");
}

#[test]
fn stdio_front_skips_garbage_and_answers_errors() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let mut child = Command::new(toolgate())
        .args(["serve", "--stdio", "--config"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: &str| {
        stdin.write_all(v.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    // The next response, skipping notifications (e.g. tools/list_changed as upstreams arrive).
    let mut next = || loop {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("stdout is only JSON-RPC: {line:?}"));
        if v.get("id").is_some() {
            return v;
        }
    };
    send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).to_string());
    assert_eq!(next()["id"], 1);
    send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    send("this is not json");
    send(&json!({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}).to_string());
    let m = next();
    assert_eq!(m["id"], 2);
    assert_eq!(m["error"]["code"], -32601, "{m}");
    send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "alpha_echo", "arguments": {"message": "still here"}}}).to_string());
    let m = next();
    assert_eq!(m["id"], 3);
    assert!(
        m["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("still here"),
        "{m}"
    );
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "toolgate exits cleanly when stdin closes: {status}"
    );
    let left = dir.processes();
    let info: Vec<String> = left
        .iter()
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
        .collect();
    assert!(left.is_empty(), "upstream left behind: {info:?}");
}
