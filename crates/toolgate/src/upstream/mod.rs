//! Upstreams: one supervised MCP client connection per configured server.
//!
//! Each upstream runs its own supervisor task (`supervisor`): connect (spawn the child or
//! open the HTTP session), `initialize`, list every tool (following pagination), then
//! serve calls until the connection drops, and reconnect with exponential backoff. A slow
//! or dead upstream never delays the others. Only `client`, `connect` and this module
//! touch rmcp's client side; the rest of toolgate sees `ToolId`s, JSON and `CallOutcome`.

mod child;
mod client;
mod connect;
mod connect_error;
mod delegated;
pub(crate) mod environment;
pub(crate) mod exchange;
mod flood;
mod lines;
mod listing;
pub(crate) mod login;
pub(crate) mod mrtr;
pub(crate) mod oauth;
mod orphans;
mod outcome;
mod oversize;
pub(crate) use lines::top_level_id;
mod requests;
mod sse;
mod stdio;
mod supervisor;
mod tasks;
mod tasks_2025;

pub(crate) use requests::{Notice, RequestOptions};
pub(crate) use supervisor::supervise;
// The call types have one path, `toolgate_core::call`; this module uses them, it does not
// re-export them.
use toolgate_core::call::{CallError, CallOptions, CallOutcome};

use crate::config::UpstreamConfig;
use client::{token_key, ProgressRoutes, RouteGuard};
pub use orphans::{adopt_orphans, kill_orphans};
use outcome::{map_err, outcome_from};
use rmcp::model::{CallToolRequestParams, ClientRequest};
use rmcp::service::{PeerRequestOptions, RoleClient, ServiceError};
use rmcp::Peer;
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Tool objects by name, as an upstream wrote them.
pub(crate) type RawTools = Arc<Mutex<std::collections::HashMap<String, Map<String, Value>>>>;

/// Where an upstream's connection stands.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamStatus {
    /// Not tried yet, or connecting for the first time.
    Starting,
    /// Connected; `latency` is how long connect + initialize + tools/list took.
    Ready {
        /// How long connecting, initializing and listing the tools took.
        latency: Duration,
    },
    /// The last attempt failed or the connection dropped; retrying after a backoff.
    Retrying {
        /// Why the last attempt failed or the connection dropped.
        error: String,
        /// Failed attempts in a row (from 1; reset once a connection outlives its backoff).
        attempt: u32,
    },
    /// `enabled = false` in configuration.
    Disabled,
    /// The gateway is shutting down.
    Stopped,
}

impl UpstreamStatus {
    /// The status in one word (`starting`, `ready`, `down`, `disabled`, `stopped`).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready { .. } => "ready",
            Self::Retrying { .. } => "down",
            Self::Disabled => "disabled",
            Self::Stopped => "stopped",
        }
    }

    /// True once the first attempt has ended either way (for the startup wait).
    pub(crate) fn settled(&self) -> bool {
        !matches!(self, Self::Starting)
    }
}

/// One upstream: its configuration and live state, shared by its supervisor and callers.
pub struct Upstream {
    pub config: UpstreamConfig,
    state: RwLock<State>,
    /// Calls in flight that asked for progress, by token.
    progress: ProgressRoutes,
    /// Tool objects exactly as a stdio upstream wrote them (see `child::capture_tools`).
    raw_tools: RawTools,
    /// Signalled whenever the status or the tool list changes.
    changed: tokio::sync::watch::Sender<u64>,
    /// Callers in flight, notices and subscriptions (see `requests`).
    relay: Arc<requests::Relay>,
    /// HTTP: requests whose answer was over `max_message_bytes` (`oversize`).
    oversized: oversize::Oversized,
    /// HTTP: the last attempt to reach the server was refused (it is down): a lost stream
    /// is not retried, and a call it ends is told so (`oversize::Reconnect`).
    refused: Arc<std::sync::atomic::AtomicBool>,
    /// HTTP with `[upstreams.NAME.oauth]`: the gateway's own access token for the server.
    token: Option<Arc<oauth::TokenSource>>,
    /// `grant = "token_exchange"`: each caller's own session, with a token exchanged from
    /// the caller's (calls go there; the shared connection lists the tools).
    delegated: Option<delegated::Delegated>,
    /// HTTP: the `WWW-Authenticate` of the server's last 401, for the connection error.
    challenge: Arc<Mutex<Option<String>>>,
    /// HTTP: why the last request had no token to send (`[upstreams.NAME.oauth]`).
    token_failure: Arc<Mutex<Option<String>>>,
    /// HTTP: the server speaks the legacy HTTP+SSE transport (`transport = "sse"`, or
    /// found so by a connection), so a reconnect goes there first.
    legacy_sse: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    status: Option<UpstreamStatus>,
    tools: Vec<Map<String, Value>>,
    peer: Option<Peer<RoleClient>>,
    /// The server's name and version from initialize, for `toolgate check`.
    server_info: Option<String>,
    /// The protocol revision the last connection agreed (`2026-07-28` for a server that
    /// answered `server/discover`), for `toolgate check` and `toolgate tools`.
    protocol: Option<String>,
}

