//! Streamable HTTP: `/mcp` (the configured surface), `/mcp/guided`, `/mcp/direct`, and
//! `/mcp/p/<profile>` (the configured surface under a profile), all behind the key check;
//! `GET /` says what this is and where the endpoints are; `/metrics` and `/ui` are the
//! operator's (`admin.rs`, their own check).

use super::fast::{Endpoint, FastLane};
use super::Session;
use crate::config::Mode;
use crate::engine::Engine;
use crate::gateway::Gateway;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The axum router with every MCP endpoint, and the fast lane that answers their plain
/// 2026-07-28 `tools/call`s before the router (`front::fast`).
pub(super) fn router(gw: Arc<Gateway>, shutdown: CancellationToken) -> (axum::Router, FastLane) {
    let g = gw.settings();
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(g.allowed_hosts.iter().cloned());
    let ip = g.listen.ip();
    if !ip.is_unspecified() {
        hosts.push(ip.to_string());
    }
    // Browsers send Origin: a page on another site must not drive a local gateway.
    let origins = super::relay::allowed_origins(&hosts);
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    config.cancellation_token = shutdown.clone();
    config.max_request_body_bytes = g.max_body_bytes;
    // A request served statelessly (protocol 2026-07-28) whose handler sends nothing before
    // its answer gets plain JSON, not an SSE stream; rmcp falls back to SSE when it must.
    // Session-mode (legacy) answers are always SSE in rmcp 3.11.
    config.json_response = true;
    // One engine for every endpoint: pages and operations are shared state.
    let engine = Engine::new(gw.clone());
    // Operations a stopped gateway left following an upstream's task are taken over here.
    crate::gate::resume::install(&engine);
    let policy = engine.policy.clone();
    // Every endpoint's sessions count against the same caps (`gateway.limits`).
    let mut caps =
        super::sessions::SessionCaps::new(g.limits.clone(), g.max_body_bytes, policy.clone());
    let mut fast = HashMap::new();
    let mut endpoint = |path: &str, mode: Mode, profile: Option<Arc<crate::policy::Profile>>| {
        // axum's `nest_service` serves a nested endpoint at its path with and without a
        // trailing slash; the fast lane takes the plain path (what clients are given).
        let lane = Endpoint {
            mode,
            profile: profile.clone(),
        };
        fast.insert(path.to_string(), lane);
        let engine = engine.clone();
        Shared(Arc::new(StreamableHttpService::new(
            move || Ok(Session::new(engine.clone(), mode).with_profile(profile.clone())),
            caps.manager(),
            config.clone(),
        )))
    };
    let mut app = axum::Router::new()
        .nest_service("/mcp/guided", endpoint("/mcp/guided", Mode::Guided, None))
        .nest_service("/mcp/direct", endpoint("/mcp/direct", Mode::Direct, None))
        .nest_service("/mcp", endpoint("/mcp", g.mode, None));
    for (name, profile) in &policy.config.profiles {
        let path = format!("/mcp/p/{name}");
        app = app.nest_service(&path, endpoint(&path, g.mode, Some(profile.clone())));
    }
    let fast = FastLane::new(engine.clone(), fast, &hosts, shutdown);
    let admin = super::admin::routes(engine.clone());
    let caps = Arc::new(caps);
    let unknown = axum::routing::any(unknown_profile).with_state(policy.clone());
    let index = index_page(g.mode, !policy.config.profiles.is_empty());
    let app = app
        .route("/mcp/p/{profile}", unknown.clone())
        .route("/mcp/p/{profile}/{*rest}", unknown)
        .layer(axum::middleware::from_fn_with_state(
            caps,
            super::sessions::cap_sessions,
        ))
        .layer(axum::middleware::from_fn_with_state(
            g.max_body_bytes,
            answer_broken_requests,
        ))
        .layer(axum::middleware::from_fn(session_end_is_ok))
        .layer(axum::middleware::from_fn_with_state(
            policy,
            super::auth::require_key,
        ))
        .route("/", axum::routing::get(move || async move { index }))
        .merge(admin);
    let app = match &engine.policy.oauth {
        Some(verifier) => {
            // The issuer's keys fetched now rather than on the first token; a failure is
            // logged and tried again then.
            let verifier = verifier.clone();
            tokio::spawn(async move {
                match verifier.warm().await {
                    Ok(n) => {
                        tracing::info!(issuer = %verifier.config.issuer, keys = n, "auth.oauth: the issuer's signing keys are loaded")
                    }
                    Err(e) => tracing::warn!("auth.oauth: {e} (tried again on the first token)"),
                }
            });
            let document = axum::routing::get(super::auth::protected_resource)
                .with_state(engine.policy.clone());
            let well_known = crate::policy::oauth::metadata::WELL_KNOWN;
            app.route(well_known, document.clone())
                .route(&format!("{well_known}/{{*path}}"), document)
        }
        None => app,
    };
    (app, fast)
}

