//! The fast lane: a 2026-07-28 `tools/call` in its plainest form, answered as one JSON body
//! by the handler rmcp would call for it, without rmcp's HTTP transport around the handler.
//!
//! Served statelessly, each such request costs rmcp's transport a typed read of the whole
//! message (every request variant tried in turn), a second serialisation to check the
//! `Mcp-*` headers, a service with its own serve loop and channel, and two tasks; through
//! the gateway's axum layers a third read of the body. That was over half of the gateway's
//! CPU for a call of a small tool (`docs/performance.md`). Here a request is taken only when
//! it is one rmcp would accept and answer with one JSON body, and that is checked up front,
//! cheaply; anything else, valid or not, goes the usual way (`front::http`) and gets the
//! usual answer, so no error is produced here that rmcp would produce differently:
//!
//! - `POST` to an MCP endpoint of the `guided` or `direct` surface (not `auto`), with no
//!   session id, no `Origin`, an allowed `Host`, JSON content, `Accept` naming JSON and SSE,
//!   `MCP-Protocol-Version: 2026-07-28`, and `Mcp-Method`/`Mcp-Name` equal to the body's;
//! - a key the policy accepts (a refused one goes the usual way: 401, audited);
//! - a body of exactly `jsonrpc`, an integer or string `id`, `method: "tools/call"` and
//!   `params` of `name` and, optionally, object `arguments` and `_meta`, whose `_meta` names
//!   2026-07-28 and the client's capabilities and asks for no progress and no log messages
//!   (both would be sent before the answer, on a stream);
//! - no `Mcp-Param-*` header, and a tool whose listed schema marks no argument
//!   `x-mcp-header` (rmcp checks those headers against the arguments, see below);
//! - a tool whose call sends the client nothing before its answer: a direct tool that is
//!   not a skill, or guided `execute`, `continue` and `route` (unless a selection expands
//!   the tool list, which is announced).
//!
//! The request then goes through rmcp's own request dispatch (`Service::handle_request`:
//! its `_meta` checks and result rules) to the same [`Session`] handler as ever, every check
//! of the gate included. The handler's `Peer` is one shared peer of a service with nowhere to
//! send: it names 2026-07-28, so rmcp refuses any server-to-client request made through it
//! (as it does for a stateless request), and a notification sent through it, which the
//! conditions above rule out, is logged as a bug and dropped.

use super::Session;
use crate::config::Mode;
use crate::engine::Engine;
use crate::policy::{Policy, Profile};
use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::header::{ACCEPT, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderMap, Method, Request, StatusCode};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientRequest, ErrorCode,
    Implementation, InitializeRequestParams, JsonObject, NumberOrString, ProtocolVersion,
    RequestMetaObject, ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext, RoleServer, RunningService, Service};
use rmcp::transport::Transport;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

// rmcp checks `Mcp-Param-*` headers against the input schema `Session::get_tool` gives
// (SEP-2243); the lane checks none, so it leaves to rmcp every call that has any to check:
// one carrying such a header, or of a tool whose schema marks an argument `x-mcp-header`.

/// The one protocol revision the lane serves.
const MODERN: &str = "2026-07-28";

/// The endpoints whose plain `tools/call` takes the lane, and what answering one needs.
pub(super) struct FastLane {
    /// Path -> the endpoint's surface and profile, as `front::http` routes them.
    endpoints: HashMap<String, Endpoint>,
    /// The `Host` values rmcp's DNS-rebinding check allows, read the way it reads them.
    hosts: Vec<Authority>,
    engine: Arc<Engine>,
    policy: Arc<Policy>,
    max_body: usize,
    /// The handlers' peer: a service's with nowhere to send (see the module).
    peer: Peer<RoleServer>,
    /// Keeps that service's serve loop alive; cancelled with the lane.
    _service: RunningService<RoleServer, Session>,
    /// Cancelled when the sessions end at shutdown: a call still unanswered then is
    /// answered 500, in the words of rmcp's stateless transport.
    stop: CancellationToken,
}

/// One MCP endpoint: the surface it serves and the profile its path names.
#[derive(Clone)]
pub(super) struct Endpoint {
    pub(super) mode: Mode,
    pub(super) profile: Option<Arc<Profile>>,
}