impl Upstream {
    pub(crate) fn new(config: UpstreamConfig) -> Arc<Self> {
        let status = if config.enabled {
            UpstreamStatus::Starting
        } else {
            UpstreamStatus::Disabled
        };
        Arc::new(Self {
            state: RwLock::new(State {
                status: Some(status),
                ..Default::default()
            }),
            progress: Arc::new(Mutex::new(Default::default())),
            raw_tools: Default::default(),
            changed: tokio::sync::watch::channel(0).0,
            relay: Default::default(),
            oversized: Default::default(),
            refused: Default::default(),
            challenge: Default::default(),
            token_failure: Default::default(),
            legacy_sse: Default::default(),
            token: match &config.transport {
                crate::config::Transport::Http { oauth: Some(o), .. } => {
                    Some(Arc::new(oauth::TokenSource::new(&config.name, o.clone())))
                }
                _ => None,
            },
            delegated: match &config.transport {
                crate::config::Transport::Http { oauth: Some(o), .. }
                    if o.grant == crate::config::upstream::OAuthGrant::TokenExchange =>
                {
                    Some(delegated::Delegated::new(o.clone()))
                }
                _ => None,
            },
            config,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// True for a user-delegated upstream (`grant = "token_exchange"`): its calls act for
    /// the caller, over the caller's own session.
    pub(crate) fn acts_for_callers(&self) -> bool {
        self.delegated.is_some()
    }

    /// The state store where `toolgate auth login` keeps this upstream's tokens.
    pub(crate) fn use_store(&self, store: Arc<dyn toolgate_core::store::Store>) {
        if let Some(t) = &self.token {
            t.use_store(store);
        }
    }

    pub fn status(&self) -> UpstreamStatus {
        self.state
            .read()
            .expect("state")
            .status
            .clone()
            .unwrap_or(UpstreamStatus::Starting)
    }

    /// The tool objects this upstream listed (empty while it is down).
    pub fn tools(&self) -> Vec<Map<String, Value>> {
        self.state.read().expect("state").tools.clone()
    }

    pub fn server_info(&self) -> Option<String> {
        self.state.read().expect("state").server_info.clone()
    }

    /// The protocol revision the last connection agreed, once connected.
    pub fn protocol(&self) -> Option<String> {
        self.state.read().expect("state").protocol.clone()
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.state.read().expect("state").peer.clone()
    }

    /// A receiver that sees a new value whenever status or tools change.
    pub(crate) fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.write().expect("state"));
        self.changed.send_modify(|v| *v += 1);
    }

    /// Calls `tool` with `arguments` on this upstream. An `input_required` answer goes to
    /// the call's client (see `mrtr`): taken by a 2026-07-28 one, or asked of an older one
    /// and the upstream retried with the answers.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        opts: CallOptions,
    ) -> Result<CallOutcome, CallError> {
        let name = self.name().to_string();
        // A user-delegated upstream: the caller's own session (held until the call ends).
        let (line, _lease) = match &self.delegated {
            None => (None, None),
            Some(d) => {
                let (line, lease) = self.delegated_line(d, opts.on_behalf.as_ref()).await?;
                (Some(line), Some(lease))
            }
        };
        let peer = match &line {
            Some(l) => l.peer.clone(),
            None => self.shared_peer()?,
        };
        let progress = line.as_ref().map_or(&self.progress, |l| &l.progress);
        let relay = line.as_ref().map_or(&self.relay, |l| &l.relay);
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let mut meta = None;
        if let Some(m) = opts.relay.as_ref().and_then(|r| r.mrtr()) {
            if let Some(r) = &m.resumes {
                if r.server != name || r.tool != tool {
                    let why = "the requestState was issued for another tool: call again without it";
                    return Err(CallError::Other {
                        server: name,
                        message: why.into(),
                    });
                }
                params.request_state = r.state.clone();
            }
            params.input_responses = m.input_responses;
            meta = m.client_capabilities.map(|caps| {
                let mut meta = rmcp::model::RequestMetaObject::new();
                meta.insert("io.modelcontextprotocol/clientCapabilities".into(), caps);
                meta
            });
        }
        let caller = relay.register(opts.relay.clone());
        let as_task = |params: CallToolRequestParams| {
            let arguments = params.arguments.unwrap_or_default();
            tasks_2025::call(
                self,
                &peer,
                tool,
                arguments,
                &opts,
                meta.clone(),
                caller.as_ref(),
            )
        };
        if tasks_2025::listed_as_required(self, tool) {
            return as_task(params).await;
        }
        for _ in 0..mrtr::MAX_ROUNDS {
            let round = self.round(
                &peer,
                progress,
                params.clone(),
                meta.clone(),
                &opts,
                caller.as_ref(),
            );
            let result = match round.await {
                // A 2025-11-25 tool that must be called as a task, not listed as one.
                Err(CallError::Rejected { code: -32601, .. }) if tasks_2025::speaks(self) => {
                    return as_task(params).await;
                }
                r => r?,
            };
            let asked = match result {
                rmcp::model::ServerResult::InputRequiredResult(asked) => asked,
                // The upstream made the call a task of its own: followed to its end.
                rmcp::model::ServerResult::CreateTaskResult(created) => {
                    if let Some(relay) = &opts.relay {
                        relay.task_made();
                    }
                    return tasks::follow(self, &peer, created.task, &opts, tool, meta).await;
                }
                other => return outcome_from(other, &name),
            };
            let Some(relay) = &opts.relay else {
                let why = "it needs input from the user, and no client stands behind this call (run it as a direct tool call)";
                return Err(CallError::Other {
                    server: name,
                    message: why.into(),
                });
            };
            let value = serde_json::to_value(&asked).unwrap_or_default();
            if relay.input_required(&name, tool, value.clone()) {
                return Err(CallError::InputRequired { server: name });
            }
            let requests = value.get("inputRequests").and_then(Value::as_object);
            let answers = mrtr::fulfil(relay, requests.unwrap_or(&Map::new()))
                .await
                .map_err(|e| CallError::Other {
                    server: name.clone(),
                    message: e.to_string(),
                })?;
            params.input_responses = Some(answers);
            params.request_state = asked.request_state;
        }
        let why = format!("it still asked for input after {} rounds", mrtr::MAX_ROUNDS);
        Err(CallError::Other {
            server: name,
            message: why,
        })
    }

