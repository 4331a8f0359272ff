//! `tools/list` keeps every key of the file, including those rmcp's `Tool` does not model
//! (`execution`, extra annotation hints), over stdio and over HTTP. Checked with raw JSON,
//! since rmcp's client would drop those keys itself.
mod common;

use common::{command, spawn_http, temp_file, SMALL_CATALOG};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}})
}

fn raw_tools(server: &str) -> Vec<Value> {
    let catalog: Vec<Value> = serde_json::from_str(SMALL_CATALOG).unwrap();
    catalog
        .into_iter()
        .filter(|entry| entry["server"] == server)
        .map(|entry| entry["tool"].clone())
        .collect()
}

#[tokio::test]
async fn stdio_list_is_the_file_verbatim() -> anyhow::Result<()> {
    let catalog = temp_file("catalog.json", SMALL_CATALOG);
    let mut child =
        command(&["--catalog", catalog.to_str().unwrap(), "--server", "alpha"]).spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for message in [
        initialize(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        stdin.write_all(format!("{message}\n").as_bytes()).await?;
    }
    let list = loop {
        let line = lines.next_line().await?.expect("an answer");
        let message: Value = serde_json::from_str(&line)?;
        if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(list["result"]["tools"], Value::Array(raw_tools("alpha")));
    assert_eq!(
        list["result"]["tools"][0]["execution"]["taskSupport"],
        "optional"
    );
    drop(stdin);
    assert!(child.wait().await?.success(), "stdin closed: a clean exit");
    Ok(())
}

#[tokio::test]
async fn http_list_is_the_file_verbatim() -> anyhow::Result<()> {
    let catalog = temp_file("catalog.json", SMALL_CATALOG);
    let (mut child, url) =
        spawn_http(&["--catalog", catalog.to_str().unwrap(), "--server", "alpha"]).await?;
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut request = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let response = post(initialize(), None).await?;
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .expect("a session id");
    let _ = response.text().await?;
    post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(session.clone()),
    )
    .await?;
    let body = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        Some(session),
    )
    .await?
    .text()
    .await?;
    let list = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .chain(serde_json::from_str::<Value>(&body).ok())
        .find(|message| message["id"] == 2)
        .expect("a tools/list answer");
    assert_eq!(list["result"]["tools"], Value::Array(raw_tools("alpha")));
    child.kill().await?;
    Ok(())
}
