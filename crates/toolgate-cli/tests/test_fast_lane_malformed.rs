//! The HTTP front's fast lane (`front/fast.rs`) against malformed and near-miss requests:
//! each, valid or not, in either era, gets the same answer from the lane as from rmcp's
//! transport (the lane takes the plain ones and leaves every other to rmcp). The common
//! cases are in `test_fast_lane.rs`.

mod common;
mod fast_lane_support;
mod policy_support;
use common::*;
use fast_lane_support::*;
use policy_support::*;
use serde_json::{json, Value};

/// POSTs the raw `text` with the lane's headers, each of `overrides` replacing (or, with an
/// empty value, removing) one of them.
async fn post_raw(
    url: &str,
    text: &str,
    accept: &str,
    overrides: &[(&str, &str)],
) -> (u16, String, String) {
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", accept),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", "files_read_file"),
    ];
    for (name, value) in overrides {
        headers.retain(|(n, _)| n != name);
        if !value.is_empty() {
            headers.push((name, value));
        }
    }
    let mut r = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {READER}"))
        .body(text.to_string());
    for (name, value) in headers {
        r = r.header(name, value);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let kind = (r.headers().get("content-type"))
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, kind, r.text().await.unwrap())
}

/// Each request, valid or not, in either era, gets the same answer from the lane as from
/// rmcp's transport: the lane takes the plain ones and leaves every other to rmcp. A change
/// in rmcp's request acceptance (an upgrade) that the lane does not follow fails here.
#[tokio::test]
async fn near_misses_and_malformed_requests_get_rmcp_s_answer_on_either_path() {
    let dir = TestDir::new();
    let config = config(&dir, "direct");
    let gw = HttpGateway::start(&config, &[]);
    let url = gw.url.clone();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "fast-lane-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let call = |id: Value, params: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
    };
    let read = |extra: Value| {
        let mut p = json!({"name": "files_read_file", "arguments": {"path": "/a"}, "_meta": meta});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                p.as_object_mut().unwrap().remove(k);
            } else {
                p[k] = v.clone();
            }
        }
        p
    };
    let mut no_version = meta.clone();
    no_version
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/protocolVersion");
    let mut progress = meta.clone();
    progress["progressToken"] = json!(7);
    let mut extra_meta = meta.clone();
    extra_meta["example.com/trace"] = json!("t-1");
    let no_headers: &[(&str, &str)] = &[];
    // (what, body, header overrides, whether the lane takes it)
    type Case<'a> = (&'a str, String, &'a [(&'a str, &'a str)], bool);
    let cases: Vec<Case> = vec![
        (
            "string id",
            call(json!("abc"), read(json!({}))),
            no_headers,
            true,
        ),
        (
            "negative id",
            call(json!(-5), read(json!({}))),
            no_headers,
            true,
        ),
        (
            "no arguments",
            call(json!(1), read(json!({"arguments": null}))),
            no_headers,
            true,
        ),
        (
            "another _meta key",
            call(json!(2), read(json!({"_meta": extra_meta}))),
            no_headers,
            true,
        ),
        (
            "null id",
            call(Value::Null, read(json!({}))),
            no_headers,
            false,
        ),
        (
            "fractional id",
            call(json!(1.5), read(json!({}))),
            no_headers,
            false,
        ),
        (
            "id beyond i64",
            call(json!(u64::MAX), read(json!({}))),
            no_headers,
            false,
        ),
        (
            "jsonrpc 1.0",
            call(json!(3), read(json!({}))).replace("\"2.0\"", "\"1.0\""),
            no_headers,
            false,
        ),
        (
            "no name",
            call(json!(4), read(json!({"name": null}))),
            no_headers,
            false,
        ),
        (
            "arguments an array",
            call(json!(5), read(json!({"arguments": [1, 2]}))),
            no_headers,
            false,
        ),
        (
            "a key beside params",
            call(json!(6), read(json!({}))).replacen('{', "{\"extra\":1,", 1),
            no_headers,
            false,
        ),
        (
            "a key in params",
            call(json!(7), read(json!({"task": {"ttl": 1000}}))),
            no_headers,
            false,
        ),
        (
            "no protocol version in _meta",
            call(json!(8), read(json!({"_meta": no_version}))),
            no_headers,
            false,
        ),
        (
            "a progress token",
            call(json!(9), read(json!({"_meta": progress}))),
            no_headers,
            false,
        ),
        (
            "no _meta",
            call(json!(10), read(json!({"_meta": null}))),
            no_headers,
            false,
        ),
        (
            "duplicate id",
            call(json!(11), read(json!({}))).replacen('{', "{\"id\":12,", 1),
            no_headers,
            false,
        ),
        (
            "Mcp-Method differs",
            call(json!(13), read(json!({}))),
            &[("mcp-method", "tools/list")],
            false,
        ),
        (
            "Mcp-Name differs",
            call(json!(14), read(json!({}))),
            &[("mcp-name", "files_write_file")],
            false,
        ),
        (
            "no Mcp-Name",
            call(json!(15), read(json!({}))),
            &[("mcp-name", "")],
            false,
        ),
        (
            "not JSON",
            "{\"jsonrpc\": \"2.0\", \"id\":".to_string(),
            no_headers,
            false,
        ),
        ("an array", "[]".to_string(), no_headers, false),
        ("null", "null".to_string(), no_headers, false),
        (
            "text/plain",
            call(json!(16), read(json!({}))),
            &[("content-type", "text/plain")],
            false,
        ),
        (
            "the 2025-11-25 era without a session",
            call(json!(17), read(json!({}))),
            &[("mcp-protocol-version", "2025-11-25")],
            false,
        ),
        (
            "no protocol version header",
            call(json!(18), read(json!({}))),
            &[("mcp-protocol-version", "")],
            false,
        ),
        (
            "an unknown protocol version",
            call(json!(19), read(json!({}))),
            &[("mcp-protocol-version", "1999-01-01")],
            false,
        ),
    ];
    for (what, body, overrides, lane) in cases {
        let before = lane_count(&gw).await;
        let plain = post_raw(&url, &body, ACCEPT, overrides).await;
        let after_plain = lane_count(&gw).await;
        let usual = post_raw(&url, &body, ACCEPT_WITH_WEIGHT, overrides).await;
        assert_eq!(
            lane_count(&gw).await,
            after_plain,
            "{what}: weighted Accept went the usual way"
        );
        assert_eq!(
            after_plain - before,
            f64::from(u8::from(lane)),
            "{what}: lane taken? {plain:?}"
        );
        assert_eq!(
            (plain.0, &plain.1),
            (usual.0, &usual.1),
            "{what}: status and type\n{plain:?}\n{usual:?}"
        );
        assert_eq!(masked(&plain.2), masked(&usual.2), "{what}");
    }
}
