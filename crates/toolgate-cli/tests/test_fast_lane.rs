//! The HTTP front's fast lane (`front/fast.rs`): a plain 2026-07-28 `tools/call` is answered
//! there, and its answer is the one rmcp's transport gives the same request, for every
//! outcome the gate has (a result, a refusal by scope, tier or validation, a hidden or
//! unknown tool, shadow mode, approval asked by MRTR) and on both surfaces. Each case is
//! sent twice over real HTTP: plain, and with an `Accept` header the lane leaves to rmcp
//! (`application/json;q=1`, which rmcp reads the same); `toolgate_fast_lane_requests_total`
//! says which way each went. A client that goes away mid-call cancels the call the same
//! way on both paths, and both are audited.

mod common;
mod fast_lane_support;
mod policy_support;
use common::*;
use fast_lane_support::*;
use policy_support::*;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

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