/// A `Host` or allowed host: lowercased, brackets off, with its port if it has one.
#[derive(PartialEq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl FastLane {
    /// The lane for `endpoints` (path -> endpoint). Must be made inside the runtime: it
    /// starts the handlers' peer.
    pub(super) fn new(
        engine: Arc<Engine>,
        endpoints: HashMap<String, Endpoint>,
        hosts: &[String],
        stop: CancellationToken,
    ) -> Self {
        let closed = stop.clone();
        // The service behind the shared peer: never asked anything, it only lends its
        // peer. Its client "negotiated" 2026-07-28, so rmcp refuses a server-to-client
        // request made through the peer, as in a stateless request's handler.
        let info = InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate-fast-lane", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2026_07_28);
        let service = rmcp::service::serve_directly(
            Session::new(engine.clone(), Mode::Direct),
            Nowhere { closed },
            Some(info),
        );
        Self {
            endpoints,
            hosts: hosts.iter().filter_map(|h| allowed_authority(h)).collect(),
            policy: engine.policy.clone(),
            max_body: engine.config().gateway.max_body_bytes,
            peer: service.peer().clone(),
            _service: service,
            engine,
            stop,
        }
    }

    /// Answers `req` when it may take the lane; otherwise gives it back, body unread or
    /// restored, to go the usual way.
    pub(super) async fn serve(&self, req: Request<Body>) -> Result<Response, Request<Body>> {
        let Some(endpoint) = self.endpoint(&req) else {
            return Err(req);
        };
        // Read as `front::auth` reads it (the first value), so both decide alike.
        let presented =
            (req.headers().get(http::header::AUTHORIZATION)).and_then(|v| v.to_str().ok());
        let grant = match self.policy.authenticate(presented).await {
            Ok(grant) => {
                super::conn::Authenticated::mark(req.extensions());
                grant
            }
            // Refused keys are answered (and audited) by `front::auth`.
            Err(_) => return Err(req),
        };
        let (mut parts, body) = req.into_parts();
        let bytes = match super::conn::read_body(body, self.max_body).await {
            Ok(bytes) => bytes,
            Err(answer) => return Ok(answer),
        };
        let Some(call) = self.plain_call(&parts.headers, &bytes, endpoint) else {
            return Err(Request::from_parts(parts, Body::from(bytes)));
        };
        parts.extensions.insert(grant);
        self.engine.metrics().fast_lane();
        Ok(self.answer(endpoint, call, parts).await)
    }

    /// The endpoint `req` is for, when its method, path and headers let it take the lane.
    fn endpoint(&self, req: &Request<Body>) -> Option<&Endpoint> {
        if req.method() != Method::POST {
            return None;
        }
        let h = req.headers();
        let endpoint = self.endpoints.get(req.uri().path())?;
        let modern = header(h, "mcp-protocol-version") == Some(MODERN);
        let plain = modern
            && endpoint.mode != Mode::Auto
            && h.get("mcp-session-id").is_none()
            && h.get(ORIGIN).is_none()
            && header(h, "mcp-method") == Some("tools/call")
            && is_json(header(h, CONTENT_TYPE.as_str()))
            && accepts_json_and_sse(h);
        (plain && self.host_allowed(h)).then_some(endpoint)
    }

    /// rmcp's DNS-rebinding check on `Host`, for a request that carries exactly one.
    fn host_allowed(&self, h: &HeaderMap) -> bool {
        let Some(host) = header(h, HOST.as_str()) else {
            return false;
        };
        let Ok(authority) = http::uri::Authority::try_from(host) else {
            return false;
        };
        let host = normalize(authority.host());
        let port = authority.port_u16();
        self.hosts.is_empty()
            || (self.hosts.iter()).any(|a| a.host == host && a.port.is_none_or(|p| Some(p) == port))
    }

    /// The call in `bytes`, when it is plain and its tool answers without a stream.
    fn plain_call(&self, h: &HeaderMap, bytes: &Bytes, endpoint: &Endpoint) -> Option<Call> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Message {
            jsonrpc: String,
            id: Value,
            method: String,
            params: Params,
        }
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Params {
            name: String,
            #[serde(default)]
            arguments: Option<JsonObject>,
            #[serde(rename = "_meta", default)]
            meta: Option<RequestMetaObject>,
        }
        let m: Message = serde_json::from_slice(bytes).ok()?;
        let id = match m.id {
            Value::String(s) => NumberOrString::String(s.into()),
            Value::Number(n) => NumberOrString::Number(n.as_i64()?),
            _ => return None,
        };
        let meta = m.params.meta?;
        let plain = m.jsonrpc == "2.0"
            && m.method == "tools/call"
            && plain_name(header(h, "mcp-name")?)? == m.params.name
            && meta
                .protocol_version()
                .is_some_and(|v| v.as_str() == MODERN)
            && meta
                .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
            && !meta.contains_key("progressToken")
            && !meta.contains_key("io.modelcontextprotocol/logLevel");
        if !plain
            || !self.answers_without_stream(endpoint.mode, &m.params.name)
            || self.has_param_headers(h, endpoint.mode, &m.params.name)
        {
            return None;
        }
        let mut params = CallToolRequestParams::new(m.params.name);
        params.arguments = m.params.arguments;
        Some(Call { id, params, meta })
    }

    /// Whether rmcp has `Mcp-Param-*` headers to check for a call of `name` (the request
    /// carries one, or the tool's listed schema marks an argument): such a call is left
    /// to it. Guided mode's lane takes only meta-tools, whose schemas mark none.
    fn has_param_headers(&self, h: &HeaderMap, mode: Mode, name: &str) -> bool {
        let carried = h.keys().any(|k| k.as_str().starts_with("mcp-param-"));
        carried || (mode == Mode::Direct && super::direct::marks_param_headers(&self.engine, name))
    }

    /// Whether a call of `name` on this surface sends the client nothing before its answer.
    fn answers_without_stream(&self, mode: Mode, name: &str) -> bool {
        use crate::guided::surface::{CONTINUE, EXECUTE, ROUTE};
        let engine = &self.engine;
        // Skills run as programs: they may take a while and are left to rmcp's transport.
        let skills = engine.skills().configured();
        match mode {
            Mode::Direct => !(skills && name.starts_with(crate::skills::SKILLS_SERVER)),
            Mode::Guided => {
                let prefix = engine.meta_prefix();
                match name.strip_prefix(prefix) {
                    Some(EXECUTE) => !skills,
                    Some(CONTINUE) => true,
                    // A selection that expands the tool list announces it.
                    Some(ROUTE) => !engine.guided_config().expand_selected,
                    _ => false,
                }
            }
            Mode::Auto => false,
        }
    }

    /// Runs `call` through rmcp's dispatch to a new `Session` of `endpoint`, as rmcp's
    /// stateless transport would, and answers it as one JSON body.
    async fn answer(
        &self,
        endpoint: &Endpoint,
        call: Call,
        parts: http::request::Parts,
    ) -> Response {
        let session =
            Session::new(self.engine.clone(), endpoint.mode).with_profile(endpoint.profile.clone());
        let id = call.id;
        let mut context = RequestContext::new(id.clone(), self.peer.clone());
        context.meta = call.meta;
        context.extensions.insert(parts);
        let ct = context.ct.clone();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(call.params));
        // On a task of its own, as rmcp runs a handler: a wake-up of the call then polls
        // the call alone, not this connection's whole stack of futures. A client that goes
        // away cancels it (the guard), and it finishes on its own, its audit record written.
        // Boxed: a task's cell holds its future, then its output, in one slot that tokio
        // moves whole (at the spawn, when the output is read and when the task is freed);
        // a box keeps that slot small.
        let handled = tokio::spawn(Box::pin(async move {
            session.handle_request(request, context).await
        }));
        // Cancelled when this answer is done with, as rmcp cancels a stateless request's
        // token once it is answered, or when the client goes away before that.
        let _cancel = ct.drop_guard();
        let result = tokio::select! {
            r = handled => match r {
                Ok(r) => r,
                // `Session::call_tool` answers its own panics; this is one in rmcp's dispatch.
                Err(e) => {
                    tracing::error!("a tools/call failed inside the gateway: {e}");
                    Err(rmcp::ErrorData::internal_error(super::PANICKED, None))
                }
            },
            _ = self.stop.cancelled() => {
                return internal_error("empty response: no response message received from handler");
            }
        };
        let (message, status) = match result {
            Ok(result) => (ServerJsonRpcMessage::response(result, id), StatusCode::OK),
            Err(error) => {
                let status = status_of(error.code);
                (ServerJsonRpcMessage::error(error, Some(id)), status)
            }
        };
        match serde_json::to_vec(&message) {
            Ok(body) => (status, [(CONTENT_TYPE, "application/json")], body).into_response(),
            Err(e) => internal_error(&format!("serialize json response: {e}")),
        }
    }
}

