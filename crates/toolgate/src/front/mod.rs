//! The front: what MCP clients talk to, over stdio or Streamable HTTP. This is the only
//! place that speaks rmcp as a server.
//!
//! Each client session gets a `Session` handler bound to one surface (guided, direct).
//! Failures the model can fix come back as tool results with `isError: true`; protocol
//! misuse is a JSON-RPC error (rmcp produces those for malformed input).

mod account;
mod admin;
mod approve;
mod auth;
mod auto;
mod conn;
mod convert;
pub mod dashboard;
mod direct;
mod fast;
mod frames;
mod gather;
mod guided;
mod http;
mod inputs;
mod listen;
mod prompts;
mod relay;
mod request;
mod resources;
mod serve;
mod sessions;

pub use serve::serve_http;

use crate::config::Mode;
use crate::engine::Engine;
use crate::gateway::Gateway;
use crate::policy::{Caller, Profile};
#[allow(deprecated)] // logging/setLevel: deprecated by SEP-2577, still what clients send.
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ResultType, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The answer to a call whose handler panicked (a bug; the log says where).
pub(super) const PANICKED: &str =
    "the call failed inside the gateway (a bug: the gateway's log has the details)";

/// The surface a session actually gets (`auto` is resolved when the session starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Guided,
    Direct,
}

/// One client session's handler.
#[derive(Clone)]
pub struct Session {
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
    guided: guided::GuidedState,
    /// The principal that opened the session (its first request): no other may use it.
    owner: OnceLock<crate::principal::Principal>,
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
            self.engine.gw.observe.metrics.session_closed();
        }
    }
}