    /// The shared connection's peer, or why there is none.
    fn shared_peer(&self) -> Result<Peer<RoleClient>, CallError> {
        let st = self.state.read().expect("state");
        match (&st.peer, &st.status) {
            (Some(p), _) => Ok(p.clone()),
            (None, status) => Err(CallError::Unavailable {
                server: self.name().to_string(),
                state: status
                    .as_ref()
                    .map_or("starting", UpstreamStatus::label)
                    .into(),
            }),
        }
    }

    /// For a user-delegated upstream: the session of the caller `who` acts for, with a
    /// token exchanged from their access token (now, or kept from an earlier exchange).
    /// A caller without an access token, or whose exchange the issuer refuses, is refused.
    async fn delegated_line(
        &self,
        pool: &delegated::Delegated,
        who: Option<&toolgate_core::call::OnBehalf>,
    ) -> Result<(delegated::Line, delegated::Lease), CallError> {
        let server = self.name().to_string();
        let refused = |e: exchange::ExchangeError| CallError::Other {
            server: server.clone(),
            message: e.to_string(),
        };
        // Nothing is opened for a caller while the upstream itself is down.
        self.shared_peer()?;
        let (who, token) = match who {
            Some(w @ toolgate_core::call::OnBehalf { token: Some(t), .. }) => (w, t),
            _ => {
                let caller = who.map_or("a caller outside any session".into(), |w| {
                    w.principal.label()
                });
                return Err(refused(exchange::ExchangeError::NoCallerToken { caller }));
            }
        };
        let lease = pool.lease(&server, &who.principal).map_err(refused)?;
        let how = lease.token.exchange_for(token).await.map_err(refused)?;
        let _ = who.exchange.set(how);
        let line = lease.line(self).await.map_err(|e| CallError::Other {
            server: server.clone(),
            message: format!(
                "cannot open a session as {} (token exchange): {e}",
                who.principal.label()
            ),
        })?;
        Ok((line, lease))
    }

    /// Closes the callers' sessions idle for `idle` (a user-delegated upstream).
    pub(crate) fn close_idle_sessions(&self, idle: Duration) {
        if let Some(d) = &self.delegated {
            d.close_idle(idle);
        }
    }

    /// Closes every caller's session (the upstream's connection ended or it stops).
    pub(crate) fn close_sessions(&self) {
        if let Some(d) = &self.delegated {
            d.close_all();
        }
    }

