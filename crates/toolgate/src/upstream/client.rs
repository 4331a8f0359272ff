//! The gateway's MCP client handler for one upstream: receives its notifications.
//! This module and `connect` are the only places that speak rmcp as a client.
// Logging is deprecated by SEP-2577 but still what 2025-era servers send.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]

use super::requests::{request_key, Notice, Relay};
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, Implementation, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use toolgate_core::call::{Progress, RelayKind};

/// Progress tokens of calls in flight -> where their progress goes.
pub(crate) type ProgressRoutes = Arc<Mutex<ProgressTable>>;

/// Removes a progress route when the call ends, however it ends.
pub(super) struct RouteGuard<'a>(pub &'a ProgressRoutes, pub String);
impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.0.lock().expect("progress").remove(&self.1);
    }
}

/// rmcp picks a request's progress token as it sends it, so a fast upstream's first
/// notification can arrive before the caller has registered the token. Such early
/// notifications wait here (briefly, bounded) until the route appears.
#[derive(Default)]
pub(crate) struct ProgressTable {
    routes: HashMap<String, mpsc::UnboundedSender<Progress>>,
    /// Routes that have carried at least one notification.
    active: std::collections::HashSet<String>,
    early: HashMap<String, (std::time::Instant, Vec<Progress>)>,
}

/// Early notifications kept at most, and for how long.
const EARLY_MAX: usize = 256;
const EARLY_TTL: std::time::Duration = std::time::Duration::from_secs(10);

impl ProgressTable {
    /// Registers a route and hands it whatever arrived early for its token.
    pub(super) fn insert(&mut self, key: String, tx: mpsc::UnboundedSender<Progress>) {
        if let Some((_, early)) = self.early.remove(&key) {
            for p in early {
                let _ = tx.send(p);
            }
        }
        self.routes.insert(key, tx);
    }

    /// True once the upstream has sent progress for this route.
    pub(super) fn has_progress(&self, key: &str) -> bool {
        self.active.contains(key)
    }

    pub(super) fn remove(&mut self, key: &str) {
        self.routes.remove(key);
        self.active.remove(key);
    }

    fn deliver(&mut self, key: String, p: Progress) {
        if let Some(tx) = self.routes.get(&key) {
            self.active.insert(key.clone());
            let _ = tx.send(p);
            return;
        }
        self.early.retain(|_, (t, _)| t.elapsed() < EARLY_TTL);
        if self.early.len() < EARLY_MAX {
            self.early
                .entry(key)
                .or_insert_with(|| (std::time::Instant::now(), Vec::new()))
                .1
                .push(p);
        }
    }
}

/// Something an upstream told us that the supervisor must act on.
#[derive(Debug)]
pub(crate) enum UpstreamEvent {
    ToolsChanged,
}

#[derive(Clone)]
pub(crate) struct UpstreamClient {
    /// For log lines.
    pub name: Arc<str>,
    /// To the supervisor; one slot, so a flood of `list_changed` is one refresh pending.
    pub events: mpsc::Sender<UpstreamEvent>,
    /// Rates and coalescing of what the upstream sends unasked (`flood`).
    pub flood: Arc<super::flood::Floodgate>,
    /// Calls in flight that asked for progress.
    pub progress: ProgressRoutes,
    /// Callers in flight and notices for sessions.
    pub relay: Arc<Relay>,
}

impl UpstreamClient {
    /// Relays a server request to a caller and parses its answer.
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        kind: RelayKind,
        params: serde_json::Value,
        context: &RequestContext<RoleClient>,
    ) -> Result<T, ErrorData> {
        // Over Streamable HTTP rmcp records which of our requests' streams this came on.
        let origin = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(request_key(id)),
            _ => None,
        };
        let answer = self.relay.ask(&self.name, kind, params, origin).await;
        let value = answer.map_err(|e| ErrorData::internal_error(e, None))?;
        serde_json::from_value(value).map_err(|e| {
            ErrorData::internal_error(format!("the client's answer is malformed: {e}"), None)
        })
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        // Declared so upstreams offer the tools that need them; each request is relayed
        // to the calling session, or refused when that session cannot answer.
        // MCP Apps too: a server may offer its UI tools only to hosts that render them, and
        // the gateway passes `ui://` resources and tools' `_meta.ui` on to such hosts.
        let caps: ClientCapabilities = serde_json::from_value(serde_json::json!({
            "sampling": {}, "elicitation": {}, "roots": {"listChanged": true},
            "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
        }))
        .expect("valid capabilities");
        let mut config = ClientConfig::new(
            caps,
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        );
        // The newest revision toolgate relays in full: later ones drop server-to-client
        // requests and subscriptions. Older servers answer with their own and rmcp accepts it.
        config.protocol_version = rmcp::model::ProtocolVersion::V_2025_11_25;
        config
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.sampling(params, &context).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let v = serde_json::to_value(request)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        self.ask(RelayKind::Elicitation, v, &context).await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.ask(RelayKind::Roots, serde_json::json!({}), &context)
            .await
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay
            .notice(&self.name, Notice::ResourceUpdated(params.uri));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.flood.resources.try_send(());
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.flood.prompts.try_send(());
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // A full slot is a refresh already pending: this change is in it.
        if self.events.try_send(UpstreamEvent::ToolsChanged).is_ok() {
            tracing::info!(upstream = %self.name, "tools/list_changed");
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if !self.flood.progress.admit().0 {
            return;
        }
        let key = token_key(&params.progress_token);
        let p = Progress {
            progress: params.progress,
            total: params.total,
            message: params.message,
        };
        self.progress.lock().expect("progress map").deliver(key, p);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let (pass, dropped) = self.flood.logs.admit();
        if let Some(n) = dropped {
            tracing::warn!(upstream = %self.name, "{n} more log messages not passed on (over {} a second)", super::flood::LOGS_PER_SEC);
        }
        if !pass {
            return;
        }
        let logger = params.logger.as_deref().unwrap_or("-");
        let mut relayed = params.clone();
        relayed.data = super::flood::bounded_data(&params.data);
        let data = &relayed.data;
        relayed.logger = Some(match &params.logger {
            Some(l) => format!("{}/{l}", self.name),
            None => self.name.to_string(),
        });
        if let Ok(v) = serde_json::to_value(&relayed) {
            self.relay.log(&self.name, v).await;
        }
        match params.level {
            LoggingLevel::Debug => tracing::debug!(upstream = %self.name, logger, "{data}"),
            LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::info!(upstream = %self.name, logger, "{data}")
            }
            LoggingLevel::Warning => tracing::warn!(upstream = %self.name, logger, "{data}"),
            _ => tracing::error!(upstream = %self.name, logger, "{data}"),
        }
    }
}

impl UpstreamClient {
    async fn sampling(
        &self,
        p: CreateMessageRequestParams,
        context: &RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let v =
            serde_json::to_value(p).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        self.ask(RelayKind::Sampling, v, context).await
    }
}

pub(crate) fn token_key(token: &ProgressToken) -> String {
    serde_json::to_string(&token.0).unwrap_or_default()
}
