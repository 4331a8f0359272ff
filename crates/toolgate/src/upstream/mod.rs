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
pub mod environment;
mod lines;
pub(crate) use lines::top_level_id;
mod requests;
mod supervisor;

pub use client::Progress;
pub use requests::{ClientRelay, Notice, RelayKind, RequestOptions};
pub(crate) use supervisor::supervise;

use crate::config::UpstreamConfig;
use client::{token_key, ProgressRoutes};
use rmcp::model::{CallToolRequestParams, ClientRequest};
use rmcp::service::{PeerRequestOptions, RoleClient, ServiceError};
use rmcp::Peer;
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Tool objects by name, as an upstream wrote them.
pub(crate) type RawTools = Arc<Mutex<std::collections::HashMap<String, Map<String, Value>>>>;

/// Where an upstream's connection stands.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamStatus {
    /// Not tried yet, or connecting for the first time.
    Starting,
    /// Connected; `latency` is how long connect + initialize + tools/list took.
    Ready { latency: Duration },
    /// The last attempt failed or the connection dropped; retrying after a backoff.
    Retrying { error: String, attempt: u32 },
    /// `enabled = false` in configuration.
    Disabled,
    /// The gateway is shutting down.
    Stopped,
}

impl UpstreamStatus {
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
    pub fn settled(&self) -> bool {
        !matches!(self, Self::Starting)
    }
}

/// The result of a `tools/call`, kept as JSON so nothing the upstream sent is lost
/// (serde: a finished operation is kept in the durable store as it was received).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct CallOutcome {
    /// The content blocks, exactly as sent.
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    pub is_error: bool,
    pub meta: Option<Value>,
}

/// Why a call did not produce an outcome. Each message names the upstream.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("upstream {0:?} is not connected ({1}); try again shortly or run `toolgate check`")]
    Unavailable(String, String),
    #[error("upstream {server:?} did not answer {tool:?} within {secs:.1} s (call_timeout_secs)")]
    Timeout {
        server: String,
        tool: String,
        secs: f64,
    },
    /// The second field says what else ends a connection this way (or is empty).
    #[error("upstream {0:?} closed the connection during the call (it may have crashed{1})")]
    Closed(String, String),
    #[error("upstream {server:?} rejected the call: {message}")]
    Rejected {
        server: String,
        code: i32,
        message: String,
    },
    #[error("the call was cancelled")]
    Cancelled,
    #[error("upstream {0:?}: {1}")]
    Other(String, String),
}