/// A 500 as rmcp's transport words it (`Encounter an error when …`, no content type).
fn internal_error(context: &str) -> Response {
    tracing::error!("Internal server error when {context}");
    let mut r = Response::new(Body::from(format!("Encounter an error when {context}")));
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r
}

/// A plain call, read.
struct Call {
    id: NumberOrString,
    params: CallToolRequestParams,
    meta: RequestMetaObject,
}

/// The HTTP status rmcp gives a handler's JSON-RPC error on a 2026-07-28 request (its
/// `_meta` was checked well formed before the lane took it).
fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The one value of header `name`, when it has exactly one and it is text.
fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = h.get_all(name).iter();
    let first = values.next()?;
    values
        .next()
        .is_none()
        .then(|| first.to_str().ok())
        .flatten()
}

/// `Mcp-Name` as a plain value; a Base64-encoded one (`=?base64?…?=`, or anything that
/// starts like one) is left to rmcp, which decodes or refuses it.
fn plain_name(value: &str) -> Option<&str> {
    (!value.starts_with("=?")).then_some(value)
}

fn is_json(content_type: Option<&str>) -> bool {
    let Some(v) = content_type else {
        return false;
    };
    let essence = v.split_once(';').map_or(v, |(e, _)| e);
    essence.trim().eq_ignore_ascii_case("application/json")
}

