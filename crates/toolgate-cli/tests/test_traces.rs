//! Traces (`--features otel`) against a real gateway process: an OTLP/HTTP receiver in
//! the test (axum on 127.0.0.1, decoding `ExportTraceServiceRequest` with
//! opentelemetry-proto) gets the spans of real route and execute calls made with a
//! client's `traceparent` (the HTTP header, and `_meta.traceparent`); a recorder in front
//! of the HTTP fixture upstream sees the call's `traceparent` carry the same trace id.

mod common;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue};
use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const META_PARENT: &str = "b7ad6b7169203331";
/// Task text that must never become an attribute.
const TASK: &str = "fetch the quarterly report zebracorn";

#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace: String,
    id: String,
    parent: String,
    attrs: BTreeMap<String, String>,
}

type Spans = Arc<Mutex<Vec<Span>>>;

async fn receive(State(spans): State<Spans>, body: Bytes) -> &'static str {
    let req = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
    let mut got = spans.lock().unwrap();
    for s in req.resource_spans.iter().flat_map(|r| &r.scope_spans) {
        for span in &s.spans {
            let attrs = (span.attributes.iter())
                .map(|kv| {
                    let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(Any::StringValue(s)) => s.clone(),
                        Some(other) => format!("{other:?}"),
                        None => String::new(),
                    };
                    (kv.key.clone(), v)
                })
                .collect();
            got.push(Span {
                name: span.name.clone(),
                trace: hex(&span.trace_id),
                id: hex(&span.span_id),
                parent: hex(&span.parent_span_id),
                attrs,
            });
        }
    }
    ""
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the recorder in front of the fixture saw: each request's traceparent and body.
type Seen = Arc<Mutex<Vec<(Option<String>, String)>>>;

async fn forward(
    State((to, seen)): State<(String, Seen)>,
    request: Request,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let tp = parts
        .headers
        .get("traceparent")
        .map(|v| v.to_str().unwrap().to_string());
    seen.lock()
        .unwrap()
        .push((tp, String::from_utf8_lossy(&body).into_owned()));
    let mut headers = parts.headers.clone();
    headers.remove("host");
    let r = reqwest::Client::new()
        .request(parts.method, &to)
        .headers(headers)
        .body(body)
        .send()
        .await
        .unwrap();
    let mut out = axum::response::Response::builder().status(r.status());
    *out.headers_mut().unwrap() = r.headers().clone();
    out.body(Body::from_stream(r.bytes_stream())).unwrap()
}

