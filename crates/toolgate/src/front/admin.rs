//! The operator's endpoints, off the MCP paths: `GET /metrics` (Prometheus), `GET /ui`
//! (the dashboard page) and `GET /ui/data` (what the page draws, as JSON). They answer
//! loopback peers only unless `gateway.admin_allow_remote` is set, and, when keys are
//! configured, only a key whose scopes list `"admin"`: as `Authorization: Bearer`, or for
//! a browser the `toolgate_key` cookie the refusal page sets.

use crate::gateway::Gateway;
use crate::guided::Engine;
use crate::policy::Policy;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use toolgate_core::observe::{Snapshot, UpstreamGauge};

/// The cookie the dashboard's key form sets (the page cannot send a header on load).
const COOKIE: &str = "toolgate_key";

#[derive(Clone)]
struct Admin {
    engine: Arc<Engine>,
    policy: Arc<Policy>,
}

/// The admin routes, behind their own check (not the MCP endpoints' key check).
pub(super) fn routes(engine: Arc<Engine>) -> axum::Router {
    let state = Admin {
        policy: engine.policy.clone(),
        engine,
    };
    axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .route("/ui", axum::routing::get(page))
        .route("/ui/data", axum::routing::get(data))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Loopback (unless configured otherwise), then an admin key when keys are configured.
async fn guard(State(admin): State<Admin>, request: Request, next: Next) -> Response {
    let gw = &admin.engine.gw;
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    // DNS rebinding: a page on another site that resolves its name to 127.0.0.1 reaches a
    // loopback peer check, but not this one (the MCP endpoints get the same from rmcp).
    let host = (request.headers().get(header::HOST)).and_then(|v| v.to_str().ok());
    if !host.is_some_and(|h| host_allowed(h, gw.settings())) {
        let why = "/metrics and /ui answer only Host names this gateway knows (localhost, its address, gateway.allowed_hosts)";
        return (StatusCode::FORBIDDEN, why).into_response();
    }
    // On a dual-stack listener (`[::]:PORT`) a local IPv4 client is `::ffff:127.0.0.1`.
    let local = peer.is_some_and(|ip| ip.to_canonical().is_loopback());
    if !local && !gw.settings().admin_allow_remote {
        let why = "/metrics and /ui answer loopback peers only; set gateway.admin_allow_remote = true to serve them to other hosts (with an admin key)";
        return (StatusCode::FORBIDDEN, why).into_response();
    }
    let header = (request.headers().get(header::AUTHORIZATION)).and_then(|v| v.to_str().ok());
    let cookie = cookie_key(&request).map(|k| format!("Bearer {k}"));
    let presented = header.map(str::to_string).or(cookie);
    let browser = request.uri().path().starts_with("/ui") && presented.is_none();
    match admin.policy.authenticate(presented.as_deref()).await {
        Ok(grant) if grant.is_admin() => {
            super::conn::Authenticated::mark(request.extensions());
            next.run(request).await
        }
        Ok(grant) => {
            let why = format!(
                "{} may not read /metrics or /ui: add \"admin\" to its scopes ({})",
                grant.who(),
                match grant.name.strip_prefix("oauth:") {
                    Some("default") => "auth.oauth.default.scopes".to_string(),
                    Some(rule) => format!("the scopes of the auth.oauth.map rule {rule:?}"),
                    None => format!("policy.keys.{}.scopes", grant.name),
                }
            );
            (StatusCode::FORBIDDEN, why).into_response()
        }
        Err(_) if browser => (StatusCode::UNAUTHORIZED, Html(KEY_FORM)).into_response(),
        Err(rejection) => {
            admin
                .policy
                .audit_rejected_key(&rejection, request.uri().path());
            let why =
                format!("{rejection}; /metrics and /ui need a key whose scopes list \"admin\"");
            let mut response = why.into_response();
            *response.status_mut() = super::auth::status_of(&rejection);
            (response.headers_mut()).insert(
                header::WWW_AUTHENTICATE,
                super::auth::challenge(&admin.policy, &rejection),
            );
            response
        }
    }
}

/// `host` (with or without a port) is loopback, the listen address, or in `allowed_hosts`.
fn host_allowed(host: &str, g: &crate::config::GatewayConfig) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    ["localhost", "127.0.0.1", "::1"].contains(&name)
        || name == g.listen.ip().to_string()
        || g.allowed_hosts.iter().any(|h| h == name)
}

fn cookie_key(request: &Request) -> Option<String> {
    let cookies = request.headers().get(header::COOKIE)?.to_str().ok()?;
    cookies.split(';').find_map(|c| {
        let (name, value) = c.trim().split_once('=')?;
        (name == COOKIE).then(|| value.to_string())
    })
}

/// Asks a browser for the key and keeps it in a cookie for `/ui`; nothing is sent until
/// the page reloads with it.
const KEY_FORM: &str = r#"<!doctype html><meta charset="utf-8"><title>toolgate</title>
<form onsubmit="document.cookie='toolgate_key='+encodeURIComponent(this.k.value)+'; path=/ui; SameSite=Strict';location.reload();return false">
<p>This gateway has API keys: enter one whose scopes list "admin".</p>
<input name="k" type="password" autofocus> <button>Open the dashboard</button></form>"#;

/// The gateway's state the gauges mirror, read now.
fn snapshot(engine: &Engine) -> Snapshot {
    let gw: &Gateway = &engine.gw;
    let stats = engine.store.stats();
    Snapshot {
        pages_open: stats.cursors,
        operations_open: stats.operations,
        operations_running: stats.running,
        upstreams: gw
            .upstreams()
            .map(|u| UpstreamGauge {
                name: u.name().to_string(),
                up: matches!(u.status(), crate::upstream::UpstreamStatus::Ready { .. }),
            })
            .collect(),
        code_workers_idle: gw.code_workers.idle(),
        code_runs_active: gw.code_runs.running_total(),
    }
}

/// OpenMetrics when the scraper asks for it (Prometheus does), else the classic text.
async fn metrics(State(admin): State<Admin>, headers: axum::http::HeaderMap) -> Response {
    let state = snapshot(&admin.engine);
    // Every answer already sent is counted before the counts are read.
    admin.engine.gw.settle_tally();
    let m = admin.engine.metrics();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (kind, text) = match accept.is_some_and(|a| a.contains("application/openmetrics-text")) {
        true => (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            m.encode(&state),
        ),
        false => (
            "text/plain; version=0.0.4; charset=utf-8",
            m.encode_text(&state),
        ),
    };
    ([(header::CONTENT_TYPE, kind)], text).into_response()
}

async fn page() -> Html<String> {
    Html(super::dashboard::page(None))
}

async fn data(State(admin): State<Admin>) -> Response {
    let engine = admin.engine.clone();
    // The catalog report counts tokens: off the async workers.
    match tokio::task::spawn_blocking(move || super::dashboard::data(&engine)).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::host_allowed;
    use crate::config::GatewayConfig;

    #[test]
    fn only_known_host_names_reach_the_admin_endpoints() {
        let g = GatewayConfig {
            allowed_hosts: vec!["gw.internal".into()],
            ..Default::default()
        };
        for ok in [
            "localhost:8377",
            "127.0.0.1:8377",
            "[::1]:8377",
            "localhost",
            "gw.internal:80",
        ] {
            assert!(host_allowed(ok, &g), "{ok}");
        }
        for bad in [
            "evil.example:8377",
            "evil.example",
            "127.0.0.1.evil.example",
            "[::2]:1",
        ] {
            assert!(!host_allowed(bad, &g), "{bad}");
        }
    }
}
