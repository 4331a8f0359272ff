//! Handles belong to the principal that made them (its API key), not to a session: a
//! cursor, selectionId or operationId works from any connection of its key, legacy
//! (2025-11-25, a session) or modern (2026-07-28, stateless), and is refused as foreign,
//! and audited, when another key presents it.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{json, Value};

/// A 2026-07-28 client (no initialize, no session) presenting `key`.
async fn connect_modern(url: &str, key: &str) -> KeyedClient<TestClient> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(key);
    let client = test_client()
        .0
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover at 2026-07-28");
    let info = client.peer_info().expect("discovered");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    client
}

fn foreign_records(dir: &TestDir) -> Vec<Value> {
    audit(dir)
        .into_iter()
        .filter(|r| r["type"] == "foreign")
        .collect()
}

#[tokio::test]
async fn handles_follow_their_key_across_connections_and_eras_and_no_further() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "guided", ""), &[]);
    let admin = connect_as(&gw.url, ADMIN).await;
    let sel = structured(&call_on(&admin, "route", json!({"task": "read a file"})).await)
        ["selectionId"]
        .as_str()
        .expect("route selected read_file")
        .to_string();
    let big =
        json!({"tool": "files/read_file", "arguments": {"path": "/a", "_result_bytes": 40_000}});
    let r = call_on(&admin, "execute", big.clone()).await;
    let cursor = structured(&r)["nextCursor"]
        .as_str()
        .expect("a paged result")
        .to_string();
    // What the model sees on a client that shows only structuredContent: the page too.
    assert!(
        structured(&r)["text"].as_str().unwrap_or("").len() > 1000,
        "{}",
        structured(&r)
    );
    let slow = json!({"tool": "files/read_file", "arguments": {"path": "/b", "_delay_ms": 7000}});
    let r = call_on(&admin, "execute", slow).await;
    let op = structured(&r)["operationId"]
        .as_str()
        .expect("a slow call becomes an operation")
        .to_string();
    admin.cancel().await.unwrap();

    // Another key, legacy or modern, gets "foreign" for each, and each refusal is audited.
    let reader = connect_as(&gw.url, READER).await;
    let modern_reader = connect_modern(&gw.url, READER).await;
    let attempts = [
        ("continue", json!({"cursor": cursor})),
        ("continue", json!({"operationId": op})),
        (
            "execute",
            json!({"selectionId": sel, "arguments": {"path": "/c"}}),
        ),
    ];
    for (tool, arguments) in &attempts {
        for client in [&reader, &modern_reader] {
            let r = call_on(client, tool, arguments.clone()).await;
            assert!(is_error(&r), "{tool} {arguments}: {}", text(&r));
            assert!(text(&r).contains("another caller"), "{}", text(&r));
        }
    }
    let records = foreign_records(&dir);
    assert_eq!(records.len(), 6, "{records:?}");
    for r in &records {
        assert_eq!(r["key"], "reader");
        assert_eq!(r["principal"], "key:reader");
        assert_eq!(r["decision"], "refused");
        let hint = r["handleHint"].as_str().unwrap();
        assert!(hint.ends_with('…') && hint.chars().count() <= 9, "{hint}");
    }
    assert!(
        !std::fs::read_to_string(dir.path("audit.jsonl"))
            .unwrap()
            .contains(&cursor),
        "the audit log never holds a handle in full"
    );

    // The same key on a new connection, in either era, still holds them.
    let modern_admin = connect_modern(&gw.url, ADMIN).await;
    let r = call_on(&modern_admin, "continue", json!({"cursor": cursor})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let next = structured(&r)["nextCursor"].as_str().map(str::to_string);
    let admin_again = connect_as(&gw.url, ADMIN).await;
    if let Some(next) = next {
        let r = call_on(&admin_again, "continue", json!({"cursor": next})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    let r = call_on(
        &modern_admin,
        "execute",
        json!({"selectionId": sel, "arguments": {"path": "/d"}}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    // The operation outlived the connection that started it.
    let mut status = Value::Null;
    for _ in 0..10 {
        let r = call_on(&admin_again, "continue", json!({"operationId": op})).await;
        assert!(!is_error(&r), "{}", text(&r));
        status = structured(&r);
        if status.get("operationId").is_none() {
            break;
        }
    }
    assert!(status.get("operationId").is_none(), "{status}");
    assert_eq!(foreign_records(&dir).len(), 6, "no refusal for the owner");
    for c in [reader, modern_reader, modern_admin, admin_again] {
        c.cancel().await.unwrap();
    }
}

/// One JSON-RPC POST with `key`, in session `session` (if any); the status, the session
/// id the answer carries, and the JSON-RPC message.
async fn post_as(
    url: &str,
    key: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let sid = (r.headers().get("mcp-session-id")).map(|v| v.to_str().unwrap().to_string());
    let text = r.text().await.unwrap();
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .map(|d| serde_json::from_str(d).unwrap())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    (status, sid, message)
}

#[tokio::test]
async fn a_session_opened_with_one_key_is_refused_to_another_and_audited() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "direct", ""), &[]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, sid, answer) = post_as(&gw.url, ADMIN, None, init).await;
    assert_eq!(status, 200, "{answer}");
    let sid = sid.expect("a legacy session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post_as(&gw.url, ADMIN, Some(&sid), initialized).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});

    let (_, _, answer) = post_as(&gw.url, READER, Some(&sid), list.clone()).await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("another API key"), "{answer}");
    let records = foreign_records(&dir);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["handle"], "session");
    assert_eq!(records[0]["key"], "reader");
    assert!(!std::fs::read_to_string(dir.path("audit.jsonl"))
        .unwrap()
        .contains(&sid));

    // Its owner still uses it. Caching hints are the 2026-07-28 era's only.
    let (_, _, answer) = post_as(&gw.url, ADMIN, Some(&sid), list).await;
    assert!(answer["result"]["tools"].is_array(), "{answer}");
    assert!(answer["result"].get("ttlMs").is_none(), "{answer}");
    let modern = connect_modern(&gw.url, ADMIN).await;
    let listed = modern.list_tools(None).await.unwrap();
    assert_eq!(listed.ttl_ms, Some(60_000));
    assert!(!listed.tools.is_empty());
    modern.cancel().await.unwrap();
}
