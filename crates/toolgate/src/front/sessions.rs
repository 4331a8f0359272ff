//! Session caps over HTTP (`gateway.limits.max_sessions`, `max_sessions_per_principal`):
//! every legacy session opened by `initialize` is counted for the key that opened it, across
//! every endpoint's rmcp session manager; past three quarters of the cap the least recently
//! used idle sessions are closed early; an `initialize` over a cap is refused with a
//! JSON-RPC error that says which cap and what to do. 2026-07-28 requests open no session.

use crate::config::limits::Limits;
use crate::policy::Grant;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const SESSION_HEADER: &str = "mcp-session-id";

/// The open sessions, by id, and the session managers they live in.
pub(super) struct SessionCaps {
    limits: Limits,
    /// `gateway.max_body_bytes`: the most of a body this layer reads itself.
    max_body: usize,
    /// For the audit record of a session id presented by another key.
    policy: Arc<crate::policy::Policy>,
    /// One per endpoint (`/mcp`, `/mcp/guided`, ...): where a session is closed early.
    managers: Vec<Arc<LocalSessionManager>>,
    state: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    open: HashMap<String, Open>,
    /// `initialize` requests admitted and not yet answered, by principal: counted against
    /// the caps, so a burst of them cannot pass together.
    pending: HashMap<String, usize>,
}

struct Open {
    /// The key (grant name) that opened it.
    principal: String,
    last_used: Instant,
}

impl SessionCaps {
    pub(super) fn new(limits: Limits, max_body: usize, policy: Arc<crate::policy::Policy>) -> Self {
        Self {
            limits,
            max_body,
            policy,
            managers: Vec::new(),
            state: Mutex::default(),
        }
    }

    /// A session manager for one endpoint, idle sessions closed by rmcp after `session_idle`.
    pub(super) fn manager(&mut self) -> Arc<LocalSessionManager> {
        let mut m = LocalSessionManager::default();
        m.session_config.keep_alive = Some(self.limits.session_idle);
        let m = Arc::new(m);
        self.managers.push(m.clone());
        m
    }

    /// Forgets sessions their manager no longer has (ended by idleness or by the client).
    async fn prune(&self) {
        let mut alive = std::collections::HashSet::new();
        for m in &self.managers {
            alive.extend(m.sessions.read().await.keys().map(|id| id.to_string()));
        }
        (self.state.lock().unwrap().open).retain(|id, _| alive.contains(id));
    }

    /// Under pressure (three quarters of `max_sessions` open), closes the least recently
    /// used sessions idle for more than a tenth of `session_idle`, down to that mark.
    async fn relieve(&self) {
        let mark = self.limits.max_sessions * 3 / 4;
        let idle = self.limits.session_idle / 10;
        let victims: Vec<String> = {
            let open = &self.state.lock().unwrap().open;
            if open.len() < mark.max(1) {
                return;
            }
            let mut idle_ones: Vec<(&String, &Open)> = (open.iter())
                .filter(|(_, o)| o.last_used.elapsed() > idle)
                .collect();
            idle_ones.sort_by_key(|(_, o)| o.last_used);
            let excess = open.len() + 1 - mark.max(1);
            (idle_ones.into_iter().take(excess))
                .map(|(id, _)| id.clone())
                .collect()
        };
        if !victims.is_empty() {
            tracing::info!(
                "{} sessions open, near gateway.limits.max_sessions = {}: closing {} idle for more than {:.0} s",
                self.state.lock().unwrap().open.len(),
                self.limits.max_sessions,
                victims.len(),
                idle.as_secs_f64()
            );
        }
        for id in victims {
            // Closing an id a manager does not have is a no-op: ask each.
            for m in &self.managers {
                let _ = m.close_session(&id.as_str().into()).await;
            }
            self.state.lock().unwrap().open.remove(&id);
        }
    }

    /// Counts an `initialize` of `principal` as pending, or says why it may not open a
    /// session now.
    fn reserve(&self, principal: &str) -> Result<(), (StatusCode, String)> {
        let mut state = self.state.lock().unwrap();
        let pending = state.pending.get(principal).copied().unwrap_or(0);
        let own = pending
            + state
                .open
                .values()
                .filter(|o| o.principal == principal)
                .count();
        let total = state.open.len() + state.pending.values().sum::<usize>();
        let l = &self.limits;
        if own >= l.max_sessions_per_principal {
            return Err((StatusCode::TOO_MANY_REQUESTS, format!(
                "too many open sessions for key {principal:?}: {own} (gateway.limits.max_sessions_per_principal = {}); end sessions you no longer use (HTTP DELETE with their Mcp-Session-Id), reuse one, or wait {:.0} s for idle ones to expire",
                l.max_sessions_per_principal,
                l.session_idle.as_secs_f64()
            )));
        }
        if total >= l.max_sessions {
            return Err((StatusCode::SERVICE_UNAVAILABLE, format!(
                "the gateway has too many open sessions: {total} (gateway.limits.max_sessions = {}); retry shortly, or use protocol 2026-07-28, which needs no session",
                l.max_sessions
            )));
        }
        *state.pending.entry(principal.to_string()).or_default() += 1;
        Ok(())
    }

