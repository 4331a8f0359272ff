//! The rest of MCP through the gateway, with two `fixture --conformance` upstreams (`a`,
//! `b`) serving the same resources and prompts: merged lists, shared-URI rewriting, reads,
//! templates, prompts, completion, logging, subscriptions delivered to the subscriber
//! only, list changes, and sampling/elicitation relayed to the calling client.
#![expect(
    deprecated,
    reason = "logging, sampling: deprecated by SEP-2577, still what peers speak"
)]

mod common;
use common::{toolgate, HttpGateway, TestDir};
use rmcp::model::{
    ClientConfig, ClientRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, Implementation, LoggingMessageNotificationParam,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::mpsc;

/// What the client saw, as (kind, detail) events.
type Events = mpsc::UnboundedReceiver<(String, Value)>;

/// A client that records notifications; with `capable` it declares and answers
/// sampling and elicitation.
struct Recorder {
    capable: bool,
    tx: mpsc::UnboundedSender<(String, Value)>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let caps = if self.capable {
            json!({"sampling": {}, "elicitation": {}})
        } else {
            json!({})
        };
        ClientConfig::new(
            serde_json::from_value(caps).unwrap(),
            Implementation::new("protocol-test", "0"),
        )
    }
    async fn create_message(
        &self,
        _p: CreateMessageRequestParams,
        _c: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Ok(
            serde_json::from_value(json!({"role": "assistant", "model": "m",
            "content": {"type": "text", "text": "sampled by the client"}}))
            .unwrap(),
        )
    }
    async fn create_elicitation(
        &self,
        _p: ElicitRequestParams,
        _c: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(serde_json::from_value(
            json!({"action": "accept", "content": {"username": "ann", "email": "a@x"}}),
        )
        .unwrap())
    }
    async fn on_logging_message(
        &self,
        p: LoggingMessageNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        let _ = self
            .tx
            .send(("log".into(), serde_json::to_value(p).unwrap()));
    }
    async fn on_resource_updated(
        &self,
        p: ResourceUpdatedNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        let _ = self.tx.send(("updated".into(), json!(p.uri)));
    }
    async fn on_resource_list_changed(&self, _c: NotificationContext<RoleClient>) {
        let _ = self.tx.send(("resources_changed".into(), Value::Null));
    }
    async fn on_prompt_list_changed(&self, _c: NotificationContext<RoleClient>) {
        let _ = self.tx.send(("prompts_changed".into(), Value::Null));
    }
}

type Client = RunningService<RoleClient, Recorder>;

fn recorder(capable: bool) -> (Recorder, Events) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Recorder { capable, tx }, rx)
}

fn config(dir: &TestDir) -> std::path::PathBuf {
    dir.config(
        "mode = \"direct\"",
        &[dir.conformance_upstream("a"), dir.conformance_upstream("b")],
    )
}

async fn req(client: &Client, method: &str, params: Value) -> Value {
    common::request(client, method, params).await
}

async fn call_text(client: &Client, name: &str, args: Value) -> (bool, String) {
    let r = req(
        client,
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
    .await;
    let text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (r["isError"] == json!(true), text)
}

/// Waits (bounded) for an event of `kind`, skipping others.
async fn next(events: &mut Events, kind: &str) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Ok(Some((k, v))) = tokio::time::timeout_at(deadline, events.recv()).await {
        if k == kind {
            return Some(v);
        }
    }
    None
}

