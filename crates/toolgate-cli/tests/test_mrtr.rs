//! Approval of a destructive call from a 2026-07-28 client, by MRTR: the first round answers
//! `input_required` with the question (nothing runs), the retry with the user's answer and
//! the `requestState` runs the call once, and the same state cannot run it again.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ElicitationAction, ProtocolVersion};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;
use std::sync::{Arc, Mutex};

async fn modern_admin(url: &str, dir: &TestDir) -> KeyedClient<Approving> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(ADMIN);
    let handler = Approving {
        answer: Some(ElicitationAction::Accept),
        audit: dir.path("audit.jsonl"),
        asked: Arc::new(Mutex::new(Vec::new())),
    };
    handler
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover at 2026-07-28")
}

fn allowed_deletes(dir: &TestDir) -> usize {
    calls(dir, "files/delete_file")
        .iter()
        .filter(|r| r["decision"] == "allowed")
        .count()
}

/// The call, its approval asked by `input_required`, answered, and replayed.
async fn approve_by_mrtr(
    client: &KeyedClient<Approving>,
    dir: &TestDir,
    name: &str,
    arguments: serde_json::Value,
) {
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(args(arguments));
    let first = client.call_tool_once(params.clone()).await.unwrap();
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let question = serde_json::to_value(&asked.input_requests).unwrap();
    let message = question["approval"]["params"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(message.contains("files/delete_file"), "{question}");
    let state = asked.request_state.expect("a requestState");
    assert_eq!(allowed_deletes(dir), 0, "nothing runs before the answer");

    let mut retry = params.clone();
    retry.request_state = Some(state.clone());
    retry.input_responses = Some([("approval".to_string(), json!({"action": "accept"}))].into());
    let done = client.call_tool_once(retry.clone()).await.unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected the result, got {done:?}");
    };
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(allowed_deletes(dir), 1, "the approved call ran once");

    // The same answer again runs nothing: a state is good for one retry.
    let again = client.call_tool_once(retry).await.unwrap();
    let CallToolResponse::Complete(r) = again else {
        panic!("expected a refusal, got {again:?}");
    };
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("already used"), "{}", text(&r));
    assert_eq!(allowed_deletes(dir), 1);
}

#[tokio::test]
async fn a_modern_client_approves_a_direct_call_by_mrtr_exactly_once() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "direct", ""), &[]);
    let client = modern_admin(&gw.url, &dir).await;
    approve_by_mrtr(
        &client,
        &dir,
        "files_delete_file",
        json!({"path": "/tmp/x"}),
    )
    .await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_modern_client_approves_a_guided_execute_by_mrtr_exactly_once() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "guided", ""), &[]);
    let client = modern_admin(&gw.url, &dir).await;
    let call = json!({"tool": "files/delete_file", "arguments": {"path": "/tmp/y"}});
    approve_by_mrtr(&client, &dir, "execute", call).await;
    client.cancel().await.unwrap();
}
