//! `--conformance` over Streamable HTTP, as a 2026-07-28 client sees it: the suite's
//! `json_schema_2020_12_tool` listed with its schema as the suite writes it, and
//! `test_custom_headers`, whose `x-mcp-header` markings rmcp checks against each call's
//! `Mcp-Param-*` headers (SEP-2243): a call whose headers agree runs, one whose headers
//! disagree or are missing is refused with 400 and -32020. Raw HTTP, so what is sent is
//! exactly what the test says.
mod common;

use common::spawn_http;
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";
const TOOL: &str = "test_custom_headers";

/// A 2026-07-28 request body for `method` with `params` (and the `_meta` it must carry).
fn body(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "headers-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// POSTs `body` with the standard headers and `extra`: the status and the JSON-RPC message.
async fn post(url: &str, body: &Value, extra: &[(&str, &str)]) -> (u16, Value) {
    let method = body["method"].as_str().unwrap();
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = body["params"]["name"].as_str() {
        r = r.header("mcp-name", name);
    }
    for (k, v) in extra {
        r = r.header(*k, *v);
    }
    let r = r.body(body.to_string()).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let message = serde_json::from_str(&text).unwrap_or_else(|_| {
        let data = (text.lines().filter_map(|l| l.strip_prefix("data:")))
            .map(str::trim)
            .find(|d| d.starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON-RPC message in {text:?}"));
        serde_json::from_str(data).unwrap()
    });
    (status, message)
}

fn call(id: u64, arguments: Value) -> Value {
    body(
        id,
        "tools/call",
        json!({"name": TOOL, "arguments": arguments}),
    )
}

#[tokio::test]
async fn the_scenarios_tools_are_listed_as_the_suite_expects() -> anyhow::Result<()> {
    let (_child, url) = spawn_http(&["--conformance", "--modern-only"]).await?;
    let (status, list) = post(&url, &body(1, "tools/list", json!({})), &[]).await;
    assert_eq!(status, 200, "{list}");
    let tools = list["result"]["tools"].as_array().unwrap();
    let tool = |name: &str| {
        let t = tools.iter().find(|t| t["name"] == name);
        t.unwrap_or_else(|| panic!("{name} in {list}")).clone()
    };
    let schema = tool("json_schema_2020_12_tool")["inputSchema"].clone();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema["properties"]["address"]["$ref"], "#/$defs/address");
    assert!(schema["allOf"][0]["anyOf"].is_array(), "{schema}");
    for key in ["if", "then", "else"] {
        assert!(schema[key].is_object(), "{key} in {schema}");
    }
    assert_eq!(schema["additionalProperties"], false);
    let marked = tool(TOOL)["inputSchema"]["properties"].clone();
    assert_eq!(marked["region"]["x-mcp-header"], "Region", "{marked}");
    assert_eq!(marked["priority"]["x-mcp-header"], "Priority", "{marked}");
    assert!(marked["note"].get("x-mcp-header").is_none(), "{marked}");
    Ok(())
}

#[tokio::test]
async fn mcp_param_headers_are_checked_against_the_arguments() -> anyhow::Result<()> {
    let (_child, url) = spawn_http(&["--conformance", "--modern-only"]).await?;
    // Agreeing headers, plain or Base64 (`=?base64?…?=`), an integer as its text.
    let args = json!({"region": "eu-west", "priority": 3, "note": "hi"});
    for (id, region) in [(1, "eu-west"), (2, "=?base64?ZXUtd2VzdA==?=")] {
        let headers = [("mcp-param-region", region), ("mcp-param-priority", "3")];
        let (status, answer) = post(&url, &call(id, args.clone()), &headers).await;
        assert_eq!(status, 200, "{region}: {answer}");
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(r#""region":"eu-west""#), "{text}");
    }
    // Disagreeing, missing, undecodable, or for an argument the body does not have.
    let one = json!({"region": "eu-west"});
    for (id, args, headers) in [
        (3, &one, vec![("mcp-param-region", "us-east")]),
        (4, &one, vec![]),
        (5, &one, vec![("mcp-param-region", "=?base64?ZXUtd2VzdA?=")]),
        (
            6,
            &one,
            vec![("mcp-param-region", "=?base64?ZXUt!!!d2VzdA==?=")],
        ),
        (
            7,
            &one,
            vec![("mcp-param-region", "eu-west"), ("mcp-param-priority", "1")],
        ),
    ] {
        let (status, answer) = post(&url, &call(id, args.clone()), &headers).await;
        assert_eq!(status, 400, "{headers:?}: {answer}");
        assert_eq!(answer["error"]["code"], -32020, "{headers:?}: {answer}");
    }
    Ok(())
}