/// Serves `router` on 127.0.0.1:0 (on the test's runtime, whose other worker keeps it
/// answering while the test blocks on the gateway's process).
async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_receiver_under_the_clients_trace() {
    let spans: Spans = Default::default();
    let otlp = serve(
        axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(spans.clone()),
    )
    .await;
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let seen: Seen = Default::default();
    let recorder = serve(
        axum::Router::new()
            .fallback(forward)
            .with_state((beta.url.clone(), seen.clone())),
    )
    .await;
    let config = dir.config(
        "mode = \"guided\"\nstartup_wait_ms = 30000\n",
        &[format!(
            "[code]\nenabled = true\nallow_destructive = [\"beta/status\"]\n\n[upstreams.beta]\nurl = \"{recorder}/mcp\"\n\n[telemetry]\nendpoint = {otlp:?}\nservice_name = \"tg-test\"\n"
        )],
    );
    let mut gw = HttpGateway::start(&config, &[]);

    let mut headers = HashMap::new();
    headers.insert(
        HeaderName::from_static("traceparent"),
        HeaderValue::from_str(&format!("00-{TRACE}-{PARENT}-01")).unwrap(),
    );
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gw.url.clone()).custom_headers(headers),
    );
    let (handler, _notes) = test_client();
    let client = handler
        .serve(transport)
        .await
        .expect("initialize over HTTP");
    let r = call(&client, "route", json!({"task": TASK})).await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    let r = call(
        &client,
        "execute",
        json!({"tool": "beta/get.report", "arguments": {"quarter": "Q3"}}),
    )
    .await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    let program = "const s = await tools.beta.status({}); return 'ran'";
    let r = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    // `_meta.traceparent` wins over the header (2026-07-28 clients carry it there).
    let mut meta = RequestMetaObject::default();
    meta.0.insert(
        "traceparent".into(),
        json!(format!("00-{META_TRACE}-{META_PARENT}-01")),
    );
    let mut params = CallToolRequestParams::new("execute")
        .with_arguments(args(json!({"tool": "beta/status", "arguments": {}})));
    params.meta = Some(meta);
    let r = client.call_tool(params).await.unwrap();
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    drop(client);
    // Spans still batched are flushed at shutdown: once the process has exited, every
    // span is at the receiver (its handler stores them before answering the export).
    assert!(gw.stop().success());
    let got = spans.lock().unwrap().clone();
    let names: Vec<(&str, &str)> = got
        .iter()
        .map(|s| (s.name.as_str(), s.trace.as_str()))
        .collect();
    let find = |name: &str, trace: &str, f: &dyn Fn(&Span) -> bool| {
        got.iter()
            .find(|s| s.name == name && s.trace == trace && f(s))
            .unwrap_or_else(|| panic!("no span {name} in trace {trace}: {names:?}"))
            .clone()
    };
    let attr = |s: &Span, k: &str| s.attrs.get(k).cloned().unwrap_or_default();

    // route: the request's span is a child of the client's span; route's of the request's.
    let req = find("tools/call", TRACE, &|s| attr(s, "mcp.tool") == "route");
    assert_eq!(req.parent, PARENT, "{req:?}");
    assert_eq!(attr(&req, "toolgate.surface"), "guided");
    let route = find("route", TRACE, &|s| s.parent == req.id);
    assert_eq!(attr(&route, "toolgate.outcome"), "ok", "{route:?}");
    assert!(
        !attr(&route, "toolgate.route.decision").is_empty(),
        "{route:?}"
    );

    // execute under the header's trace: admit (policy, validate), upstream, shape.
    let req = find("tools/call", TRACE, &|s| attr(s, "mcp.tool") == "execute");
    assert_eq!(req.parent, PARENT);
    let exec = find("execute", TRACE, &|s| s.parent == req.id);
    let admit = find("admit", TRACE, &|s| s.parent == exec.id);
    assert_eq!(
        attr(&admit, "toolgate.tool_id"),
        "beta/get.report",
        "{admit:?}"
    );
    assert_eq!(attr(&admit, "toolgate.outcome"), "admitted");
    find("policy", TRACE, &|s| s.parent == admit.id);
    find("validate", TRACE, &|s| s.parent == admit.id);
    let up = find("upstream", TRACE, &|s| s.parent == exec.id);
    assert_eq!(attr(&up, "toolgate.tool_id"), "beta/get.report", "{up:?}");
    assert_eq!(attr(&up, "toolgate.outcome"), "ok");
    find("shape", TRACE, &|s| s.parent == exec.id);

    // A program: execute_code, then one program.call per tools.* call, admit and
    // upstream inside it.
    let req = find("tools/call", TRACE, &|s| {
        attr(s, "mcp.tool") == "execute_code"
    });
    let code = find("execute_code", TRACE, &|s| s.parent == req.id);
    assert_eq!(attr(&code, "toolgate.outcome"), "ok", "{code:?}");
    let pc = find("program.call", TRACE, &|s| s.parent == code.id);
    assert_eq!(attr(&pc, "toolgate.outcome"), "ok", "{pc:?}");
    let admit = find("admit", TRACE, &|s| s.parent == pc.id);
    assert_eq!(attr(&admit, "toolgate.surface"), "code");
    let up = find("upstream", TRACE, &|s| s.parent == pc.id);
    assert_eq!(attr(&up, "toolgate.tool_id"), "beta/status", "{up:?}");

    // The `_meta` call is its own trace, under the client's span named there.
    let req = find("tools/call", META_TRACE, &|s| {
        attr(s, "mcp.tool") == "execute"
    });
    assert_eq!(req.parent, META_PARENT);
    let up = find("upstream", META_TRACE, &|_| true);
    assert_eq!(attr(&up, "toolgate.tool_id"), "beta/status");

    // Bounded attributes: never the task text or an argument.
    for s in &got {
        for (k, v) in &s.attrs {
            assert!(!v.contains("zebracorn") && v != "Q3", "{k}={v} on {s:?}");
        }
    }

    // The upstream's HTTP request carried the call's trace (a span of the trace's own).
    let seen = seen.lock().unwrap().clone();
    let upstream_tp = |tool: &str| {
        seen.iter()
            .find(|(_, body)| body.contains("tools/call") && body.contains(tool))
            .and_then(|(tp, _)| tp.clone())
            .unwrap_or_else(|| panic!("no traceparent on the upstream's {tool} call: {seen:?}"))
    };
    let tp = upstream_tp("get.report");
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!((parts[0], parts[1]), ("00", TRACE), "{tp}");
    let report = find("upstream", TRACE, &|s| {
        attr(s, "toolgate.tool_id") == "beta/get.report"
    });
    assert_eq!(parts[2], report.id, "{tp}: the upstream span's id");
    // The program's status call (the header's trace) and execute's (the `_meta` one).
    let status: Vec<String> = (seen.iter())
        .filter(|(_, body)| body.contains("tools/call") && body.contains("\"status\""))
        .filter_map(|(tp, _)| tp.clone())
        .collect();
    assert!(status.iter().any(|tp| tp.contains(TRACE)), "{status:?}");
    assert!(
        status.iter().any(|tp| tp.contains(META_TRACE)),
        "{status:?}"
    );
}
