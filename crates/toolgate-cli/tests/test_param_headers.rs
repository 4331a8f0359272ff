//! `Mcp-Param-*` headers (SEP-2243) through the gateway's direct surface, over real HTTP,
//! with `fixture --conformance` as a real upstream: `test_custom_headers` marks `region`
//! and `priority` with `x-mcp-header`, so a 2026-07-28 client mirrors those arguments into
//! headers. The gateway (`Session::get_tool`, rmcp's check) runs a call whose headers agree
//! with its arguments and refuses one whose headers disagree, are missing or cannot be
//! decoded with 400 and -32020, before any upstream sees it; such calls never take the
//! fast lane (`front/fast.rs`), which checks no header. Through an HTTP upstream that
//! checks them too, the gateway sends the headers itself; a slim profile drops the
//! markings from the listing, and then the gateway checks none.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const MODERN: &str = "2026-07-28";
const TOOL: &str = "cf_test_custom_headers";

/// A 2026-07-28 request body for `method` with `params` (and the `_meta` it must carry).
fn body(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "param-headers-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn call_body(id: u64, name: &str, arguments: Value) -> Value {
    body(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

/// POSTs `body` as a plain 2026-07-28 client does (the fast lane's form), with `extra`
/// headers: the status and the JSON-RPC message.
async fn post(url: &str, body: &Value, extra: &[(&str, &str)]) -> (u16, Value) {
    let method = body["method"].as_str().unwrap();
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
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
    (status, message(&r.text().await.unwrap()))
}

/// The tool `name` as the gateway lists it at `url`.
async fn listed(url: &str, name: &str) -> Value {
    let (status, list) = post(url, &body(1, "tools/list", json!({})), &[]).await;
    assert_eq!(status, 200, "{list}");
    let tools = list["result"]["tools"].as_array().unwrap();
    let tool = tools.iter().find(|t| t["name"] == name);
    tool.unwrap_or_else(|| panic!("{name} in {list}")).clone()
}

fn text_of(answer: &Value) -> &str {
    let text = answer["result"]["content"][0]["text"].as_str();
    text.unwrap_or_else(|| panic!("a text result: {answer}"))
}

/// The gateway in direct mode with the conformance fixture as the stdio upstream `cf`.
fn gateway(dir: &TestDir) -> HttpGateway {
    let config = dir.config("mode = \"direct\"", &[dir.conformance_upstream("cf")]);
    HttpGateway::start(&config, &[])
}

#[tokio::test]
async fn a_call_whose_headers_agree_with_its_arguments_runs() {
    let dir = TestDir::new();
    let gw = gateway(&dir);
    // The markings reach the client unchanged: it needs them to send the headers.
    let tool = listed(&gw.url, TOOL).await;
    let props = &tool["inputSchema"]["properties"];
    assert_eq!(props["region"]["x-mcp-header"], "Region", "{tool}");
    assert_eq!(props["priority"]["x-mcp-header"], "Priority", "{tool}");
    let args = json!({"region": "eu-west", "priority": 3, "note": "hi"});
    for (id, region) in [(1, "eu-west"), (2, "=?base64?ZXUtd2VzdA==?=")] {
        let headers = [("mcp-param-region", region), ("mcp-param-priority", "3")];
        let (status, answer) = post(&gw.url, &call_body(id, TOOL, args.clone()), &headers).await;
        assert_eq!(status, 200, "{region}: {answer}");
        assert!(
            text_of(&answer).contains(r#""region":"eu-west""#),
            "{answer}"
        );
    }
    // An optional marked argument left out needs no header.
    let one = json!({"region": "eu-west"});
    let headers = [("mcp-param-region", "eu-west")];
    let (status, answer) = post(&gw.url, &call_body(3, TOOL, one), &headers).await;
    assert_eq!(status, 200, "{answer}");
    // A tool that marks nothing has no header to check: a stray one is ignored.
    let body = call_body(4, "cf_test_simple_text", json!({}));
    let (status, answer) = post(&gw.url, &body, &[("mcp-param-region", "x")]).await;
    assert_eq!(status, 200, "{answer}");
    assert!(text_of(&answer).contains("simple text"), "{answer}");
}

#[tokio::test]
async fn a_call_whose_headers_disagree_or_are_missing_is_refused_with_400() {
    let dir = TestDir::new();
    let gw = gateway(&dir);
    let one = json!({"region": "eu-west"});
    for (id, headers) in [
        (1, vec![("mcp-param-region", "us-east")]),
        (2, vec![]),
        (3, vec![("mcp-param-region", "=?base64?ZXUtd2VzdA?=")]),
        (4, vec![("mcp-param-region", "=?base64?ZXUt!!!d2VzdA==?=")]),
        (
            5,
            vec![("mcp-param-region", "eu-west"), ("mcp-param-priority", "1")],
        ),
    ] {
        let (status, answer) = post(&gw.url, &call_body(id, TOOL, one.clone()), &headers).await;
        assert_eq!(status, 400, "{headers:?}: {answer}");
        assert_eq!(answer["error"]["code"], -32020, "{headers:?}: {answer}");
        assert_eq!(answer["id"], id, "{answer}");
    }
    // A marked argument of the wrong value, found without the header: refused too.
    let two = json!({"region": "eu-west", "priority": 3});
    let headers = [("mcp-param-region", "eu-west"), ("mcp-param-priority", "4")];
    let (status, answer) = post(&gw.url, &call_body(6, TOOL, two), &headers).await;
    assert_eq!((status, &answer["error"]["code"]), (400, &json!(-32020)));
}

/// `toolgate fixture --conformance --modern-only` on Streamable HTTP (it checks the
/// headers of the calls it gets); killed on drop.
struct ModernFixture {
    child: Child,
    url: String,
}

impl ModernFixture {
    fn start() -> Self {
        let mut child = Command::new(toolgate())
            .args(["fixture", "--conformance", "--modern-only"])
            .args(["--server", "hx-fx", "--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().strip_prefix("listening ").unwrap().to_string();
        Self { child, url }
    }
}

impl Drop for ModernFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn an_http_upstream_gets_the_headers_and_a_slim_profile_checks_none() {
    let fixture = ModernFixture::start();
    let upstream = format!("[upstreams.cf]\nurl = {:?}\n", fixture.url);
    // Raw profile: the client's headers are checked here, and the gateway's own call
    // upstream carries them (the fixture refuses one without, with 400).
    let dir = TestDir::new();
    let gw = HttpGateway::start(
        &dir.config("mode = \"direct\"", std::slice::from_ref(&upstream)),
        &[],
    );
    let args = json!({"region": "eu-west", "priority": 3});
    let headers = [("mcp-param-region", "eu-west"), ("mcp-param-priority", "3")];
    let (status, answer) = post(&gw.url, &call_body(1, TOOL, args.clone()), &headers).await;
    assert_eq!(status, 200, "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert!(text_of(&answer).contains(r#""priority":3"#), "{answer}");
    let (status, _) = post(&gw.url, &call_body(2, TOOL, args.clone()), &[]).await;
    assert_eq!(status, 400, "checked at the gateway");

    // Slim drops `x-` keys, `x-mcp-header` among them: the client is shown no marking and
    // sends no header, and the gateway checks none; upstream, the headers still go.
    let slim_dir = TestDir::new();
    let slim = "[direct]\nprofile = \"slim\"\n".to_string();
    let config = slim_dir.config("mode = \"direct\"", &[upstream, slim]);
    let gw = HttpGateway::start(&config, &[]);
    let tool = listed(&gw.url, TOOL).await;
    assert!(!tool.to_string().contains("x-mcp-header"), "{tool}");
    let (status, answer) = post(&gw.url, &call_body(3, TOOL, args), &[]).await;
    assert_eq!(status, 200, "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert!(
        text_of(&answer).contains(r#""region":"eu-west""#),
        "{answer}"
    );
}
