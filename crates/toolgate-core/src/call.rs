//! Call types: what a tool call is given and gives back (`CallOutcome`, `CallError`,
//! `CallOptions`, `Progress`) and the client side of a call in flight (`ClientRelay`).
//! A leaf: the upstream layer makes them, the policy, the store and the surfaces read
//! them, and none of those has to depend on `upstream` (which speaks rmcp) for that.
//! `upstream` re-exports them where they always were.

use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The result of a `tools/call`, kept as JSON so nothing the upstream sent is lost.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct CallOutcome {
    /// The content blocks, exactly as sent.
    pub content: Vec<Value>,
    /// The structured content, if the upstream sent one.
    pub structured_content: Option<Value>,
    /// The upstream flagged the result as an error (`isError`).
    pub is_error: bool,
    /// The result's `_meta`, as sent.
    pub meta: Option<Value>,
}

/// Why a call did not produce an outcome. Each message names the upstream.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The upstream is not connected now.
    #[error(
        "upstream {server:?} is not connected ({state}); try again shortly or run `toolgate check`"
    )]
    Unavailable {
        /// The upstream's name.
        server: String,
        /// Where its connection stands (`starting`, `failed: ...`, `not configured`).
        state: String,
    },
    /// The upstream did not answer within the call's timeout.
    #[error("upstream {server:?} did not answer {tool:?} within {secs:.1} s (call_timeout_secs)")]
    Timeout {
        /// The upstream's name.
        server: String,
        /// The tool called, by its upstream name.
        tool: String,
        /// The timeout that ran out, in seconds.
        secs: f64,
    },
    /// The connection to the upstream ended during the call.
    #[error(
        "upstream {server:?} closed the connection during the call (it may have crashed{also})"
    )]
    Closed {
        /// The upstream's name.
        server: String,
        /// What else ends a connection this way, starting with `, ` (or empty).
        also: String,
    },
    /// The upstream answered the call with a JSON-RPC error.
    #[error("upstream {server:?} rejected the call: {message}")]
    Rejected {
        /// The upstream's name.
        server: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The upstream's error message.
        message: String,
    },
    /// The caller cancelled the call.
    #[error("the call was cancelled")]
    Cancelled,
    /// The gateway is stopping (SIGTERM): the call was not run, or was cut at the end of
    /// `gateway.limits.shutdown_grace_secs`.
    #[error("{0}")]
    ShuttingDown(String),
    /// Any other failure of the call at the upstream; `message` says what.
    #[error("upstream {server:?}: {message}")]
    Other {
        /// The upstream's name.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// The upstream answered `input_required` and the call's client took it to its user
    /// (2026-07-28, see `upstream::mrtr`): nothing to show for this round; the client retries.
    #[error("upstream {server:?} needs input from the user; the client was asked for it")]
    InputRequired {
        /// The upstream's name.
        server: String,
    },
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
    /// Whom the call acts for, for an upstream that acts for each caller (token exchange,
    /// RFC 8693): set by the gate from the caller's grant; others ignore it.
    pub on_behalf: Option<OnBehalf>,
    /// Told when the upstream answers the call with a task of its own, so that a later
    /// process can follow that task if this one stops first (see `exec::Resume`).
    pub on_task: Option<OnTask>,
    /// Follow this task of the upstream's, made for the same call by an earlier process,
    /// to its end, instead of calling the tool again.
    pub resume: Option<UpstreamTask>,
}

/// A task an upstream made of a call: what a later process needs to follow it to its end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UpstreamTask {
    /// Which form of tasks the upstream used.
    pub era: TaskEra,
    /// The upstream's id of the task.
    pub id: String,
}

/// The two forms of an upstream's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TaskEra {
    /// The 2026-07-28 extension (`io.modelcontextprotocol/tasks`): followed by `tasks/get`.
    #[serde(rename = "2026-07-28")]
    Extension,
    /// 2025-11-25's task-augmented `tools/call`: its result read by `tasks/result`.
    #[serde(rename = "2025-11-25")]
    Augmented,
}

/// Told of the task an upstream made of a call ([`CallOptions::on_task`]).
#[derive(Clone)]
pub struct OnTask(pub Arc<dyn Fn(&UpstreamTask) + Send + Sync>);

impl OnTask {
    /// Tells it of `task`.
    pub fn made(&self, task: &UpstreamTask) {
        (self.0)(task)
    }
}

impl std::fmt::Debug for OnTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnTask")
    }
}

/// The caller a call acts for, as a user-delegated upstream needs it: the principal and the
/// access token the front validated, which such an upstream exchanges for one of its own
/// (the token itself is never sent to an upstream). The upstream notes in `exchange` how
/// it got its token for the call, for the audit record.
#[derive(Debug, Clone)]
pub struct OnBehalf {
    /// The principal the call acts for.
    pub principal: crate::principal::Principal,
    /// `None`: the caller presented no access token (an API key, stdio, the local identity).
    pub token: Option<AccessToken>,
    /// Set by the upstream: how it got its token for the call.
    pub exchange: Arc<std::sync::OnceLock<Exchange>>,
}

