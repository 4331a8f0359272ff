//! `Session` as rmcp's `ServerHandler`: each MCP request a session takes, handed to the
//! module that answers it (`direct`, `meta_tools`, `resources`, `prompts`, `listen`, `relay`),
//! and the capabilities every session offers.

use super::{account, direct, listen, meta_tools, prompts, relay, request, resources};
use super::{Session, Surface, PANICKED};
use crate::config::Mode;
#[expect(
    deprecated,
    reason = "logging/setLevel: deprecated by SEP-2577, still what clients send"
)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ResultType, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::model::{CancelTaskParams, GetTaskParams, GetTaskResult, UpdateTaskParams};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use std::borrow::Cow;

// rmcp's dispatch (`handle_request`) holds the largest handler's future inline, and each
// request's task holds the dispatch, moved whole (`front::fast::tests::a_calls_task_is_small`):
// what is large is boxed where it starts (`Upstream::request`, `Gateway::call`), and here
// only the call's trace and `listen`'s loop.
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
        Box::pin(listen::run(self.gw().clone(), context)).await;
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
            self.gw().wait_settled(self.gw().startup_wait()).await;
            self.resolve_auto(&context, Some(&request));
        }
        let mut result = self.negotiate_initialize(&request)?;
        if self.state.counted.set(()).is_ok() {
            self.gw().metrics().session_opened("legacy");
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
        self.gw().wait_settled(self.gw().startup_wait()).await;
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
            Surface::Guided => meta_tools::list(self, &caller),
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

    /// The tool a call names, as this session's tools/list shows it: rmcp checks a
    /// 2026-07-28 call's `Mcp-Param-*` headers against its `x-mcp-header` markings (SEP-2243)
    /// before the call reaches `call_tool`, answering 400 with -32020 when they disagree.
    /// Asked without the request, so whoever calls: a direct tool, a guided session's
    /// pinned or expanded one; an `auto` session not yet settled checks as direct would.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let shown = match self.state.surface.get() {
            Some(Surface::Guided) => meta_tools::pinned_or_expanded(self, name),
            Some(Surface::Direct) | None => true,
        };
        shown
            .then(|| direct::exposed_tool(&self.engine, name))
            .flatten()
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
        let span =
            toolgate_core::observe::trace::request_span(&request.name, surface, parent.as_deref());
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

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        super::tasks::get(self, &self.bound_caller(&context)?, &request.task_id)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        super::tasks::cancel(self, &self.bound_caller(&context)?, &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.bound_caller(&context)?;
        super::tasks::update(self, &caller, &request.task_id, request.input_responses)
    }

    /// The 2025-11-25 form of tasks, renamed by the frame layer (`augmented`); any other
    /// custom method is unknown, as rmcp answers it.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        match request.method.strip_prefix(super::augmented::PREFIX) {
            Some(method) => super::augmented::handle(self, method, request.params, context)
                .await
                .map(rmcp::model::CustomResult),
            None => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            )),
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

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.bound_caller(&context)?;
        resources::subscribe(self.gw(), &caller, &request.uri, &self.state.subs).await
    }

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

    #[expect(
        deprecated,
        reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
    )]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        prompts::set_level(self.gw(), &self.bound_caller(&context)?, request).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let closed = self.state.closed.clone();
        let caller = self.caller_of(&context.extensions);
        relay::spawn_notices(
            self.gw(),
            context.peer.clone(),
            self.state.subs.clone(),
            closed,
            caller.principal(),
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
            "logging": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        }))
        .expect("valid capabilities")
    });
    CAPABILITIES.clone()
}
