//! What the fast-lane tests share: the configuration, a plain call's body, POSTs with
//! the lane's headers, answers masked for comparison, the lane's request count, and the
//! check that a request gets the same answer both ways.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "A test binary uses a subset; `pub` is for its sibling modules"
)]

use crate::common::*;
use crate::policy_support::*;
use serde_json::{json, Value};

pub const MODERN: &str = "2026-07-28";
/// A key that may read `/metrics`.
pub const OPS: &str = "tg_ops_key_for_fast_lane_tests";

/// The policy tests' configuration in `mode`, with a key for `/metrics`.
pub fn config(dir: &TestDir, mode: &str) -> std::path::PathBuf {
    let ops = format!(
        "[policy.keys.ops]\nhash = \"{}\"\nscopes = [\"admin\"]",
        hash(OPS)
    );
    policy_config(dir, mode, &ops)
}
/// Read the same by rmcp, but not plain enough for the lane.
pub const ACCEPT_WITH_WEIGHT: &str = "application/json;q=1, text/event-stream";

pub fn call_body(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": name, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "fast-lane-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }}})
}

/// POSTs `body` to `url` as a 2026-07-28 client does: status, content type, body.
pub async fn post(
    url: &str,
    key: Option<&str>,
    body: &Value,
    accept: &str,
) -> (u16, String, String) {
    let name = body["params"]["name"].as_str().unwrap_or_default();
    post_named(url, key, body, accept, name).await
}

/// `post` with `Mcp-Name: name`.
pub async fn post_named(
    url: &str,
    key: Option<&str>,
    body: &Value,
    accept: &str,
    name: &str,
) -> (u16, String, String) {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .body(body.to_string());
    if let Some(k) = key {
        r = r.header("authorization", format!("Bearer {k}"));
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let kind = (r.headers().get("content-type"))
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, kind, r.text().await.unwrap())
}

/// `text` with every handle in it (a known prefix, then hex digits) replaced.
pub fn masked_text(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for prefix in ["sel-", "cur-", "op-", "pk-", "rs-", "ap-"] {
            if let Some(tail) = rest.strip_prefix(prefix) {
                let hex = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
                if hex >= 8 {
                    out.push_str("<handle>");
                    rest = &tail[hex..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The answer with the gateway's random handles (selections, cursors, operations,
/// request states) replaced, so two answers to the same request compare equal.
pub fn masked(body: &str) -> Value {
    fn mask(v: &mut Value) {
        match v {
            Value::String(s) => *s = masked_text(s),
            Value::Array(a) => a.iter_mut().for_each(mask),
            Value::Object(o) => {
                for (k, v) in o.iter_mut() {
                    if k == "requestState" || k == "selectionId" || k == "cursor" {
                        *v = json!("<handle>");
                    } else {
                        mask(v);
                    }
                }
            }
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_str(body).unwrap_or_else(|_| json!({"text": body}));
    mask(&mut v);
    v
}

pub async fn lane_count(gw: &HttpGateway) -> f64 {
    let r = reqwest::Client::new()
        .get(format!("{}/metrics", gw.base()))
        .header("authorization", format!("Bearer {OPS}"))
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("toolgate_fast_lane_requests_total "))
        .unwrap_or_else(|| panic!("no fast lane counter in {text}"))
        .parse()
        .unwrap()
}

/// Sends `body` both ways and checks the lane took only the plain one and both answers agree.
pub async fn same_both_ways(
    gw: &HttpGateway,
    url: &str,
    key: Option<&str>,
    body: Value,
    lane: bool,
) -> Value {
    let before = lane_count(gw).await;
    let plain = post(url, key, &body, ACCEPT).await;
    let after_plain = lane_count(gw).await;
    let usual = post(url, key, &body, ACCEPT_WITH_WEIGHT).await;
    let after_usual = lane_count(gw).await;
    let what = format!("{key:?} {body}");
    assert_eq!(
        after_plain - before,
        f64::from(u8::from(lane)),
        "lane taken? {what}"
    );
    assert_eq!(
        after_usual, after_plain,
        "the weighted Accept went the usual way: {what}"
    );
    assert_eq!(
        (plain.0, &plain.1),
        (usual.0, &usual.1),
        "status and type: {what}\n{plain:?}\n{usual:?}"
    );
    assert_eq!(masked(&plain.2), masked(&usual.2), "{what}");
    masked(&plain.2)
}