impl OnBehalf {
    /// The caller `principal`, with the access token it presented, if any.
    pub fn new(principal: crate::principal::Principal, token: Option<AccessToken>) -> Self {
        Self {
            principal,
            token,
            exchange: Arc::default(),
        }
    }
}

/// How a user-delegated upstream got its token for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// The caller's token was exchanged for this call.
    New,
    /// A token exchanged earlier for the same principal, still valid, was used.
    Cached,
}

impl Exchange {
    /// The audit record's word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "exchanged",
            Self::Cached => "exchanged_cached",
        }
    }
}

/// A caller's access token as the front validated it. Never printed: its `Debug` says only
/// that there is one.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(Arc<str>);

impl AccessToken {
    /// The token as the caller presented it.
    pub fn new(token: &str) -> Self {
        Self(token.into())
    }

    /// The token itself, for the one request that may carry it (the exchange).
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

/// Progress of one upstream call, as toolgate passes it on.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Progress so far, in the upstream's units.
    pub progress: f64,
    /// The total the progress counts towards, if known.
    pub total: Option<f64>,
    /// The upstream's words on the progress.
    pub message: Option<String>,
}

/// What a server may ask of a client, by the capability the client must declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayKind {
    /// `sampling/createMessage`: the client's model.
    Sampling,
    /// `elicitation/create`: a question to the user.
    Elicitation,
    /// `roots/list`: the client's roots.
    Roots,
}

impl RelayKind {
    /// The JSON-RPC method of the request.
    pub fn method(self) -> &'static str {
        match self {
            Self::Sampling => "sampling/createMessage",
            Self::Elicitation => "elicitation/create",
            Self::Roots => "roots/list",
        }
    }
}

/// The client side of a call in flight, as the front provides it: where the upstream's
/// requests and call-scoped notifications go. JSON in, JSON out, so no rmcp server type
/// leaks into the upstream layer.
pub trait ClientRelay: Send + Sync {
    /// True when the client declared the capability `kind` needs.
    fn supports(&self, kind: RelayKind) -> bool;
    /// Sends `method` with `params` to the client and returns its result. `Err` is the
    /// client's error text, relayed to the upstream as it came: a string is the value.
    fn request(
        &self,
        method: &'static str,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, String>>;
    /// Sends a notification (`notifications/message` during a call) to the client.
    fn notify(&self, method: &'static str, params: Value) -> BoxFuture<'static, ()>;
    /// Told when the upstream of this client's own call asked for `kind` and this client
    /// could not be asked (so the front can answer with the capability it lacks).
    fn refused(&self, _kind: RelayKind) {}
    /// Told when the gateway's own timeout (`call_timeout_secs`) ended this client's call:
    /// it failed for that, whatever the upstream asked meanwhile.
    fn timed_out(&self) {}
    /// Whom this client's call acts for. An upstream's request or log that names no call
    /// goes to a client only while every call in flight on that upstream acts for the same
    /// principal (`upstream/requests.rs`): one key's calls never see another's.
    fn owner(&self) -> Option<crate::principal::Principal> {
        None
    }
    /// True when every request of one round may be put to this client at once (a task's
    /// client sees them together in `inputRequests`); an interactive client is asked one
    /// at a time.
    fn asks_at_once(&self) -> bool {
        false
    }
    /// For a client that answers `input_required` itself (2026-07-28): what its request
    /// carries for this upstream call (see `upstream::mrtr`).
    fn mrtr(&self) -> Option<MrtrRequest> {
        None
    }
    /// The upstream answered `input_required` (`result`, as JSON). True when this client
    /// takes it to its user itself; false to have the gateway ask it by `request`.
    fn input_required(&self, _server: &str, _tool: &str, _result: Value) -> bool {
        false
    }
    /// The upstream refused the call for a capability this client did not declare
    /// (-32021), with the error's `data` (`requiredCapabilities`), so the front can answer
    /// with the same error: told before the call fails.
    fn missing(&self, _data: Option<Value>) {}
    /// The upstream answered the call with a task of its own (the tasks extension): the
    /// call follows it to its end, which may take long, so the front may answer its client
    /// with a task now.
    fn task_made(&self) {}
}

/// What a 2026-07-28 client's request carries for its upstream call.
#[derive(Debug, Clone, Default)]
pub struct MrtrRequest {
    /// The client's `inputResponses`, passed to the upstream as they are.
    pub input_responses: Option<BTreeMap<String, Value>>,
    /// The upstream's own `requestState` and the (upstream, tool) it was issued for, when
    /// the client's `requestState` was one of the gateway's handles.
    pub resumes: Option<Resumed>,
    /// The capabilities the client declared (`_meta`), so the upstream asks only for what
    /// this client can give.
    pub client_capabilities: Option<Value>,
}

/// A handle taken back: the upstream call it continues.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumed {
    /// The upstream the call continues at.
    pub server: String,
    /// The tool called, by its upstream name.
    pub tool: String,
    /// The upstream's own state for the retry (`requestState`), if it gave one.
    pub state: Option<String>,
}

impl std::fmt::Debug for dyn ClientRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientRelay")
    }
}
