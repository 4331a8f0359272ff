//! The front: what MCP clients talk to, over stdio or Streamable HTTP. This is the only
//! place that speaks rmcp as a server.
//!
//! Each client session gets a `Session` handler bound to one surface (guided, direct);
//! what it answers to each request is in `handler.rs`.
//! Failures the model can fix come back as tool results with `isError: true`; protocol
//! misuse is a JSON-RPC error (rmcp produces those for malformed input).

mod account;
mod admin;
mod approve;
mod augmented;
mod auth;
mod auto;
mod conn;
mod convert;
pub(crate) mod dashboard;
mod direct;
mod fast;
mod frames;
mod gather;
mod handler;
mod http;
mod inputs;
mod listen;
mod meta_tools;
mod prompts;
mod relay;
mod request;
mod resources;
mod serve;
mod sessions;
mod tasks;

pub use serve::serve_http;

use crate::config::Mode;
use crate::engine::Engine;
use crate::gateway::Gateway;
use crate::policy::{Caller, Profile};
use rmcp::model::{CallToolRequestParams, CallToolResponse, InitializeRequestParams};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServiceExt};
use std::sync::{Arc, OnceLock};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The answer to a call whose handler panicked (a bug; the log says where).
pub(super) const PANICKED: &str =
    "the call failed inside the gateway (a bug: the gateway's log has the details)";

/// The surface a session actually gets (`auto` is resolved when the session starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surface {
    Guided,
    Direct,
}

/// One client session's handler.
#[derive(Clone)]
pub(crate) struct Session {
    engine: Arc<Engine>,
    /// The configured mode; `auto` is resolved at initialize.
    mode: Mode,
    state: Arc<SessionState>,
    /// The profile named by the endpoint (`/mcp/p/<profile>`) or, for stdio, the command
    /// line or configuration; `None`: the key's profile, else the default.
    profile: Option<Arc<Profile>>,
    /// A stdio session: its identity comes from configuration, not from a request.
    stdio: bool,
}

/// Per-session state shared by the handler's clones. A 2026-07-28 request has no
/// session: it gets a `Session` of its own, dropped when it is answered, which is why
/// nothing a later request needs lives here (handles belong to the caller's principal).
struct SessionState {
    /// An unguessable id, for the audit trail (never logged in full).
    id: String,
    /// The surface, fixed at initialize (for `auto`, once the catalog is known).
    surface: OnceLock<Surface>,
    /// Cancelled when the last handler clone is dropped (the session ended), which stops
    /// the session's background tasks.
    closed: CancellationToken,
    _guard: DropGuard,
    /// Tools this session lists beside the meta-tools.
    guided: meta_tools::GuidedState,
    /// The principal that opened the session (its first request): no other may use it.
    owner: OnceLock<toolgate_core::principal::Principal>,
    /// To release the session's resource subscriptions when it ends.
    engine: Arc<Engine>,
    /// Resources this session subscribed to (see `resources`).
    subs: Arc<relay::Subscriptions>,
    /// Set at `initialize`: a legacy session, counted open in the metrics until dropped.
    counted: OnceLock<()>,
    /// Set by the first `initialize`: a second one is refused.
    initialized: std::sync::atomic::AtomicBool,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        resources::release(self.engine.gw.clone(), &self.subs);
        if self.counted.get().is_some() {
            self.engine.metrics().session_closed();
        }
    }
}

impl Session {
    pub(crate) fn new(engine: Arc<Engine>, mode: Mode) -> Self {
        let closed = CancellationToken::new();
        let surface = OnceLock::new();
        match mode {
            Mode::Guided => drop(surface.set(Surface::Guided)),
            Mode::Direct => drop(surface.set(Surface::Direct)),
            Mode::Auto => {}
        }
        Self {
            state: Arc::new(SessionState {
                id: toolgate_core::ids::random_hex(16),
                surface,
                _guard: closed.clone().drop_guard(),
                closed,
                guided: meta_tools::GuidedState::default(),
                owner: OnceLock::new(),
                engine: engine.clone(),
                subs: Default::default(),
                counted: OnceLock::new(),
                initialized: Default::default(),
            }),
            engine,
            mode,
            profile: None,
            stdio: false,
        }
    }

