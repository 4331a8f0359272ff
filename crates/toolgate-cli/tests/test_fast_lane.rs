//! The HTTP front's fast lane (`front/fast.rs`): a plain 2026-07-28 `tools/call` is answered
//! there, and its answer is the one rmcp's transport gives the same request, for every
//! outcome the gate has (a result, a refusal by scope, tier or validation, a hidden or
//! unknown tool, shadow mode, approval asked by MRTR) and on both surfaces. Each case is
//! sent twice over real HTTP: plain, and with an `Accept` header the lane leaves to rmcp
//! (`application/json;q=1`, which rmcp reads the same); `toolgate_fast_lane_requests_total`
//! says which way each went. A client that goes away mid-call cancels the call the same
//! way on both paths, and both are audited.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const MODERN: &str = "2026-07-28";
/// A key that may read `/metrics`.
const OPS: &str = "tg_ops_key_for_fast_lane_tests";

/// The policy tests' configuration in `mode`, with a key for `/metrics`.
fn config(dir: &TestDir, mode: &str) -> std::path::PathBuf {
    let ops = format!(
        "[policy.keys.ops]\nhash = \"{}\"\nscopes = [\"admin\"]",
        hash(OPS)
    );
    policy_config(dir, mode, &ops)
}
/// Read the same by rmcp, but not plain enough for the lane.
const ACCEPT_WITH_WEIGHT: &str = "application/json;q=1, text/event-stream";

fn call_body(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": name, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "fast-lane-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }}})
}

/// POSTs `body` to `url` as a 2026-07-28 client does: status, content type, body.
async fn post(url: &str, key: Option<&str>, body: &Value, accept: &str) -> (u16, String, String) {
    let name = body["params"]["name"].as_str().unwrap_or_default();
    post_named(url, key, body, accept, name).await
}