/// Whether `Accept` plainly names both JSON and SSE (no quotes, no weights: anything
/// fancier is read by rmcp).
fn accepts_json_and_sse(h: &HeaderMap) -> bool {
    let Some(accept) = header(h, ACCEPT.as_str()) else {
        return false;
    };
    if accept.contains(['"', '=']) {
        return false;
    }
    let mut json = false;
    let mut sse = false;
    for entry in accept.split(',') {
        let essence = entry.split(';').next().unwrap_or("").trim();
        json |= essence.eq_ignore_ascii_case("application/json");
        sse |= essence.eq_ignore_ascii_case("text/event-stream");
    }
    json && sse
}

/// As rmcp normalises a host: brackets off the start, then the end, lowercased.
fn normalize(host: &str) -> String {
    host.trim_matches('[')
        .trim_matches(']')
        .to_ascii_lowercase()
}

/// An allowed host as rmcp reads it: an authority (`host`, `host:port`), else the text.
fn allowed_authority(allowed: &str) -> Option<Authority> {
    let allowed = allowed.trim();
    if allowed.is_empty() {
        return None;
    }
    Some(match http::uri::Authority::try_from(allowed) {
        Ok(a) => Authority {
            host: normalize(a.host()),
            port: a.port_u16(),
        },
        Err(_) => Authority {
            host: normalize(allowed),
            port: None,
        },
    })
}

/// The transport of the service that lends the handlers its peer: nothing comes in, and
/// what goes out (nothing should) is logged and dropped.
struct Nowhere {
    closed: CancellationToken,
}

impl Transport<RoleServer> for Nowhere {
    type Error = std::convert::Infallible;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let what = serde_json::to_value(&item)
            .ok()
            .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_string));
        tracing::warn!(
            "a message sent during a call answered as one JSON body was dropped ({}): a bug in the fast lane's conditions (front/fast.rs)",
            what.as_deref().unwrap_or("an answer")
        );
        std::future::ready(Ok(()))
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleServer>>> + Send {
        let closed = self.closed.clone();
        async move {
            closed.cancelled().await;
            None
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rmcp's dispatch of every request kind, which the lane's task (in a box) and rmcp's
    /// own per-request tasks hold, is as large as its largest handler; what is large is
    /// boxed where it starts (`Upstream::request`, the call in `Session::call_tool`), so it
    /// stays small. With nothing boxed it was 40 KiB, with only the call boxed 8 KiB (a
    /// debug build), copied whole wherever it moves.
    #[tokio::test]
    async fn a_calls_task_is_small() {
        let gw = crate::gateway::Gateway::start(crate::config::Config::empty());
        let engine = Engine::new(gw.clone());
        let stop = CancellationToken::new();
        let lane = FastLane::new(engine.clone(), HashMap::new(), &[], stop.clone());
        let session = Session::new(engine, Mode::Direct);
        let context = RequestContext::new(NumberOrString::Number(1), lane.peer.clone());
        let params = CallToolRequestParams::new("any_tool");
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handled = session.handle_request(request, context);
        let size = std::mem::size_of_val(&handled);
        assert!(size < 6 * 1024, "a call's task holds {size} bytes");
        drop(handled);
        stop.cancel();
        gw.shutdown().await;
    }
}
