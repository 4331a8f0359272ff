//! 2026-07-28 clients and MRTR (multi-round tool requests) through the gateway: an
//! upstream's `input_required` reaches the client and each retry resumes it once; an older
//! upstream's requests are parked for the client's retry; a `requestState` is its
//! principal's. Approvals by MRTR are in `test_mrtr_approval.rs`.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ElicitationAction, ProtocolVersion};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::json;

/// A gateway (direct surface) with the conformance fixture behind it as a stdio child
/// that speaks only 2026-07-28, so its `input_required` answers reach the gateway.
fn modern_fixture_gateway(dir: &TestDir) -> HttpGateway {
    fixture_gateway(dir, ", \"--modern-only\"", "")
}

/// The same with the fixture that speaks both eras, and `protocol` set for it.
fn dual_fixture_gateway(dir: &TestDir, protocol: &str) -> HttpGateway {
    fixture_gateway(dir, "", &format!("protocol = {protocol:?}\n"))
}

fn fixture_gateway(dir: &TestDir, flag: &str, extra: &str) -> HttpGateway {
    fixture_gateway_in(dir, "direct", flag, extra)
}

fn fixture_gateway_in(dir: &TestDir, mode: &str, flag: &str, extra: &str) -> HttpGateway {
    let upstream = format!(
        "[upstreams.fx]\ncommand = {:?}\nargs = [\"fixture\", \"--conformance\"{flag}]\nprefix = \"\"\ncall_timeout_secs = 20\n{extra}",
        toolgate().display().to_string()
    );
    HttpGateway::start(&dir.config(&format!("mode = {mode:?}"), &[upstream]), &[])
}

/// A 2026-07-28 client without keys (the gateway's local identity) that declares every
/// capability; it never answers a server request (none may come).
async fn modern_client(url: &str) -> rmcp::service::RunningService<rmcp::RoleClient, Declaring> {
    modern_client_with(url, Declaring::all()).await
}

async fn modern_client_with(
    url: &str,
    handler: Declaring,
) -> rmcp::service::RunningService<rmcp::RoleClient, Declaring> {
    handler
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url.to_string()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover at 2026-07-28")
}

/// Declares the capabilities it holds; answers an elicitation with name Alice.
#[derive(Clone)]
struct Declaring(serde_json::Value);

impl Declaring {
    fn all() -> Self {
        Self(json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}}))
    }
}

impl rmcp::ClientHandler for Declaring {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let caps = serde_json::from_value(self.0.clone()).unwrap();
        rmcp::model::ClientConfig::new(caps, rmcp::model::Implementation::new("t", "1"))
    }

    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let mut r = rmcp::model::ElicitResult::new(ElicitationAction::Accept);
        r.content = Some(json!({"name": "Alice"}));
        Ok(r)
    }
}