/// `post` with `Mcp-Name: name`.
async fn post_named(
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
fn masked_text(text: &str) -> String {
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
fn masked(body: &str) -> Value {
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

async fn lane_count(gw: &HttpGateway) -> f64 {
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
async fn same_both_ways(
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

#[tokio::test]
async fn a_plain_modern_call_takes_the_lane_and_is_answered_as_rmcp_answers_it() {
    let dir = TestDir::new();
    let config = config(&dir, "direct");
    let gw = HttpGateway::start(&config, &[]);
    let url = gw.url.clone();
    let ok = same_both_ways(
        &gw,
        &url,
        Some(READER),
        call_body(1, "files_read_file", json!({"path": "/a"})),
        true,
    )
    .await;
    assert!(ok["result"]["content"].to_string().contains("/a"), "{ok}");
    assert!(
        ok["result"]["isError"].is_null() || ok["result"]["isError"] == false,
        "{ok}"
    );
    // Refusals: scope, tier, invalid arguments; a hidden tool the key covers runs.
    for (id, tool, args) in [
        (2, "files_delete_file", json!({"path": "/a"})),
        (3, "files_write_file", json!({"path": "/a"})),
        (4, "files_read_file", json!({"path": 5})),
        (5, "files_secret_dump", json!({})),
        (6, "files_no_such_tool", json!({})),
        (7, "newsrv_forecast", json!({"city": "Oslo"})),
    ] {
        let a = same_both_ways(&gw, &url, Some(READER), call_body(id, tool, args), true).await;
        assert_eq!(a["id"], id, "{a}");
    }
    // Approval of a destructive call, asked the 2026-07-28 way (input_required + state).
    let mut approve = call_body(8, "files_delete_file", json!({"path": "/a"}));
    approve["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    let asked = same_both_ways(&gw, &url, Some(ADMIN), approve, true).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    // A refused key is not the lane's to answer: 401 both ways, counted by neither.
    let refused = same_both_ways(
        &gw,
        &url,
        Some(REVOKED),
        call_body(9, "files_read_file", json!({"path": "/a"})),
        false,
    )
    .await;
    assert!(refused.to_string().contains("unauthorized"), "{refused}");
    // An `Mcp-Name` that looks encoded is rmcp's to decode (here: to refuse, 400).
    for name in ["=?x", "=?base64?!!!?="] {
        let before = lane_count(&gw).await;
        let body = call_body(11, "", json!({}));
        let (status, _, text) = post_named(&url, Some(READER), &body, ACCEPT, name).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("-32020"), "{text}");
        assert_eq!(lane_count(&gw).await, before, "{name}");
    }
    same_both_ways(
        &gw,
        &url,
        None,
        call_body(10, "files_read_file", json!({"path": "/a"})),
        false,
    )
    .await;
    // Both paths audit alike: the call that ran twice, the refused one twice (the 401s
    // never reached the gate).
    let read = calls(&dir, "files/read_file");
    let outcomes: Vec<&str> = read
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "ok", "not_run", "not_run"], "{read:?}");
}

#[tokio::test]
async fn the_guided_surface_takes_the_lane_for_route_execute_and_continue() {
    let dir = TestDir::new();
    let config = config(&dir, "guided");
    let gw = HttpGateway::start(&config, &[]);
    let url = gw.url.clone();
    let routed = same_both_ways(
        &gw,
        &url,
        Some(READER),
        call_body(1, "route", json!({"task": "read a file"})),
        true,
    )
    .await;
    assert!(
        routed["result"]["structuredContent"].is_object(),
        "{routed}"
    );
    let run = same_both_ways(
        &gw,
        &url,
        Some(READER),
        call_body(
            2,
            "execute",
            json!({"tool": "files/read_file", "arguments": {"path": "/b"}}),
        ),
        true,
    )
    .await;
    assert!(run.to_string().contains("/b"), "{run}");
    let cont = same_both_ways(
        &gw,
        &url,
        Some(READER),
        call_body(3, "continue", json!({"cursor": "cur-nothing"})),
        true,
    )
    .await;
    assert_eq!(cont["id"], 3, "{cont}");
    // A request that is not plain (here: a progress token, answered on a stream) is not
    // the lane's.
    let mut progress = call_body(4, "route", json!({"task": "read a file"}));
    progress["params"]["_meta"]["progressToken"] = json!("p1");
    let before = lane_count(&gw).await;
    let (status, _, _) = post(&url, Some(READER), &progress, ACCEPT).await;
    assert_eq!(status, 200);
    assert_eq!(lane_count(&gw).await, before);
}

/// Sends a slow call over a raw connection and closes it mid-call; returns the call's end
/// record from the audit log.
async fn abandoned_call(gw: &HttpGateway, dir: &TestDir, accept: &str, path: &str) -> Value {
    let body = call_body(
        1,
        "files_read_file",
        json!({"path": path, "_delay_ms": 5000}),
    );
    let text = body.to_string();
    let addr = gw.base().trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: {accept}\r\n\
         authorization: Bearer {READER}\r\nmcp-protocol-version: {MODERN}\r\nmcp-method: tools/call\r\n\
         mcp-name: files_read_file\r\ncontent-length: {}\r\n\r\n{text}",
        text.len()
    );
    // Once the call has started (its start record), the client goes away.
    let starts = || {
        let log = audit(dir);
        log.iter()
            .filter(|r| r["tool"] == "read_file" && r["phase"] == "start")
            .count()
    };
    let (started_before, ended_before) = (starts(), calls(dir, "files/read_file").len());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    s.write_all(request.as_bytes()).await.unwrap();
    while starts() == started_before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never started: {:?}",
            audit(dir)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(s);
    // Its end record: the call was cancelled when the client went away.
    loop {
        let ends = calls(dir, "files/read_file");
        if ends.len() > ended_before {
            return ends.last().unwrap().clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no end record: {:?}",
            audit(dir)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_call_on_either_path() {
    let dir = TestDir::new();
    let config = config(&dir, "direct");
    let gw = HttpGateway::start(&config, &[]);
    // Warm: the upstreams are connected and the first call has been made.
    post(
        &gw.url,
        Some(READER),
        &call_body(1, "files_read_file", json!({"path": "/w"})),
        ACCEPT,
    )
    .await;
    let lane = abandoned_call(&gw, &dir, ACCEPT, "/lane").await;
    let usual = abandoned_call(&gw, &dir, ACCEPT_WITH_WEIGHT, "/usual").await;
    for end in [&lane, &usual] {
        assert_eq!(end["error"], "the call was cancelled", "{end}");
    }
    assert_eq!(
        lane["outcome"], usual["outcome"],
        "lane {lane}\nusual {usual}"
    );
    assert_eq!(
        lane["decision"], usual["decision"],
        "lane {lane}\nusual {usual}"
    );
}

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