/// rmcp's service for one endpoint behind an `Arc`. axum clones a route's service for every
/// request, and so does rmcp's own `Service::call`; cloning rmcp's service copies its
/// configuration (the allowed hosts and origins, a dozen strings) each time.
#[derive(Clone)]
struct Shared(Arc<StreamableHttpService<Session, LocalSessionManager>>);

impl tower_service::Service<axum::extract::Request> for Shared {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::extract::Request) -> Self::Future {
        let service = self.0.clone();
        let post = request.method() == axum::http::Method::POST;
        Box::pin(async move {
            let response = service.handle(request).await.map(axum::body::Body::new);
            Ok(if post {
                super::gather::gather(response).await
            } else {
                response
            })
        })
    }
}

/// `GET /`: a person (or a client pointed at the wrong path) learns what answers here.
/// Nothing secret: no profile names, no tools.
fn index_page(mode: Mode, profiles: bool) -> String {
    let mut text = format!(
        "toolgate {}: an MCP gateway (Streamable HTTP)\n\n\
         POST /mcp           MCP, the configured surface ({})\n\
         POST /mcp/guided    MCP, the guided surface (route, execute, continue)\n\
         POST /mcp/direct    MCP, every tool under its exposed name\n\
         GET  /metrics       Prometheus metrics (loopback, an admin key)\n\
         GET  /ui            the dashboard (loopback, an admin key)\n",
        env!("CARGO_PKG_VERSION"),
        mode.as_str()
    );
    if profiles {
        text.push_str("POST /mcp/p/<profile> MCP, the configured surface under a profile\n");
    }
    text.push_str(
        "\nConnect an MCP client to one of these URLs, e.g.\n  \
         claude mcp add --transport http toolgate http://<this address>/mcp\n",
    );
    text
}

/// A session ended with `DELETE` answers 200: rmcp answers 202, and the Python SDK (and
/// others) accept only 200 or 204, printing "Session termination failed: 202" on every exit.
async fn session_end_is_ok(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = req.method() == axum::http::Method::DELETE;
    let mut response = next.run(req).await;
    if delete && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::OK;
    }
    response
}