    /// This session sees `profile` whatever its key says.
    pub(crate) fn with_profile(mut self, profile: Option<Arc<Profile>>) -> Self {
        self.profile = profile;
        self
    }

    /// Who is calling, for one request: the stdio identity, or the grant the HTTP
    /// middleware resolved from the request's key (see `auth`).
    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        let mut caller = self.caller_of(&context.extensions);
        caller.approver = Some(Arc::new(approve::ElicitApprover {
            peer: context.peer.clone(),
        }));
        caller.relay = Some(relay::relay_for(context, caller.principal()));
        caller
    }

    /// The caller a message with these extensions comes from, with no way to ask it.
    fn caller_of(&self, extensions: &rmcp::model::Extensions) -> Caller {
        let policy = self.engine.policy.clone();
        let grant = if self.stdio {
            policy.stdio_grant()
        } else {
            auth::grant_of(extensions).unwrap_or_else(crate::policy::Grant::nothing)
        };
        let profile = policy.profile_for(self.profile.as_ref(), &grant);
        Caller {
            session: self.state.id.clone(),
            grant,
            profile,
            surface: match self.surface() {
                Surface::Guided => "guided",
                Surface::Direct => "direct",
            },
            approver: None,
            relay: None,
            run: None,
            policy,
        }
    }

    /// Whether this session is passed `server`'s logs outside calls: like its resources
    /// and prompts, they belong to the whole server, so the key's scopes must cover it
    /// (`server/*`) and the profile show all of it; and the session's own principal must
    /// be the one asking.
    fn sees_logs(&self, caller: &Caller, server: &str) -> bool {
        let own = self.state.owner.get() == Some(&caller.principal());
        own && caller.grant.missing_server(server).is_none()
            && caller.policy.shows_server(caller, server)
    }

    fn gw(&self) -> &Arc<Gateway> {
        &self.engine.gw
    }

    /// The guided standing rule, with code mode's (and skills') when `code` is on.
    fn instructions(&self, code: bool) -> String {
        crate::guided::surface::instructions(code, self.engine.skills().configured())
    }

    /// The session's surface; `auto` before initialize counts as guided.
    pub(crate) fn surface(&self) -> Surface {
        self.state.surface.get().copied().unwrap_or(Surface::Guided)
    }

    /// `auto`: direct while the catalog's definitions cost less than the threshold.
    /// With a profile, what counts is the cost of the tools that profile lists.
    /// An old client that declares no capabilities gets direct whatever the cost
    /// (`auto::old_plain_client`).
    /// `request` is the client's `initialize` (none for a 2026-07-28 request, which never
    /// initializes and so is never an old client).
    fn resolve_auto(
        &self,
        context: &RequestContext<RoleServer>,
        request: Option<&InitializeRequestParams>,
    ) {
        if self.mode == Mode::Auto {
            if let Some((client, request)) =
                request.and_then(|r| auto::old_plain_client(r).map(|c| (c, r)))
            {
                tracing::warn!(
                    "auto mode: {client} declares protocol {} and no capabilities: serving it the direct surface (every tool); point it at /mcp/guided to use the meta-tools",
                    request.protocol_version
                );
                let _ = self.state.surface.set(Surface::Direct);
                return;
            }
            let caller = self.caller(context);
            let tokens = match caller.profile {
                Some(_) => caller.policy.listing_tokens(&caller, &self.gw().catalog()),
                None => self.engine.direct_tokens(),
            };
            let small = tokens < self.gw().settings().auto_threshold_tokens;
            let _ = self.state.surface.set(if small {
                Surface::Direct
            } else {
                Surface::Guided
            });
        }
    }
}

