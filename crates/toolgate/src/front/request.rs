//! What each request to a `Session` gets before it is served: its caller, bound to the
//! principal that opened the session; `auto` resolved when there was no `initialize`
//! (2026-07-28); the cache hints of a list; and, for a 2026-07-28 `tools/call`, approval by
//! MRTR.

use super::{approve, direct, Session, Surface};
use crate::policy::Caller;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use std::sync::Arc;

impl Session {
    /// The caller, if it is the principal that opened this session. A request presenting
    /// another principal's session id (another API key) is refused, and audited, before
    /// it touches anything of the session's.
    pub(super) fn bound_caller(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Caller, McpError> {
        let caller = self.caller(context);
        let principal = caller.principal();
        let owner = self.state.owner.get_or_init(|| principal.clone());
        if *owner == principal {
            return Ok(caller);
        }
        caller
            .policy
            .audit_foreign(&caller, "session", &self.state.id);
        Err(McpError::invalid_request(
            "this session was opened with another API key: open a session of your own (initialize without Mcp-Session-Id)",
            None,
        ))
    }

    /// `ttlMs` and `cacheScope` for a list answered to a 2026-07-28 request: the configured
    /// TTL, private (what is listed depends on the caller's key and profile). Older clients
    /// get neither (the lists' `resultType`, which rmcp strips for them, is set by the caller).
    pub(super) fn cache_hints(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> (Option<u64>, Option<rmcp::model::CacheScope>) {
        if !modern(context) {
            return (None, None);
        }
        let ttl = self.gw().settings().list_ttl_ms;
        (Some(ttl), Some(rmcp::model::CacheScope::Private))
    }

    /// For a 2026-07-28 `tools/call` of one tool (a direct tool or execute, not a program
    /// or a skill, whose rerun would repeat its other calls): approval by MRTR.
    pub(super) fn mrtr_approver(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
    ) -> Option<Arc<approve::MrtrApprover>> {
        if !modern(context) {
            return None;
        }
        let owner = caller.principal();
        let one_call = match self.surface() {
            Surface::Direct => direct::skill_named(&self.engine, caller, &request.name).is_none(),
            Surface::Guided => {
                let prefix = self.gw().meta_prefix();
                let bare = request.name.strip_prefix(prefix).unwrap_or(&request.name);
                let args = request.arguments.clone().unwrap_or_default();
                bare == crate::guided::surface::EXECUTE
                    && crate::programs::skill::target(&self.engine, &owner, &args).is_none()
            }
        };
        let capable = (context.client_capabilities()).is_some_and(|c| c.elicitation.is_some());
        one_call.then(|| {
            Arc::new(approve::MrtrApprover::new(
                self.engine.policy.clone(),
                owner,
                capable,
                request,
            ))
        })
    }

    /// A 2026-07-28 request never initializes: `auto` is resolved on the request itself
    /// (the same rule, so every request of a caller gets the same surface).
    pub(super) fn resolve_unset_surface(&self, context: &RequestContext<RoleServer>) {
        if self.state.surface.get().is_none() {
            self.resolve_auto(context, None);
        }
    }
}

impl Session {
    /// A tools/call on this session's surface: a skill, a direct tool or a meta-tool.
    pub(super) async fn call_surface(
        &self,
        name: &str,
        args: serde_json::Map<String, serde_json::Value>,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
    ) -> rmcp::model::CallToolResult {
        match self.surface() {
            Surface::Direct => match direct::skill_named(&self.engine, caller, name) {
                Some(skill) => {
                    super::meta_tools::run_skill(self, &skill, args, context, caller).await
                }
                None => direct::call(&self.engine, name, args, context, caller).await,
            },
            Surface::Guided => super::meta_tools::call(self, name, args, context, caller).await,
        }
    }

    /// For a 2026-07-28 `tools/call`: a relay that sends the client nothing, carries the
    /// request's MRTR input to the upstream and remembers what the upstream asked for.
    pub(super) fn modern_relay(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
        park: Option<tokio::sync::mpsc::Sender<super::relay::Asked>>,
    ) -> Result<Option<Arc<super::relay::SessionRelay>>, McpError> {
        if !modern(context) {
            return Ok(None);
        }
        let mrtr = super::inputs::request_for(self.gw(), caller, request, context)?;
        Ok(Some(super::relay::SessionRelay::modern(
            context,
            caller.principal(),
            mrtr,
            park,
        )))
    }
}

/// The request is served in 2026-07-28 (or later).
pub(super) fn modern(context: &RequestContext<RoleServer>) -> bool {
    (context.protocol_version())
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The client's W3C `traceparent` for a `tools/call`: `_meta.traceparent` (2026-07-28
/// requests carry trace context there), else the HTTP request's header.
pub(super) fn traceparent(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<String> {
    use toolgate_core::observe::trace::TRACEPARENT;
    let meta = (request.meta.as_ref().and_then(|m| m.0.get(TRACEPARENT)))
        .or_else(|| context.meta.0.get(TRACEPARENT))
        .and_then(|v| v.as_str());
    let header = || {
        let parts = context.extensions.get::<http::request::Parts>()?;
        parts.headers.get(TRACEPARENT)?.to_str().ok()
    };
    meta.or_else(header).map(str::to_string)
}
