//! Broken client messages get an answer, with their own id where they have one: over HTTP,
//! text that is not JSON is 400 with a JSON-RPC -32700 body (not rmcp's 415; on stdio such a
//! line has no id and is skipped), and JSON that is no JSON-RPC message (`null`, `42`, `[]`,
//! a key twice) is 400 with -32600 saying so; over stdio and
//! HTTP, a `tools/call` without a tool name or with a wrongly typed one is -32602 (not
//! -32601), and a request nested deeper than the parser allows is -32600 with its id. The
//! session goes on serving afterwards.

mod common;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

fn deep_request(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"alpha_echo","arguments":{{"x":{}{}}}}}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    )
}

/// The broken requests and the code each must get, by id.
fn broken() -> Vec<(String, u64, i64)> {
    vec![
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{}}"#.into(),
            11,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":7}}"#.into(),
            12,
            -32602,
        ),
        (deep_request(13), 13, -32600),
    ]
}

#[tokio::test]
async fn stdio_answers_every_broken_request_with_its_own_id() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let (mut child, mut stdin, mut stdout) = raw_stdio_gateway(&config);
    let mut lines = vec![
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}).to_string(),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}).to_string(),
        "{not json".to_string(),
    ];
    lines.extend(broken().into_iter().map(|(l, _, _)| l));
    lines.push(json!({"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"message":"still here"}}}).to_string());
    for l in lines {
        stdin.write_all(format!("{l}\n").as_bytes()).await.unwrap();
    }
    stdin.flush().await.unwrap();
    let mut answers: std::collections::HashMap<String, Value> = Default::default();
    let read = async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                answers.insert(v["id"].to_string(), v);
            }
            if ["1", "11", "12", "13", "20"]
                .iter()
                .all(|k| answers.contains_key(*k))
            {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read)
        .await
        .unwrap_or_else(|_| panic!("not every request was answered"));
    // A line that is not JSON has no id: skipped, not answered.
    assert!(!answers.contains_key("null"), "{:?}", answers.get("null"));
    for (_, id, code) in broken() {
        let a = &answers[&id.to_string()];
        assert_eq!(a["error"]["code"], code, "request {id}: {a}");
    }
    let msg = answers["11"]["error"]["message"].as_str().unwrap();
    assert!(msg.contains("params.name"), "{msg}");
    let ok = &answers["20"];
    assert!(ok["result"].to_string().contains("still here"), "{ok}");
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let left = wait_no_processes(&dir).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[tokio::test]
async fn http_answers_broken_bodies_with_json_rpc_errors() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let mut gateway = HttpGateway::start(&config, &[]);
    let http = reqwest::Client::new();
    let post = |body: String| {
        http.post(&gateway.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body)
            .send()
    };
    let r = post("{not json".into()).await.unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32700, "{v}");
    for (body, id, code) in broken() {
        let r = post(body).await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["id"], id, "{v}");
        assert_eq!(v["error"]["code"], code, "{v}");
        let want = if code == -32602 { 200 } else { 400 };
        assert_eq!(status, want, "{v}");
    }
    // JSON that is no JSON-RPC message: 400 saying what a message is (not rmcp's 415).
    let twice = r#"{"jsonrpc":"2.0","id":5,"id":6,"method":"tools/list"}"#;
    for body in ["null", "42", "[]", twice] {
        let r = post(body.into()).await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["error"]["code"], -32600, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        let clear = message.contains("send one JSON-RPC message")
            || message.contains("appears more than once");
        assert!(clear, "{body}: {message}");
    }
    // A real client still works.
    let (client, _n) = connect_http(&gateway.url).await;
    let r = call(&client, "alpha_echo", json!({"message": "ok"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    client.cancel().await.unwrap();
    gateway.stop();
    let left = wait_no_processes(&dir).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
