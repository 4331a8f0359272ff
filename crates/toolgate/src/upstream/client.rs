//! The gateway's MCP client handler for one upstream: receives its notifications.
//! This module and `connect` are the only places that speak rmcp as a client.
// Logging is deprecated by SEP-2577 but still what 2025-era servers send.
#![allow(deprecated)]

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::ClientHandler;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Progress of one upstream call, as toolgate passes it on.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Progress tokens of calls in flight -> where their progress goes.
pub(crate) type ProgressRoutes = Arc<Mutex<ProgressTable>>;

/// rmcp picks a request's progress token as it sends it, so a fast upstream's first
/// notification can arrive before the caller has registered the token. Such early
/// notifications wait here (briefly, bounded) until the route appears.
#[derive(Default)]
pub(crate) struct ProgressTable {
    routes: HashMap<String, mpsc::UnboundedSender<Progress>>,
    early: HashMap<String, (std::time::Instant, Vec<Progress>)>,
}

/// Early notifications kept at most, and for how long.
const EARLY_MAX: usize = 256;
const EARLY_TTL: std::time::Duration = std::time::Duration::from_secs(10);

impl ProgressTable {
    /// Registers a route and hands it whatever arrived early for its token.
    pub fn insert(&mut self, key: String, tx: mpsc::UnboundedSender<Progress>) {
        if let Some((_, early)) = self.early.remove(&key) {
            for p in early {
                let _ = tx.send(p);
            }
        }
        self.routes.insert(key, tx);
    }

    pub fn remove(&mut self, key: &str) {
        self.routes.remove(key);
    }

    fn deliver(&mut self, key: String, p: Progress) {
        if let Some(tx) = self.routes.get(&key) {
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

pub(crate) struct UpstreamClient {
    /// For log lines.
    pub name: Arc<str>,
    /// To the supervisor.
    pub events: mpsc::UnboundedSender<UpstreamEvent>,
    /// Calls in flight that asked for progress.
    pub progress: ProgressRoutes,
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(upstream = %self.name, "tools/list_changed");
        let _ = self.events.send(UpstreamEvent::ToolsChanged);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
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
        let logger = params.logger.as_deref().unwrap_or("-");
        let data = &params.data;
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

pub(crate) fn token_key(token: &ProgressToken) -> String {
    serde_json::to_string(&token.0).unwrap_or_default()
}