fn accept(content: serde_json::Value) -> serde_json::Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test]
async fn an_upstreams_input_required_reaches_a_modern_client_and_each_retry_resumes_it_once() {
    let dir = TestDir::new();
    let gw = modern_fixture_gateway(&dir);
    let client = modern_client(&gw.url).await;
    let params = CallToolRequestParams::new("test_input_required_result_multi_round");

    let first = client.call_tool_once(params.clone()).await.unwrap();
    let CallToolResponse::InputRequired(r1) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let asked = serde_json::to_value(&r1.input_requests).unwrap();
    assert_eq!(asked["step1"]["method"], "elicitation/create", "{asked}");
    let s1 = r1.request_state.expect("a requestState");
    // The client holds the gateway's handle, never the upstream's own state.
    assert!(
        s1.starts_with("in-") && !s1.contains("round"),
        "a gateway handle: {s1}"
    );

    let mut retry = params.clone();
    retry.request_state = Some(s1.clone());
    retry.input_responses = Some([("step1".to_string(), accept(json!({"name": "Alice"})))].into());
    let second = client.call_tool_once(retry.clone()).await.unwrap();
    let CallToolResponse::InputRequired(r2) = second else {
        panic!("expected a second round, got {second:?}");
    };
    let s2 = r2.request_state.expect("a new requestState");
    assert_ne!(s2, s1);

    let mut last = params.clone();
    last.request_state = Some(s2.clone());
    last.input_responses = Some([("step2".to_string(), accept(json!({"color": "blue"})))].into());
    let done = client.call_tool_once(last).await.unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected the result, got {done:?}");
    };
    assert_eq!(
        text(&r),
        "Alice likes blue",
        "the upstream saw both answers"
    );

    // A handle is good for one retry; an altered one is refused, and nothing runs.
    let replay = client.call_tool_once(retry).await.unwrap_err().to_string();
    assert!(replay.contains("already used"), "{replay}");
    let mut tampered = params.clone();
    tampered.request_state = Some(format!("{s2}-TAMPERED"));
    let refused = client
        .call_tool_once(tampered)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("requestState"), "{refused}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_modern_client_gets_only_the_input_requests_it_declared_capabilities_for() {
    let dir = TestDir::new();
    // A server of both eras, spoken to in 2026-07-28 because the configuration says so.
    let gw = dual_fixture_gateway(&dir, "2026-07-28");
    // The gateway passes the client's own capabilities on: sampling only here.
    let client = modern_client_with(&gw.url, Declaring(json!({"sampling": {}}))).await;
    let params = CallToolRequestParams::new("test_input_required_result_capabilities");
    let answer = client.call_tool_once(params).await.unwrap();
    let CallToolResponse::InputRequired(r) = answer else {
        panic!("expected input_required, got {answer:?}");
    };
    let keys: Vec<String> = r.input_requests.unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["greeting".to_string()]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_older_client_is_asked_an_upstreams_input_required_as_a_request_and_gets_the_result() {
    let dir = TestDir::new();
    let gw = modern_fixture_gateway(&dir);
    // Initialize (2025-11-25): the gateway asks this client by elicitation/create and
    // retries the upstream with the answer itself.
    let client = Declaring::all()
        .serve(StreamableHttpClientTransport::from_uri(gw.url.clone()))
        .await
        .unwrap();
    let r = client
        .call_tool(CallToolRequestParams::new(
            "test_input_required_result_elicitation",
        ))
        .await
        .unwrap();
    assert_eq!(text(&r), "Hello, Alice!");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_older_upstreams_requests_reach_a_modern_client_by_mrtr_and_the_same_call_goes_on() {
    let dir = TestDir::new();
    // The gateway speaks 2025-11-25 to this fixture, which asks its two questions as
    // elicitation/create requests during one call and keeps the first answer in that call.
    let gw = dual_fixture_gateway(&dir, "2025-11-25");
    let client = modern_client(&gw.url).await;
    let params = CallToolRequestParams::new("test_input_required_result_multi_round");

    let first = client.call_tool_once(params.clone()).await.unwrap();
    let CallToolResponse::InputRequired(r1) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let asked = serde_json::to_value(&r1.input_requests).unwrap();
    assert_eq!(
        asked["elicitation"]["method"], "elicitation/create",
        "{asked}"
    );
    assert!(
        (asked.to_string()).contains("Step 1"),
        "the upstream's own question: {asked}"
    );
    let s1 = r1.request_state.expect("a requestState");
    assert!(s1.starts_with("pk-"), "a parked call's handle: {s1}");

    // Without the answer the question is asked again, and the call stays where it is.
    let mut empty = params.clone();
    empty.request_state = Some(s1);
    let again = client.call_tool_once(empty).await.unwrap();
    let CallToolResponse::InputRequired(r1b) = again else {
        panic!("expected the same question, got {again:?}");
    };
    assert!(serde_json::to_value(&r1b.input_requests)
        .unwrap()
        .to_string()
        .contains("Step 1"));

    let mut retry = params.clone();
    retry.request_state = r1b.request_state.clone();
    retry.input_responses =
        Some([("elicitation".to_string(), accept(json!({"name": "Alice"})))].into());
    let second = client.call_tool_once(retry.clone()).await.unwrap();
    let CallToolResponse::InputRequired(r2) = second else {
        panic!("expected the second question, got {second:?}");
    };
    assert!(serde_json::to_value(&r2.input_requests)
        .unwrap()
        .to_string()
        .contains("Step 2"));

    let mut last = params.clone();
    last.request_state = r2.request_state.clone();
    last.input_responses =
        Some([("elicitation".to_string(), accept(json!({"color": "blue"})))].into());
    let done = client.call_tool_once(last).await.unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected the result, got {done:?}");
    };
    // One upstream call saw both answers: it was resumed, not made again.
    assert_eq!(text(&r), "Alice likes blue");

    let replay = client.call_tool_once(retry).await.unwrap_err().to_string();
    assert!(replay.contains("already used"), "{replay}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_guided_execute_whose_older_upstream_asks_is_parked_and_answered_by_mrtr() {
    let dir = TestDir::new();
    let gw = fixture_gateway_in(&dir, "guided", "", "protocol = \"2025-11-25\"\n");
    let client = modern_client(&gw.url).await;
    let call = json!({"tool": "fx/test_input_required_result_elicitation", "arguments": {}});
    let params = CallToolRequestParams::new("execute").with_arguments(args(call));
    let first = client.call_tool_once(params.clone()).await.unwrap();
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let requests = serde_json::to_value(&asked.input_requests).unwrap();
    assert!(
        requests.to_string().contains("What is your name?"),
        "{requests}"
    );
    let mut retry = params.clone();
    retry.request_state = asked.request_state.clone();
    retry.input_responses =
        Some([("elicitation".to_string(), accept(json!({"name": "Alice"})))].into());
    let done = client.call_tool_once(retry).await.unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected execute's answer, got {done:?}");
    };
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("Hello, Alice!"), "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_http_an_older_upstreams_question_is_parked_for_the_call_it_came_on() {
    let dir = TestDir::new();
    // The conformance fixture over Streamable HTTP: its requests arrive on the stream of
    // the call they belong to, so the gateway knows exactly whose they are.
    let _fixture = HttpFixture::spawn(&["--conformance"]);
    let upstream = format!(
        "[upstreams.fx]\nurl = {:?}\nprefix = \"\"\nprotocol = \"2025-11-25\"\n",
        _fixture.url
    );
    let gw = HttpGateway::start(&dir.config("mode = \"direct\"", &[upstream]), &[]);
    let client = modern_client(&gw.url).await;
    let params = CallToolRequestParams::new("test_input_required_result_elicitation");
    let first = client.call_tool_once(params.clone()).await.unwrap();
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let mut retry = params;
    retry.request_state = asked.request_state;
    retry.input_responses =
        Some([("elicitation".to_string(), accept(json!({"name": "Alice"})))].into());
    let done = client.call_tool_once(retry).await.unwrap();
    let CallToolResponse::Complete(r) = done else {
        panic!("expected the result, got {done:?}");
    };
    assert_eq!(text(&r), "Hello, Alice!");
    client.cancel().await.unwrap();
}

