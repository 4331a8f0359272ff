//! Raw HTTP as plain clients send it, for tests that check the wire itself: what a
//! Streamable HTTP client accepts, the JSON-RPC message in an answer, and one stateless
//! 2026-07-28 request (optionally declaring the tasks extension).
use serde_json::Value;

/// What a Streamable HTTP client accepts, for tests that speak raw HTTP.
pub const ACCEPT: &str = "application/json, text/event-stream";

/// The JSON-RPC message in a response body (plain JSON or the first SSE `data:` line).
pub fn message(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str(body) {
        return v;
    }
    let data = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON-RPC message in {body:?}"));
    serde_json::from_str(data).unwrap()
}

/// The `_meta` client capabilities of a 2026-07-28 client that declared the tasks extension.
pub fn tasks_capabilities() -> Value {
    serde_json::json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// POSTs one 2026-07-28 request as a plain client does: stateless (version, client and
/// `capabilities` in `_meta`), with the routing headers SEP-2243 and SEP-2663 ask for
/// (`Mcp-Method`; `Mcp-Name` = the tool's name or the task's id) and, when given, a bearer
/// token. Returns the HTTP status and the JSON-RPC message.
pub async fn post_modern(
    url: &str,
    method: &str,
    mut params: Value,
    capabilities: Value,
    bearer: Option<&str>,
) -> (u16, Value) {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-tests", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities
    });
    let name = params["name"].as_str().or(params["taskId"].as_str());
    let name = name.map(str::to_string);
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        r = r.header("mcp-name", name);
    }
    if let Some(token) = bearer {
        r = r.bearer_auth(token);
    }
    let r = r
        .body(body.to_string())
        .send()
        .await
        .expect("the gateway answers");
    let status = r.status().as_u16();
    (status, message(&r.text().await.unwrap()))
}