/// Everything one capable client can check on its own.
async fn exercise(client: &Client, events: &mut Events) {
    // Resources: the shared URI stays as is for `a` (first by name) and is rewritten for `b`.
    let list = req(client, "resources/list", json!({})).await;
    let uris: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    let shared = "toolgate://b/test%3A%2F%2Fstatic-text";
    assert!(uris.contains(&"test://static-text"), "{uris:?}");
    assert!(uris.contains(&shared), "{uris:?}");
    assert_eq!(uris.len(), 6, "{uris:?}");
    let read = req(client, "resources/read", json!({"uri": shared})).await;
    assert_eq!(read["contents"][0]["uri"], json!(shared), "{read}");
    assert!(read["contents"][0]["text"]
        .as_str()
        .unwrap()
        .contains("static text"));
    let bin = req(
        client,
        "resources/read",
        json!({"uri": "test://static-binary"}),
    )
    .await;
    assert!(bin["contents"][0]["blob"].as_str().is_some(), "{bin}");
    let tpl = req(client, "resources/templates/list", json!({})).await;
    assert_eq!(
        tpl["resourceTemplates"].as_array().unwrap().len(),
        1,
        "{tpl}"
    );
    let inst = req(
        client,
        "resources/read",
        json!({"uri": "test://template/77/data"}),
    )
    .await;
    assert!(
        inst["contents"][0]["text"].as_str().unwrap().contains("77"),
        "{inst}"
    );

    // Prompts are named like tools; arguments, embedded resources and images are kept.
    let prompts = req(client, "prompts/list", json!({})).await;
    let names: Vec<&str> = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"a_test_simple_prompt") && names.contains(&"b_test_simple_prompt"));
    let got = req(
        client,
        "prompts/get",
        json!({"name": "b_test_prompt_with_arguments",
        "arguments": {"arg1": "x1", "arg2": "y2"}}),
    )
    .await;
    let text = got["messages"].to_string();
    assert!(text.contains("x1") && text.contains("y2"), "{got}");
    let emb = req(
        client,
        "prompts/get",
        json!({"name": "a_test_prompt_with_embedded_resource",
        "arguments": {"resourceUri": "test://r"}}),
    )
    .await;
    assert_eq!(emb["messages"][0]["content"]["type"], "resource", "{emb}");
    let img = req(
        client,
        "prompts/get",
        json!({"name": "a_test_prompt_with_image"}),
    )
    .await;
    assert_eq!(img["messages"][0]["content"]["type"], "image", "{img}");

    // Completion goes to the prompt's upstream under the upstream's own name.
    let done = req(
        client,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt",
        "name": "b_test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "par"}}),
    )
    .await;
    assert!(
        done["completion"]["values"].to_string().contains("paris"),
        "{done}"
    );

    // Logging: setLevel reaches the upstreams; their messages name the upstream.
    assert_eq!(
        req(client, "logging/setLevel", json!({"level": "debug"})).await,
        json!({})
    );
    let (err, _) = call_text(client, "b_test_tool_with_logging", json!({})).await;
    assert!(!err);
    let log = next(events, "log").await.expect("a log message");
    assert_eq!(log["logger"], "b/b-fx", "{log}");

    // Sampling and elicitation come back to this client and are answered.
    let (err, text) = call_text(client, "a_test_sampling", json!({"prompt": "hi"})).await;
    assert!(!err && text.contains("sampled by the client"), "{text}");
    let (err, text) = call_text(client, "a_test_elicitation", json!({"message": "who?"})).await;
    assert!(
        !err && text.contains("accept") && text.contains("ann"),
        "{text}"
    );

    // Cancelling a call cancels it upstream too.
    let r: ClientRequest = serde_json::from_value(
        json!({"method": "tools/call", "params": {"name": "a_test_cancellable", "arguments": {}}}),
    )
    .unwrap();
    let handle = client
        .send_request_with_option(r, Default::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    handle.cancel(Some("test".into())).await.unwrap();
    let mut count = String::new();
    for _ in 0..100 {
        count = call_text(client, "a_test_cancelled_count", json!({}))
            .await
            .1;
        if count != "0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count, "1", "the upstream saw the cancellation");

    // list_changed from an upstream reaches the client.
    call_text(client, "a_test_trigger_list_changed", json!({})).await;
    assert!(next(events, "resources_changed").await.is_some());
}

#[tokio::test]
async fn everything_but_tools_over_stdio() {
    let dir = TestDir::new();
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.args(["serve", "--stdio", "--config"]).arg(config(&dir));
    let (handler, mut events) = recorder(true);
    let client = handler
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    exercise(&client, &mut events).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn everything_but_tools_over_http_and_subscriptions_per_session() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&config(&dir), &[]);
    let connect = |capable: bool| {
        let url = gw.url.clone();
        async move {
            let (handler, events) = recorder(capable);
            let t = StreamableHttpClientTransport::from_uri(url);
            (handler.serve(t).await.unwrap(), events)
        }
    };
    let (one, mut one_events) = connect(true).await;
    exercise(&one, &mut one_events).await;

    // Only the subscribing session hears about the update, under the URI it used.
    let (two, mut two_events) = connect(false).await;
    let watched = "test://watched-resource";
    assert_eq!(
        req(&one, "resources/subscribe", json!({"uri": watched})).await,
        json!({})
    );
    let (_, text) = call_text(&two, "a_test_trigger_update", json!({})).await;
    assert_eq!(text, "subscribed=true");
    assert_eq!(next(&mut one_events, "updated").await, Some(json!(watched)));
    assert_eq!(
        req(&one, "resources/unsubscribe", json!({"uri": watched})).await,
        json!({})
    );
    let (_, text) = call_text(&two, "a_test_trigger_update", json!({})).await;
    assert_eq!(text, "subscribed=false");

    // A client without sampling gets a clean error from the upstream, not a hang.
    let (err, text) = call_text(&two, "a_test_sampling", json!({"prompt": "hi"})).await;
    assert!(
        err && text.contains("no client session able to answer"),
        "{text}"
    );
    while let Ok((kind, v)) = two_events.try_recv() {
        assert_ne!(kind, "updated", "{v}");
    }
    one.cancel().await.unwrap();
    two.cancel().await.unwrap();
}