    /// One `tools/call` request: progress routed to the caller, cancellation passed on.
    async fn round(
        &self,
        peer: &Peer<RoleClient>,
        progress: &ProgressRoutes,
        params: CallToolRequestParams,
        meta: Option<rmcp::model::RequestMetaObject>,
        opts: &CallOptions,
        caller: Option<&requests::CallerGuard>,
    ) -> Result<rmcp::model::ServerResult, CallError> {
        let tool = params.name.to_string();
        let tool = tool.as_str();
        let timeout = opts.timeout.unwrap_or(self.config.call_timeout);
        let mut call = rmcp::model::CallToolRequest::new(params);
        // The call's trace context, for an HTTP upstream's `traceparent` (see oversize.rs).
        if let Some(tp) = toolgate_core::observe::trace::outgoing() {
            call.extensions.insert(tp);
        }
        let request = ClientRequest::CallToolRequest(call);
        let mut options = PeerRequestOptions::with_timeout(timeout);
        options.meta = meta;
        let started = Instant::now();
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| map_err(e, &self.config, tool, timeout))?;
        // rmcp assigns every request its own progress token; route that one to the caller
        // (notifications that beat this registration are held for it, see ProgressTable).
        let route = opts.progress.clone().map(|tx| {
            let key = token_key(&handle.progress_token);
            progress.lock().expect("progress").insert(key.clone(), tx);
            RouteGuard(progress, key)
        });
        let cancel = opts.cancel.clone().unwrap_or_default();
        let request_id = handle.id.clone();
        let answered = request_id.clone();
        if let Some(c) = caller {
            c.bind(&request_id);
        }
        let mut in_flight = InFlight(Some((peer, request_id)));
        let response = tokio::select! {
            r = handle.await_response() => r,
            _ = cancel.cancelled() => {
                // Dropping the handle abandons the request; tell the upstream too.
                in_flight.cancel("cancelled by the client").await;
                return Err(CallError::Cancelled);
            }
        };
        in_flight.0 = None;
        let reporting = route
            .as_ref()
            .is_some_and(|r| r.0.lock().expect("progress").has_progress(&r.1));
        if reporting {
            // rmcp hands notifications to spawned tasks but responses straight to the
            // caller, so progress sent just before the result may still be on its way to
            // `on_progress`; keep the route a moment so it is not lost. Only for calls
            // whose upstream reports progress: every request carries a token, most
            // upstreams never use it, and those calls must not wait.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(route);
        if let (Err(e), Some(relay)) = (&response, &opts.relay) {
            match e {
                // The upstream needs a capability this call's client did not declare: the
                // front answers with the same error (-32021).
                ServiceError::McpError(e)
                    if e.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY =>
                {
                    mrtr::missing_kinds(e.data.as_ref())
                        .into_iter()
                        .for_each(|k| relay.refused(k));
                    relay.missing(e.data.clone());
                }
                // The gateway's own timeout ended the call, whatever was refused meanwhile.
                ServiceError::Timeout { .. } => relay.timed_out(),
                _ => {}
            }
        }
        let result = response.map_err(|e| {
            let key = requests::request_key(&answered);
            if self.oversized.lock().expect("oversized").remove(&key) {
                let name = self.name();
                return CallError::Other { server: name.to_string(), message: format!(
                    "its answer to {tool:?} was larger than upstreams.{name}.max_message_bytes = {} and was dropped: ask for less, or raise the limit",
                    self.config.max_message_bytes
                ) };
            }
            let refused = self.refused.load(std::sync::atomic::Ordering::Relaxed);
            match map_err(e, &self.config, tool, timeout) {
                CallError::Closed { server, .. } if refused => CallError::Closed {
                    server,
                    also: ", and it no longer accepts connections at its URL: the server is down or restarting; the gateway reconnects when it is back".into(),
                },
                other => other,
            }
        })?;
        tracing::debug!(upstream = %self.name(), tool, ms = started.elapsed().as_millis() as u64, "call done");
        Ok(result)
    }
}

/// A request sent and not yet answered, as [`Upstream::round`] awaits it: cancelled by the
/// caller, or dropped armed (the call's future dropped before the answer: a program that
/// ended or ran out of time, an operation cancelled, a shutdown's cut), it tells the
/// upstream the request is abandoned, so that the upstream stops work nobody waits for.
/// (It borrows the peer: a call that is answered clones nothing.)
struct InFlight<'a>(Option<(&'a Peer<RoleClient>, rmcp::model::RequestId)>);

impl InFlight<'_> {
    /// Sends the upstream `notifications/cancelled` for the request, once.
    async fn cancel(&mut self, why: &str) {
        if let Some((peer, id)) = self.0.take() {
            let notice = rmcp::model::CancelledNotificationParam::new(Some(id), Some(why.into()));
            let _ = peer.notify_cancelled(notice).await;
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Some((peer, id)) = self.0.take() {
            let peer = peer.clone();
            runtime.spawn(async move {
                InFlight(Some((&peer, id)))
                    .cancel("abandoned: nothing waits for its answer any more")
                    .await
            });
        }
    }
}