/// Serves one session over stdin/stdout until the client closes it. Its identity and
/// profile come from the configuration (`policy.stdio_key`, `policy.stdio_profile`).
pub async fn serve_stdio(gw: Arc<Gateway>, mode: Mode) -> anyhow::Result<()> {
    let engine = Engine::new(gw);
    crate::gate::resume::install(&engine);
    let profile = (engine.policy.stdio_profile()).and_then(|p| engine.policy.profile(p));
    let mut session = Session::new(engine, mode).with_profile(profile);
    session.stdio = true;
    let service = session
        .serve(frames::checked_stdio())
        .await
        .map_err(|e| anyhow::anyhow!("the client did not complete initialize: {e}"))?;
    service.waiting().await?;
    Ok(())
}

impl Session {
    /// `tools/call`, inside the request's span (see [`ServerHandler::call_tool`]).
    async fn call_tool_traced(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A client may call a name it remembers before listing: let the catalog settle.
        self.gw().wait_settled(self.gw().startup_wait()).await;
        self.resolve_unset_surface(&context);
        let mut caller = self.bound_caller(&context)?;
        // A retry answering what a parked call's upstream asked: that same call goes on.
        if let Some(state) = (request.request_state.as_deref())
            .filter(|s| s.starts_with(crate::upstream::mrtr::PARKED_PREFIX))
        {
            let responses = request.input_responses.as_ref();
            let outcome =
                inputs::resume_parked(self.gw(), &caller, state, responses, &context.ct).await?;
            return inputs::finish(self.gw(), &caller, &context, outcome, None);
        }
        // A client that declared tasks gets one for a direct call that takes its time.
        if self.surface() == Surface::Direct && tasks::declared(&context) {
            return tasks::call(self, &caller, request, &context).await;
        }
        let mrtr = self.mrtr_approver(&request, &context, &caller);
        if let Some(m) = &mrtr {
            caller.approver = Some(m.clone());
        }
        // A one-tool call (the approver's test) may be parked while its upstream asks.
        let (park, questions) = tokio::sync::mpsc::channel(1);
        let park = mrtr.is_some().then_some(park);
        let modern_relay = self.modern_relay(&request, &context, &caller, park)?;
        if let Some(r) = &modern_relay {
            caller.relay = Some(r.clone());
        }
        let mut args = request.arguments.unwrap_or_default();
        let turn = self.turn(&context, &caller, &request.name, &mut args);
        let parkable = modern_relay.is_some() && mrtr.is_some();
        // A call that may outlive this request has a token of its own (see inputs::run).
        let mut cx = context.clone();
        if parkable {
            cx.ct = CancellationToken::new();
        }
        let cancel = cx.ct.clone();
        let (session, who, name) = (self.clone(), caller.clone(), request.name);
        // Boxed once, here: it is large, and may move to a task of its own (inputs::run).
        let call = Box::pin(tracing::Instrument::in_current_span(async move {
            let mut result = session.call_surface(&name, args, &cx, &who).await;
            account::answered(session.gw(), turn, &mut result);
            result
        }));
        let outcome = match &modern_relay {
            Some(relay) if parkable => {
                let (call, relay) = (inputs::Running::Here(call), relay.clone());
                let tokens = (cancel, &context.ct);
                inputs::run(self.gw(), &caller, call, questions, relay, tokens).await
            }
            _ => inputs::Outcome::Done(call.await, modern_relay),
        };
        let answer = inputs::finish(self.gw(), &caller, &context, outcome, mrtr)?;
        // Guided `execute` that outlived its wait: a client that declared tasks gets its
        // operation as a task.
        if self.surface() == Surface::Guided && tasks::declared(&context) {
            return Ok(tasks::from_operation(self, answer));
        }
        Ok(answer)
    }
}