/// Options for one call.
#[derive(Debug, Default)]
pub struct CallOptions {
    /// Overrides the upstream's `call_timeout`.
    pub timeout: Option<Duration>,
    /// Where progress notifications go, if anywhere.
    pub progress: Option<mpsc::UnboundedSender<Progress>>,
    /// Cancelling it cancels the upstream request (`notifications/cancelled`).
    pub cancel: Option<CancellationToken>,
    /// Where the upstream's sampling, elicitation and roots requests go during the call.
    pub relay: Option<Arc<dyn ClientRelay>>,
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
    pub fn new(config: UpstreamConfig) -> Arc<Self> {
        let status = if config.enabled {
            UpstreamStatus::Starting
        } else {
            UpstreamStatus::Disabled
        };
        Arc::new(Self {
            config,
            state: RwLock::new(State {
                status: Some(status),
                ..Default::default()
            }),
            progress: Arc::new(Mutex::new(Default::default())),
            raw_tools: Default::default(),
            changed: tokio::sync::watch::channel(0).0,
            relay: Default::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
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
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.write().expect("state"));
        self.changed.send_modify(|v| *v += 1);
    }

    /// Calls `tool` with `arguments` on this upstream.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        opts: CallOptions,
    ) -> Result<CallOutcome, CallError> {
        let name = self.name().to_string();
        let peer = {
            let st = self.state.read().expect("state");
            match (&st.peer, &st.status) {
                (Some(p), _) => p.clone(),
                (None, Some(s)) => return Err(CallError::Unavailable(name, s.label().into())),
                (None, None) => return Err(CallError::Unavailable(name, "starting".into())),
            }
        };
        let timeout = opts.timeout.unwrap_or(self.config.call_timeout);
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(timeout);
        let caller = self.relay.register(opts.relay);
        let started = Instant::now();
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| map_err(e, &self.config, tool, timeout))?;
        // rmcp assigns every request its own progress token; route that one to the caller
        // (notifications that beat this registration are held for it, see ProgressTable).
        let route = opts.progress.map(|tx| {
            let key = token_key(&handle.progress_token);
            self.progress
                .lock()
                .expect("progress")
                .insert(key.clone(), tx);
            RouteGuard(&self.progress, key)
        });
        let cancel = opts.cancel.unwrap_or_default();
        let request_id = handle.id.clone();
        if let Some(c) = &caller {
            c.bind(&request_id);
        }
        let response = tokio::select! {
            r = handle.await_response() => r,
            _ = cancel.cancelled() => {
                // Dropping the handle abandons the request; tell the upstream too.
                let why = Some("cancelled by the client".to_string());
                let _ = peer.notify_cancelled(rmcp::model::CancelledNotificationParam::new(Some(request_id), why)).await;
                return Err(CallError::Cancelled);
            }
        };
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
        let result = response.map_err(|e| map_err(e, &self.config, tool, timeout))?;
        tracing::debug!(upstream = %name, tool, ms = started.elapsed().as_millis() as u64, "call done");
        outcome_from(result, &name)
    }
}

/// Removes a progress route when the call ends, however it ends.
struct RouteGuard<'a>(&'a ProgressRoutes, String);
impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.0.lock().expect("progress").remove(&self.1);
    }
}

fn map_err(e: ServiceError, config: &UpstreamConfig, tool: &str, timeout: Duration) -> CallError {
    let server = config.name.as_str();
    match e {
        ServiceError::Timeout { .. } => CallError::Timeout {
            server: server.into(),
            tool: tool.into(),
            secs: timeout.as_secs_f64(),
        },
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            // rmcp ends an HTTP stream that carries a message over its limit, and says
            // so only in its own log; a stdio answer over it is reported exactly (child.rs).
            let hint = match config.transport {
                crate::config::Transport::Http { .. } => format!(
                    ", or its answer was larger than upstreams.{server}.max_message_bytes = {}",
                    config.max_message_bytes
                ),
                _ => String::new(),
            };
            CallError::Closed(server.into(), hint)
        }
        ServiceError::McpError(e) => CallError::Rejected {
            server: server.into(),
            code: e.code.0,
            message: e.message.to_string(),
        },
        ServiceError::Cancelled { .. } => CallError::Cancelled,
        other => CallError::Other(server.into(), other.to_string()),
    }
}

fn outcome_from(result: rmcp::model::ServerResult, server: &str) -> Result<CallOutcome, CallError> {
    use rmcp::model::ServerResult;
    let r = match result {
        ServerResult::CallToolResult(r) => r,
        other => {
            return Err(CallError::Other(
                server.into(),
                format!(
                    "answered tools/call with an unexpected result: {}",
                    kind_of(&other)
                ),
            ))
        }
    };
    let content = r
        .content
        .iter()
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .collect();
    Ok(CallOutcome {
        content,
        structured_content: r.structured_content,
        is_error: r.is_error.unwrap_or(false),
        meta: r.meta.and_then(|m| serde_json::to_value(m).ok()),
    })
}

fn kind_of(r: &rmcp::model::ServerResult) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
        })
        .unwrap_or_default()
}

/// Backoff before reconnect attempt `attempt` (1-based): 0.5 s doubling to 30 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let ms = 500u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(6));
    Duration::from_millis(ms.min(30_000))
}
