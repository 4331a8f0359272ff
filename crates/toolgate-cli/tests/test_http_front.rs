//! The HTTP front's manners: `GET /` says what answers there, ending a session with
//! `DELETE` answers 200 (what the Python SDK accepts), and `auto` mode serves an old,
//! capability-less client the direct surface with a warning naming it. A real gateway
//! process over real fixture upstreams, spoken to with raw HTTP.

mod common;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

/// initialize + initialized with this protocol version and capabilities; the session id.
async fn open(http: &reqwest::Client, url: &str, version: &str, caps: Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": caps,
        "clientInfo": {"name": "old-agent", "version": "0.9"}}});
    let r = http
        .post(url)
        .header("accept", ACCEPT)
        .json(&init)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = r.text().await;
    let r = http
        .post(url)
        .header("accept", ACCEPT)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", version)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    session
}

async fn tool_list(http: &reqwest::Client, url: &str, session: &str, version: &str) -> Vec<String> {
    let r = http
        .post(url)
        .header("accept", ACCEPT)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", version)
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    let m = message(&r.text().await.unwrap());
    let mut names: Vec<String> = m["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{m}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn get_root_says_what_this_is_and_where_the_endpoints_are() {
    let dir = TestDir::new();
    let config = dir.config("", &[dir.stdio_upstream("alpha", "alpha", &[])]);
    let gw = HttpGateway::start(&config, &[]);
    let r = reqwest::get(format!("{}/", gw.base())).await.unwrap();
    assert_eq!(r.status(), 200);
    let body = r.text().await.unwrap();
    assert!(body.contains("MCP gateway"), "{body}");
    for path in ["/mcp ", "/mcp/guided", "/mcp/direct"] {
        assert!(body.contains(path), "{path} missing from {body}");
    }
}

#[tokio::test]
async fn ending_a_session_with_delete_answers_200_and_ends_it() {
    let dir = TestDir::new();
    let config = dir.config("", &[dir.stdio_upstream("alpha", "alpha", &[])]);
    let gw = HttpGateway::start(&config, &[]);
    let http = reqwest::Client::new();
    let session = open(&http, &gw.url, "2025-06-18", json!({})).await;
    let r = http
        .delete(&gw.url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    // The session is gone: using it again is refused.
    let r = http
        .post(&gw.url)
        .header("accept", ACCEPT)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
}

#[tokio::test]
async fn auto_mode_serves_an_old_capability_less_client_the_direct_surface_and_says_so() {
    let dir = TestDir::new();
    // A threshold of 1 token: by cost alone every session would be guided.
    let config = dir.config(
        "mode = \"auto\"\nauto_threshold_tokens = 1",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let (gw, logs) = HttpGateway::start_logging(&config, &[], None);
    let http = reqwest::Client::new();
    let modern = open(&http, &gw.url, "2025-06-18", json!({})).await;
    assert_eq!(
        tool_list(&http, &gw.url, &modern, "2025-06-18").await,
        ["continue", "execute", "route"]
    );
    let with_caps = open(&http, &gw.url, "2024-11-05", json!({"roots": {}})).await;
    assert_eq!(
        tool_list(&http, &gw.url, &with_caps, "2024-11-05").await,
        ["continue", "execute", "route"]
    );
    let old = open(&http, &gw.url, "2024-11-05", json!({})).await;
    assert_eq!(
        tool_list(&http, &gw.url, &old, "2024-11-05").await,
        ["alpha_add_numbers", "alpha_echo", "alpha_status"]
    );
    let warned = std::iter::from_fn(|| logs.recv_timeout(Duration::from_secs(30)).ok())
        .find(|l| l.contains("WARN") && l.contains("old-agent 0.9"));
    let warned = warned.expect("a warning naming the old client");
    assert!(warned.contains("direct surface"), "{warned}");
    assert!(
        !warned.contains('\u{1b}'),
        "no colour codes off a terminal: {warned:?}"
    );
}