impl Session {
    pub fn new(engine: Arc<Engine>, mode: Mode) -> Self {
        let closed = CancellationToken::new();
        let surface = OnceLock::new();
        match mode {
            Mode::Guided => drop(surface.set(Surface::Guided)),
            Mode::Direct => drop(surface.set(Surface::Direct)),
            Mode::Auto => {}
        }
        Self {
            state: Arc::new(SessionState {
                id: crate::ids::random_hex(16),
                surface,
                _guard: closed.clone().drop_guard(),
                closed,
                guided: guided::GuidedState::default(),
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
    pub fn with_profile(mut self, profile: Option<Arc<Profile>>) -> Self {
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
        crate::guided::surface::instructions(code, self.engine.skills.configured())
    }

    /// The session's surface; `auto` before initialize counts as guided.
    pub fn surface(&self) -> Surface {
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
            let small = tokens < self.gw().config.gateway.auto_threshold_tokens;
            let _ = self.state.surface.set(if small {
                Surface::Direct
            } else {
                Surface::Guided
            });
        }
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(capabilities());
        info.server_info = Implementation::new("toolgate", env!("CARGO_PKG_VERSION"));
        if self.surface() == Surface::Guided {
            // Before a caller is known: code mode only if every session gets it
            // (`initialize` states it for the caller).
            let everyone = self.gw().config.code.allows(None, "");
            info.instructions = Some(self.instructions(everyone));
        }
        info
    }

    /// Every revision up to 2026-07-28: the older ones over `initialize` and a session,
    /// 2026-07-28 statelessly (each request carries its version in `_meta`). Nothing a
    /// later request needs is kept in a session: handles belong to the caller's principal.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(listen::accepted(requested))
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        listen::run(self.gw().clone(), context).await;
        Ok(())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        // A session is initialized once: a second `initialize` would re-pick its surface
        // and identity under a live session.
        if self
            .state
            .initialized
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return Err(McpError::invalid_request(
                "this session is already initialized: a second initialize is refused; open a new session (a new connection, or over HTTP an initialize without Mcp-Session-Id) to start again",
                None,
            ));
        }
        context.peer.set_peer_info(request.clone());
        // The session belongs to whoever opens it.
        let caller = self.bound_caller(&context)?;
        if self.mode == Mode::Auto {
            self.gw()
                .wait_settled(self.gw().config.gateway.startup_wait)
                .await;
            self.resolve_auto(&context, Some(&request));
        }
        let mut result = self.negotiate_initialize(&request)?;
        if self.state.counted.set(()).is_ok() {
            self.gw().observe.metrics.session_opened("legacy");
        }
        if self.surface() == Surface::Guided {
            result.instructions = Some(self.instructions(self.engine.code_for(&caller)));
        }
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.gw()
            .wait_settled(self.gw().config.gateway.startup_wait)
            .await;
        self.resolve_unset_surface(&context);
        let caller = self.bound_caller(&context)?;
        let tools = match self.surface() {
            Surface::Direct => {
                let catalog = self.gw().catalog();
                let mut tools = direct::list(&self.engine);
                // The profile's view: hidden and shadow tools are not listed.
                tools.retain(|t| {
                    catalog
                        .by_exposed(&t.name)
                        .is_some_and(|r| caller.policy.lists(&caller, r))
                });
                tools.extend(direct::skill_tools(&self.engine, &caller));
                tools
            }
            Surface::Guided => guided::list(self, &caller),
        };
        let direct_cost = self.engine.direct_tokens();
        account::listed(
            self.gw(),
            &self.account(&context, &caller),
            &tools,
            direct_cost,
        );
        let mut result = ListToolsResult::with_all_items(tools);
        (result.ttl_ms, result.cache_scope) = self.cache_hints(&context);
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        use tracing::Instrument;
        let surface = match self.surface() {
            Surface::Guided => "guided",
            Surface::Direct => "direct",
        };
        use futures::FutureExt;
        let parent = request::traceparent(&request, &context);
        let span = crate::observe::trace::request_span(&request.name, surface, parent.as_deref());
        // A bug that panics answers the call (rmcp's transport would leave a stateless
        // request unanswered until shutdown); what panicked goes to the log, not the client.
        // Boxed: the call's future is large (tens of KiB), and each future holding it
        // inline (rmcp's dispatch, the fast lane's task) would be as large and be copied
        // whole wherever it moves, a task's spawn included.
        let call = Box::pin(self.call_tool_traced(request, context).instrument(span));
        match std::panic::AssertUnwindSafe(call).catch_unwind().await {
            Ok(answer) => answer,
            Err(panic) => {
                let what = (panic.downcast_ref::<&str>().copied())
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a panic");
                tracing::error!("a tools/call failed inside the gateway: {what}");
                Err(McpError::internal_error(PANICKED, None))
            }
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut r = resources::list(self.gw(), &self.bound_caller(&context)?, request).await?;
        (r.ttl_ms, r.cache_scope) = self.cache_hints(&context);
        r.result_type = Some(ResultType::COMPLETE);
        Ok(r)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut r =
            resources::list_templates(self.gw(), &self.bound_caller(&context)?, request).await?;
        (r.ttl_ms, r.cache_scope) = self.cache_hints(&context);
        r.result_type = Some(ResultType::COMPLETE);
        Ok(r)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.bound_caller(&context)?;
        let r = resources::read(self.gw(), &caller, &request.uri, &context).await;
        r.map(|mut r| {
            r.result_type = Some(ResultType::COMPLETE);
            r.into()
        })
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.bound_caller(&context)?;
        resources::subscribe(self.gw(), &caller, &request.uri, &self.state.subs).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        resources::unsubscribe(self.gw(), &request.uri, &self.state.subs).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut r = prompts::list(self.gw(), &self.bound_caller(&context)?, request).await?;
        (r.ttl_ms, r.cache_scope) = self.cache_hints(&context);
        r.result_type = Some(ResultType::COMPLETE);
        Ok(r)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.bound_caller(&context)?;
        prompts::get(self.gw(), &caller, request, &context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let mut r = prompts::complete(self.gw(), &self.bound_caller(&context)?, request).await?;
        r.result_type = Some(ResultType::COMPLETE);
        Ok(r)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        prompts::set_level(self.gw(), request).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let closed = self.state.closed.clone();
        let caller = self.caller_of(&context.extensions);
        relay::spawn_notices(
            self.gw(),
            context.peer.clone(),
            self.state.subs.clone(),
            closed,
            |server| self.sees_logs(&caller, server),
        );
        // Pass catalog changes on as tools/list_changed while the session lives (the
        // guided surface does not change with the catalog).
        if self.surface() != Surface::Direct {
            return;
        }
        let mut rx = self.gw().subscribe();
        let closed = self.state.closed.clone();
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    r = rx.changed() => if r.is_err() { return },
                }
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// What every session offers: tools, and what upstreams serve besides (see `resources`,
/// `prompts`, `relay`).
fn capabilities() -> ServerCapabilities {
    // Read once: rmcp asks for the server's info on every stateless request.
    static CAPABILITIES: std::sync::LazyLock<ServerCapabilities> = std::sync::LazyLock::new(|| {
        serde_json::from_value(serde_json::json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "completions": {},
            "logging": {}
        }))
        .expect("valid capabilities")
    });
    CAPABILITIES.clone()
}

/// Serves one session over stdin/stdout until the client closes it. Its identity and
/// profile come from the configuration (`policy.stdio_key`, `policy.stdio_profile`).
pub async fn serve_stdio(gw: Arc<Gateway>, mode: Mode) -> anyhow::Result<()> {
    let engine = Engine::new(gw);
    let profile =
        (engine.policy.config.stdio_profile.as_deref()).and_then(|p| engine.policy.profile(p));
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
        self.gw()
            .wait_settled(self.gw().config.gateway.startup_wait)
            .await;
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
        inputs::finish(self.gw(), &caller, &context, outcome, mrtr)
    }
}