/// A JSON POST body rmcp would answer wrongly (415 for text that is not JSON, -32601 for a
/// `tools/call` without a name) is answered here (`frames::refusal`): 400 for a message
/// that cannot be read, 200 with the JSON-RPC error otherwise, both with the request's id.
async fn answer_broken_requests(
    axum::extract::State(max_body): axum::extract::State<usize>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let json = (req.headers().get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if req.method() != axum::http::Method::POST || !json {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match super::conn::read_body(body, max_body).await {
        Ok(bytes) => bytes,
        Err(answer) => return answer,
    };
    // A request of 2025-11-25's task form (in a session that agreed on that revision) goes
    // to rmcp under a name it hands to the handler.
    let agreed = (parts.headers.get("mcp-protocol-version"))
        .is_some_and(|v| v.as_bytes() == super::augmented::VERSION.as_bytes());
    let bytes = match agreed.then(|| super::augmented::renamed(&bytes)).flatten() {
        Some(renamed) => axum::body::Bytes::from(renamed),
        None => bytes,
    };
    let method = match super::frames::check(&bytes) {
        Ok(method) => method,
        Err(answer) => {
            let code = answer["error"]["code"].as_i64();
            let status = match code {
                Some(-32700 | -32600) => StatusCode::BAD_REQUEST,
                _ => StatusCode::OK,
            };
            return (status, axum::Json(answer)).into_response();
        }
    };
    // What a 2025-11-25 client reads about tasks is added to these two answers.
    let amend = match method.name.as_deref() {
        Some("initialize") => Some("initialize"),
        Some("tools/list") => agreed.then_some("tools/list"),
        _ => None,
    };
    let mut req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    req.extensions_mut().insert(method);
    let response = next.run(req).await;
    match amend {
        Some(method) => amended(method, response).await,
        None => response,
    }
}

/// rmcp's answer to an `initialize` or a 2025-11-25 session's `tools/list`, with what
/// `augmented::amend` adds: a JSON body, or a session's event stream, read to its end
/// (rmcp ends it after the answer). It is read whether or not `gather` held it to its end
/// (10 ms): an answer slower than that would otherwise reach the client without what a
/// 2025-11-25 client reads about tasks. Any other answer (an error status) as it is.
async fn amended(method: &str, response: axum::response::Response) -> axum::response::Response {
    use axum::http::header;
    use axum::response::IntoResponse;
    let kind = (response.headers().get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let json = kind.starts_with("application/json");
    let stream = kind.starts_with("text/event-stream");
    if !(json || stream) || !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!("an answer to {method} could not be read back: {e}");
            return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let amend = |text: &str| {
        let mut message = serde_json::from_str::<serde_json::Value>(text).ok()?;
        super::augmented::amend(method, &mut message).then(|| message.to_string())
    };
    let changed = match json {
        true => std::str::from_utf8(&bytes).ok().and_then(amend),
        // Each `data:` line holding the answer, amended; the rest as it was.
        false => std::str::from_utf8(&bytes).ok().and_then(|text| {
            let mut changed = false;
            let lines: Vec<String> = (text.split('\n'))
                .map(|line| match line.strip_prefix("data: ").and_then(amend) {
                    Some(amended) => {
                        changed = true;
                        format!("data: {amended}")
                    }
                    None => line.to_string(),
                })
                .collect();
            changed.then(|| lines.join("\n"))
        }),
    };
    let body = match changed {
        Some(changed) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            axum::body::Body::from(changed)
        }
        None => axum::body::Body::from(bytes),
    };
    axum::response::Response::from_parts(parts, body)
}

/// `/mcp/p/<name>` for a profile that is not configured: 404 naming the ones that are.
async fn unknown_profile(
    axum::extract::State(policy): axum::extract::State<Arc<crate::policy::Policy>>,
    axum::extract::Path(params): axum::extract::Path<Vec<(String, String)>>,
) -> (axum::http::StatusCode, String) {
    let name = params.first().map(|(_, v)| v.as_str()).unwrap_or("");
    let known: Vec<&str> = policy.config.profiles.keys().map(String::as_str).collect();
    let body = if known.is_empty() {
        format!("no profile {name:?}: this gateway defines no profiles ([policy.profiles.NAME] in its configuration); use /mcp")
    } else {
        format!(
            "no profile {name:?}; the profiles are: {}",
            known.join(", ")
        )
    };
    (axum::http::StatusCode::NOT_FOUND, body)
}

#[cfg(test)]
mod tests {
    use super::amended;
    use axum::body::{Body, Bytes};
    use axum::http::{header, StatusCode};
    use futures::StreamExt;
    use std::time::Duration;

    const ANSWER: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}"#;

    /// An event stream whose events come `gap` apart: a priming event, then the answer.
    fn slow_stream(status: StatusCode, gap: Duration) -> axum::response::Response {
        let events = [
            "id: 0\nretry: 3000\ndata: \n\n".to_string(),
            format!("id: 1\ndata: {ANSWER}\n\n"),
        ];
        let body = futures::stream::iter(events).then(move |event| async move {
            tokio::time::sleep(gap).await;
            Ok::<_, std::io::Error>(Bytes::from(event))
        });
        axum::response::Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(body))
            .expect("a response")
    }

    async fn text(response: axum::response::Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        String::from_utf8(bytes.to_vec()).expect("UTF-8")
    }

    /// A session's `tools/list` answer slower than `gather` holds an answer (10 ms; a loaded
    /// machine) still tells a 2025-11-25 client each tool's `taskSupport`: the stream is read
    /// to its end before it is amended. Before, such an answer passed unamended.
    #[tokio::test]
    async fn a_slow_event_stream_answer_is_amended() {
        let response = amended(
            "tools/list",
            slow_stream(StatusCode::OK, Duration::from_millis(30)),
        )
        .await;
        let text = text(response).await;
        let data: Vec<serde_json::Value> = (text.lines())
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_json::from_str(d).expect("JSON"))
            .collect();
        assert_eq!(data.len(), 1, "one answer: {text}");
        assert_eq!(
            data[0]["result"]["tools"][0]["execution"]["taskSupport"], "optional",
            "{text}"
        );
        // The priming event is kept as it was.
        assert!(text.starts_with("id: 0\nretry: 3000\n"), "{text}");
    }

    /// An error answer passes as it is, not read.
    #[tokio::test]
    async fn an_error_answer_is_not_amended() {
        let response = amended(
            "tools/list",
            slow_stream(StatusCode::BAD_REQUEST, Duration::from_millis(1)),
        )
        .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert!(!text(response).await.contains("taskSupport"));
    }
}