/// A 2026-07-28 client presenting API key `key`.
async fn modern_keyed(
    url: &str,
    key: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, Declaring> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(key);
    Declaring::all()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover at 2026-07-28")
}

#[tokio::test]
async fn a_requeststate_is_its_principals_and_another_keys_retry_is_refused_and_audited() {
    let dir = TestDir::new();
    let keys = format!(
        "[policy.audit]\npath = {:?}\n[policy.keys.alice]\nhash = \"{}\"\nscopes = [\"*\"]\ntier = \"destructive\"\n[policy.keys.bob]\nhash = \"{}\"\nscopes = [\"*\"]\ntier = \"destructive\"\n",
        dir.path("audit.jsonl").display().to_string(),
        hash("tg_alice_key_for_tests"),
        hash("tg_bob_key_for_tests"),
    );
    let fixture = |flag: &str| {
        format!(
            "[upstreams.{}]\ncommand = {:?}\nargs = [\"fixture\", \"--conformance\"{flag}]\nprefix = \"\"\n",
            if flag.is_empty() { "old" } else { "new" },
            toolgate().display().to_string()
        )
    };
    // Both kinds of handle: an upstream's input_required (modern-only fixture) and a parked
    // call (a fixture spoken to in 2025-11-25); the two list the same names, so the modern
    // one's keep their names and the older one's get its prefix.
    let old = fixture("").replace("prefix = \"\"", "prefix = \"old\"");
    let config = dir.config(
        "mode = \"direct\"",
        &[keys, fixture(", \"--modern-only\""), old],
    );
    let gw = HttpGateway::start(&config, &[]);
    let alice = modern_keyed(&gw.url, "tg_alice_key_for_tests").await;
    let bob = modern_keyed(&gw.url, "tg_bob_key_for_tests").await;
    for tool in [
        "test_input_required_result_elicitation",
        "old_test_input_required_result_elicitation",
    ] {
        let params = CallToolRequestParams::new(tool);
        let CallToolResponse::InputRequired(asked) =
            alice.call_tool_once(params.clone()).await.unwrap()
        else {
            panic!("{tool}: expected input_required");
        };
        let key = asked
            .input_requests
            .as_ref()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        let mut retry = params.clone();
        retry.request_state = asked.request_state.clone();
        retry.input_responses = Some([(key, accept(json!({"name": "Alice"})))].into());
        let refused = bob
            .call_tool_once(retry.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("another caller"), "{tool}: {refused}");
        // The owner's retry still works: a foreign try leaves the handle to its owner.
        let CallToolResponse::Complete(r) = alice.call_tool_once(retry).await.unwrap() else {
            panic!("{tool}: expected the result");
        };
        assert_eq!(text(&r), "Hello, Alice!", "{tool}");
    }
    let foreign: Vec<serde_json::Value> = std::fs::read_to_string(dir.path("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["type"] == "foreign")
        .collect();
    assert_eq!(
        foreign.len(),
        2,
        "each foreign retry is audited: {foreign:?}"
    );
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
}

/// An upstream that asks its client for roots in the middle of a call (as server-everything
/// does on a timer), on behalf of a 2026-07-28 client that did not declare roots: the ask
/// is refused, and the call's own outcome decides the answer. A call that fails after it
/// answers -32021 naming roots; a call the gateway's own timeout ends keeps its timeout
/// error (it answered -32021 once, in CI, when server-everything's timer hit a slow call).
#[tokio::test]
async fn a_refused_ask_does_not_hide_the_gateways_own_timeout() {
    let dir = TestDir::new();
    let upstream = dir
        .stdio_upstream("alpha", "alpha", &[])
        .replace("call_timeout_secs = 20", "call_timeout_secs = 1");
    let gw = HttpGateway::start(&dir.config("mode = \"direct\"", &[upstream]), &[]);
    let client = modern_client_with(&gw.url, Declaring(json!({"sampling": {}}))).await;
    let echo = |arguments: serde_json::Value| {
        let mut params = CallToolRequestParams::new("alpha_echo");
        params.arguments = arguments.as_object().cloned();
        params
    };

    let failed = client
        .call_tool_once(echo(
            json!({"message": "m", "_ask_roots": true, "_error": "no roots"}),
        ))
        .await
        .expect_err("a failed call that was refused roots names the capability");
    let failed = failed.to_string();
    assert!(failed.contains("roots"), "{failed}");

    let slow = echo(json!({"message": "m", "_ask_roots": true, "_delay_ms": 5000}));
    let timed_out = client.call_tool_once(slow).await.expect("a tool result");
    let CallToolResponse::Complete(r) = timed_out else {
        panic!("expected the timeout's result, got {timed_out:?}");
    };
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert!(text(&r).contains("call_timeout_secs"), "{r:?}");

    let plain = echo(json!({"message": "fine", "_ask_roots": true}));
    let done = client.call_tool_once(plain).await.expect("a tool result");
    let CallToolResponse::Complete(r) = done else {
        panic!("expected the result, got {done:?}");
    };
    assert_ne!(
        r.is_error,
        Some(true),
        "a call that succeeded keeps its result: {r:?}"
    );
    client.cancel().await.unwrap();
}
