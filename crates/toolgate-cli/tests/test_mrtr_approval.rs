//! Approval of a destructive call from a 2026-07-28 client, by MRTR: the first round answers
//! `input_required` with the question (nothing runs), the retry with the user's answer and
//! the `requestState` runs the call once, and the same state cannot run it again; an
//! approval binds the exact arguments and belongs to its principal.

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
    let client = modern_approver(&gw.url, &dir, ADMIN).await;
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
    let client = modern_approver(&gw.url, &dir, ADMIN).await;
    let call = json!({"tool": "files/delete_file", "arguments": {"path": "/tmp/y"}});
    approve_by_mrtr(&client, &dir, "execute", call).await;
    client.cancel().await.unwrap();
}

/// A 2026-07-28 client presenting `key` that answers elicitation by accepting.
async fn modern_approver(url: &str, dir: &TestDir, key: &str) -> KeyedClient<Approving> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(key);
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

/// Asks for approval of `params`; the question's text and its `requestState`.
async fn asked_for(
    client: &KeyedClient<Approving>,
    params: &CallToolRequestParams,
) -> (String, String) {
    let first = client.call_tool_once(params.clone()).await.unwrap();
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let question = serde_json::to_value(&asked.input_requests).unwrap();
    let message = question["approval"]["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (message, asked.request_state.expect("a requestState"))
}

fn accepted(params: &CallToolRequestParams, state: &str) -> CallToolRequestParams {
    let mut retry = params.clone();
    retry.request_state = Some(state.to_string());
    retry.input_responses = Some([("approval".to_string(), json!({"action": "accept"}))].into());
    retry
}

#[tokio::test]
async fn an_approval_binds_the_exact_arguments_and_shows_every_one_of_them() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "direct", ""), &[]);
    let client = modern_approver(&gw.url, &dir, ADMIN).await;
    // A long first argument used to push the rest past the 500 characters shown.
    let note = "n".repeat(600);
    let approved = json!({"path": "/tmp/one.txt", "note": note});
    let params = CallToolRequestParams::new("files_delete_file").with_arguments(args(approved));
    let (message, state) = asked_for(&client, &params).await;
    assert!(
        message.contains("path") && message.contains("\"/tmp/one.txt\""),
        "every argument is shown: {message}"
    );
    assert!(
        message.contains("600 characters") && !message.contains(&note),
        "a long value is folded with its length: {message}"
    );
    // The binding: sha256 of the canonical JSON (sorted keys, no whitespace).
    let canonical = format!("{{\"note\":\"{note}\",\"path\":\"/tmp/one.txt\"}}");
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(canonical.as_bytes()));
    assert!(
        message.contains(&digest),
        "the question names its binding: {message}"
    );

    // The same approval, other arguments: refused, nothing runs.
    let other = CallToolRequestParams::new("files_delete_file")
        .with_arguments(args(json!({"note": note, "path": "/", "recursive": true})));
    let done = client
        .call_tool_once(accepted(&other, &state))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected a refusal, got {done:?}");
    };
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("other arguments"), "{}", text(&r));
    assert_eq!(
        allowed_deletes(&dir),
        0,
        "an approval runs only what was approved"
    );

    // Approved for exactly these arguments, it runs them, once.
    let (_, state) = asked_for(&client, &params).await;
    let done = client
        .call_tool_once(accepted(&params, &state))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected the result, got {done:?}");
    };
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(allowed_deletes(&dir), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn another_keys_retry_with_an_approval_leaves_it_to_its_owner_and_is_audited_foreign() {
    let dir = TestDir::new();
    let second = "tg_second_admin_key_for_tests";
    let extra = format!(
        "[policy.keys.second]\nhash = \"{}\"\nscopes = [\"*\"]\ntier = \"destructive\"\napproval = true\n",
        hash(second)
    );
    let gw = HttpGateway::start(&policy_config(&dir, "direct", &extra), &[]);
    let owner = modern_approver(&gw.url, &dir, ADMIN).await;
    let other = modern_approver(&gw.url, &dir, second).await;
    let params = CallToolRequestParams::new("files_delete_file")
        .with_arguments(args(json!({"path": "/tmp/owned.txt"})));
    let (_, state) = asked_for(&owner, &params).await;

    let refused = match other.call_tool_once(accepted(&params, &state)).await {
        Err(e) => e.to_string(),
        Ok(CallToolResponse::Complete(r)) if is_error(&r) => text(&r),
        Ok(other) => panic!("another key's retry must be refused, got {other:?}"),
    };
    assert!(refused.contains("another caller"), "{refused}");
    assert_eq!(allowed_deletes(&dir), 0);
    let records = audit(&dir);
    let foreign: Vec<_> = records.iter().filter(|r| r["type"] == "foreign").collect();
    assert_eq!(foreign.len(), 1, "audited as foreign: {records:?}");
    assert!(
        !records.iter().any(|r| r["code"] == "approval_declined"),
        "not audited as a declined approval: {records:?}"
    );

    // The owner's approval is still there and runs the call once.
    let done = owner
        .call_tool_once(accepted(&params, &state))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected the result, got {done:?}");
    };
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(allowed_deletes(&dir), 1);
    owner.cancel().await.unwrap();
    other.cancel().await.unwrap();
}