#[tokio::test]
async fn guided_execute_and_programs_relay_sampling_and_elicitation_to_their_client() {
    let dir = TestDir::new();
    let up = dir.conformance_upstream("a");
    // The conformance tools carry no annotations, so the policy reads them as destructive;
    // the operator lets programs call the sampling one.
    let code =
        "[code]\nenabled = true\ntimeout_ms = 10000\nallow_destructive = [\"a/test_sampling\"]\n"
            .to_string();
    let gw = HttpGateway::start(&dir.config("mode = \"guided\"", &[code, up]), &[]);
    let connect = |capable: bool| {
        let url = gw.url.clone();
        async move {
            let (handler, _events) = recorder(capable);
            let t = StreamableHttpClientTransport::from_uri(url);
            handler.serve(t).await.unwrap()
        }
    };
    let (one, two) = (connect(true).await, connect(false).await);
    let execute = |tool: &str, args: Value| json!({"tool": tool, "arguments": args});
    let (err, text) = call_text(
        &one,
        "execute",
        execute("a/test_sampling", json!({"prompt": "hi"})),
    )
    .await;
    assert!(!err && text.contains("sampled by the client"), "{text}");
    let (err, text) = call_text(
        &one,
        "execute",
        execute("a/test_elicitation", json!({"message": "who?"})),
    )
    .await;
    assert!(!err && text.contains("ann"), "{text}");
    // A program's calls ask the program's client too.
    let program = r#"const r = await tools.a.test_sampling({prompt: "hi"});
        return JSON.stringify(r);"#;
    let (err, text) = call_text(&one, "execute_code", json!({"code": program})).await;
    assert!(!err && text.contains("sampled by the client"), "{text}");
    // A client that cannot answer gets the upstream's error; the other client is not asked.
    let (err, text) = call_text(
        &two,
        "execute",
        execute("a/test_sampling", json!({"prompt": "hi"})),
    )
    .await;
    assert!(!text.contains("sampled by the client"), "{err} {text}");
    one.cancel().await.unwrap();
    two.cancel().await.unwrap();
}

/// A client that speaks only the first protocol revision.
struct OldClient;
impl ClientHandler for OldClient {
    fn get_info(&self) -> ClientConfig {
        let mut c = ClientConfig::new(Default::default(), Implementation::new("old", "0"));
        c.protocol_version = rmcp::model::ProtocolVersion::V_2024_11_05;
        c
    }
}

#[tokio::test]
async fn old_servers_and_old_clients_negotiate_2024_11_05() {
    let dir = TestDir::new();
    let up = format!(
        "[upstreams.old]\ncommand = {:?}\nargs = [\"fixture\", \"--conformance\", \"--max-protocol\", \"2024-11-05\"]\n",
        toolgate().display().to_string()
    );
    let config = dir.config("mode = \"direct\"", &[up]);
    let check = std::process::Command::new(toolgate())
        .args(["check", "--json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(report.contains("protocol 2024-11-05"), "{report}");

    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.args(["serve", "--stdio", "--config"]).arg(&config);
    let client = OldClient
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.protocol_version.to_string(), "2024-11-05");
    let r: ClientRequest = serde_json::from_value(json!({"method": "resources/read",
        "params": {"uri": "test://static-text"}}))
    .unwrap();
    let read = serde_json::to_value(client.send_request(r).await.unwrap()).unwrap();
    assert!(read["contents"][0]["text"].as_str().is_some(), "{read}");
    let r: ClientRequest = serde_json::from_value(json!({"method": "tools/call",
        "params": {"name": "old_test_simple_text", "arguments": {}}}))
    .unwrap();
    let called = serde_json::to_value(client.send_request(r).await.unwrap()).unwrap();
    assert!(
        called["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("simple text"),
        "{called}"
    );
    client.cancel().await.unwrap();
}