    /// The pending `initialize` of `principal` was answered, opening session `id` or not.
    fn settle(&self, principal: &str, id: Option<String>) {
        let mut state = self.state.lock().unwrap();
        if let Some(n) = state.pending.get_mut(principal) {
            *n -= 1;
            if *n == 0 {
                state.pending.remove(principal);
            }
        }
        if let Some(id) = id {
            let principal = principal.to_string();
            (state.open).insert(
                id,
                Open {
                    principal,
                    last_used: Instant::now(),
                },
            );
        }
    }

    /// Marks session `id` used, unless another principal opened it.
    fn touch(&self, id: &str, principal: &str) -> Result<(), ()> {
        match self.state.lock().unwrap().open.get_mut(id) {
            Some(o) if o.principal != principal => Err(()),
            Some(o) => {
                o.last_used = Instant::now();
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A session id of another key: refused before it reaches the session (where its
    /// request ids could collide with the owner's and take their answers) with 403, and
    /// audited like any foreign handle.
    fn foreign(&self, principal: &str, id: &str, request_id: Value) -> Response {
        tracing::warn!(key = principal, hint = %toolgate_core::principal::redacted(id), "refused a session opened by another key");
        if let Some(log) = &self.policy.audit {
            let who = toolgate_core::principal::Principal::key(principal);
            log.foreign(&crate::policy::audit::ForeignRecord {
                session: "-",
                key: principal,
                principal: who.as_str(),
                profile: None,
                handle: "session",
                handle_text: id,
            });
        }
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32001, "message": "this session was opened with another API key: it is refused (and audited); initialize a session of your own"},
        });
        (StatusCode::FORBIDDEN, axum::Json(answer)).into_response()
    }
}

/// The middleware: counts sessions opened and ended, refuses an `initialize` over a cap.
pub(super) async fn cap_sessions(
    State(caps): State<Arc<SessionCaps>>,
    mut request: Request,
    next: Next,
) -> Response {
    let principal =
        (request.extensions().get::<Arc<Grant>>()).map_or_else(String::new, |g| g.name.clone());
    if let Some(id) = session_id(request.headers()) {
        let delete = request.method() == axum::http::Method::DELETE;
        if caps.touch(&id, &principal).is_err() {
            let (_, body) = request.into_parts();
            let bytes = match super::conn::read_body(body, caps.max_body).await {
                Ok(bytes) => bytes,
                Err(answer) => return answer,
            };
            let message: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            return caps.foreign(&principal, &id, message["id"].clone());
        }
        let response = next.run(request).await;
        if delete && response.status().is_success() {
            caps.state.lock().unwrap().open.remove(&id);
        }
        return response;
    }
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    // A JSON POST was read and checked by `front::http`, which noted its method; any other
    // POST is read here, up to `gateway.max_body_bytes` (413 past it).
    let noted = request.extensions_mut().remove::<super::frames::Method>();
    let (request, message) = match noted {
        Some(m) => (request, m),
        None => {
            let (parts, body) = request.into_parts();
            let bytes = match super::conn::read_body(body, caps.max_body).await {
                Ok(bytes) => bytes,
                Err(answer) => return answer,
            };
            let message: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let m = super::frames::Method {
                name: message["method"].as_str().map(str::to_string),
                id: message["id"].clone(),
            };
            (Request::from_parts(parts, axum::body::Body::from(bytes)), m)
        }
    };
    if message.name.as_deref() != Some("initialize") {
        return next.run(request).await;
    }
    caps.prune().await;
    caps.relieve().await;
    if let Err((status, why)) = caps.reserve(&principal) {
        tracing::warn!("initialize refused: {why}");
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": message.id,
            "error": {"code": -32000, "message": why},
        });
        let mut r = (status, axum::Json(answer)).into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return r;
    }
    // Settled however the request ends, even if its future is dropped.
    struct Pending<'a>(&'a SessionCaps, &'a str, Option<String>);
    impl Drop for Pending<'_> {
        fn drop(&mut self) {
            self.0.settle(self.1, self.2.take());
        }
    }
    let mut pending = Pending(&caps, &principal, None);
    let response = next.run(request).await;
    pending.2 = session_id(response.headers());
    drop(pending);
    response
}

fn session_id(headers: &axum::http::HeaderMap) -> Option<String> {
    (headers.get(SESSION_HEADER))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
