//! Everything but tools between toolgate and one upstream: generic JSON requests
//! (resources, prompts, completion, logging), the notifications an upstream sends that
//! sessions care about, and the relay of the upstream's own requests (sampling,
//! elicitation, roots) to the client session whose call is in flight.
//!
//! The association rule: over Streamable HTTP an upstream request that arrives on the
//! response stream of one of our calls belongs to that call (rmcp records the stream's
//! request id), which is exact. Otherwise (stdio, or the standalone stream) it goes to the
//! most recently started call on that upstream whose client declared the matching
//! capability: exact with one caller at a time, a best guess with concurrent callers from
//! several sessions of one principal. When no caller in flight can answer, or the calls in
//! flight act for more than one principal (the request might be any of theirs, and one
//! key's call must never be shown to another's client), the upstream gets a JSON-RPC error
//! at once (calls that ended in the last second count as in flight for this: rmcp may
//! handle what an upstream sent during a call just after its answer). A log message is
//! never tied to a call: it goes to the calls in flight when they all act for one
//! principal, to none of them when they act for several (the gateway's own log keeps it),
//! and outside calls only to the sessions of the principal that last called the upstream
//! (and may use the whole server): a log sent after key A's call ended never reaches key
//! B. When that last call named no principal (a call with no client behind it), or none
//! was made yet, the log reaches no client.

use super::Upstream;
use rmcp::model::{ClientRequest, RequestId, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use toolgate_core::call::CallError;
use toolgate_core::call::{ClientRelay, RelayKind};
use toolgate_core::principal::Principal;

/// What a user-delegated upstream answers over the caller's own session (what the caller
/// reads); the rest (lists, subscriptions, log levels) is the shared connection's.
const CALLERS_OWN: [&str; 3] = ["resources/read", "prompts/get", "completion/complete"];

/// A notification from an upstream that is not tied to a call in flight.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// `notifications/message` params, `logger` already naming the upstream, sent outside
    /// calls; and the principal whose call last used the upstream, the only one whose
    /// sessions may be passed it (`None`: nobody's).
    Log(Value, Option<Principal>),
    /// `notifications/resources/updated` for this upstream URI.
    ResourceUpdated(String),
    ResourcesChanged,
    PromptsChanged,
}

/// Relay state shared by an upstream and its client handler.
pub(crate) struct Relay {
    /// Calls in flight that carry a client relay, by start order.
    callers: Mutex<BTreeMap<u64, Caller>>,
    /// When a call of each principal last ended: an upstream's log or request sent during
    /// a call may be handled just after its answer. One entry per principal, not per call
    /// (at thousands of calls a second a list of calls was scanned on every call).
    ended: Mutex<HashMap<Option<Principal>, Instant>>,
    next: AtomicU64,
    /// The principal of the call that last started on this upstream (`None`: a call with
    /// no client, or none yet): a log outside calls may be theirs, and nobody else's.
    last_owner: Mutex<Option<Principal>>,
    /// Notices for every session; sessions filter what concerns them.
    pub notices: broadcast::Sender<(Arc<str>, Notice)>,
    /// Resource URIs subscribed upstream -> how many sessions want them.
    subscriptions: Mutex<HashMap<String, usize>>,
}

impl Default for Relay {
    fn default() -> Self {
        Self {
            callers: Default::default(),
            ended: Default::default(),
            next: AtomicU64::new(0),
            last_owner: Mutex::new(None),
            // Bounded: a session that lags behind loses old notices, never blocks others.
            notices: broadcast::channel(256).0,
            subscriptions: Default::default(),
        }
    }
}

/// One call in flight: its client, and the upstream request id once it is sent.
struct Caller {
    relay: Arc<dyn ClientRelay>,
    request: Option<String>,
}

/// Unregisters a caller when its call ends, however it ends.
pub(crate) struct CallerGuard(Arc<Relay>, u64);
impl Drop for CallerGuard {
    fn drop(&mut self) {
        let gone = self.0.callers.lock().expect("callers").remove(&self.1);
        if let Some(c) = gone {
            let now = Instant::now();
            let mut ended = self.0.ended.lock().expect("ended");
            ended.retain(|_, at| now.duration_since(*at) < LATE);
            ended.insert(c.relay.owner(), now);
        }
    }
}

impl CallerGuard {
    /// Ties the caller to the upstream request that carries its call.
    pub(crate) fn bind(&self, id: &RequestId) {
        if let Some(c) = self.0.callers.lock().expect("callers").get_mut(&self.1) {
            c.request = Some(request_key(id));
        }
    }
}

/// How long an ended call still counts for [`Relay::one_owner`].
const LATE: Duration = Duration::from_secs(1);

impl Relay {
    /// True when every call in flight, and every call that ended in the last [`LATE`],
    /// acts for the same principal (or there is none).
    fn one_owner(&self, callers: &BTreeMap<u64, Caller>) -> bool {
        let now = Instant::now();
        let ended = self.ended.lock().expect("ended");
        let recent = ended
            .iter()
            .filter(|(_, at)| now.duration_since(**at) < LATE);
        let mut owners =
            (callers.values().map(|c| c.relay.owner())).chain(recent.map(|(o, _)| o.clone()));
        let first = owners.next();
        owners.all(|o| Some(o) == first)
    }
}

pub(crate) fn request_key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl Relay {
    pub(crate) fn register(
        self: &Arc<Self>,
        relay: Option<Arc<dyn ClientRelay>>,
    ) -> Option<CallerGuard> {
        *self.last_owner.lock().expect("last owner") = relay.as_ref().and_then(|r| r.owner());
        let relay = relay?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let caller = Caller {
            relay,
            request: None,
        };
        self.callers.lock().expect("callers").insert(id, caller);
        Some(CallerGuard(self.clone(), id))
    }

    /// Relays an upstream's request to the call it arrived for (`origin`, the upstream
    /// request id), else to the newest caller that can answer it. `Err` is the text the
    /// upstream is answered with (the client's own, or why no client could be asked): a
    /// string is the value, as in `ClientRelay::request`.
    pub(crate) async fn ask(
        &self,
        upstream: &str,
        kind: RelayKind,
        params: Value,
        origin: Option<String>,
    ) -> Result<Value, String> {
        let caller = {
            let callers = self.callers.lock().expect("callers");
            let exact = origin.and_then(|o| {
                callers
                    .values()
                    .find(|c| c.request.as_deref() == Some(o.as_str()))
            });
            match exact {
                // The call's own client, even when it cannot answer: never another's.
                Some(c) if c.relay.supports(kind) => Some(c.relay.clone()),
                Some(c) => {
                    c.relay.refused(kind);
                    None
                }
                // Unmarked, with calls of several principals in flight: it may be any of
                // theirs, so it is nobody's.
                None if !self.one_owner(&callers) => None,
                None => {
                    let found = (callers.values().rev())
                        .map(|c| &c.relay)
                        .find(|r| r.supports(kind))
                        .cloned();
                    // Unmarked, with one call in flight: that call's client is the one
                    // that could not be asked.
                    if let (None, 1) = (&found, callers.len()) {
                        callers.values().for_each(|c| c.relay.refused(kind));
                    }
                    found
                }
            }
        };
        match caller {
            Some(c) => c.request(kind.method(), params).await,
            None => Err(format!(
                "toolgate: no client session able to answer {} for upstream {upstream:?} (none in flight declared the capability, or calls of several API keys are in flight and the request names none of them)",
                kind.method()
            )),
        }
    }

    /// A log message: to the callers in flight when there are any and they all act for one
    /// principal, to none when they act for several, else (no call in flight) to the
    /// sessions of the principal whose call last used the upstream, if they may see the
    /// server's logs (`front/relay.rs`, `spawn_notices`).
    pub(crate) async fn log(&self, upstream: &Arc<str>, params: Value) {
        let callers: Vec<_> = {
            let callers = self.callers.lock().expect("callers");
            if !self.one_owner(&callers) {
                tracing::debug!(%upstream, "a log message with calls of several principals in flight: passed to no client");
                return;
            }
            callers.values().map(|c| c.relay.clone()).collect()
        };
        if callers.is_empty() {
            let owner = self.last_owner.lock().expect("last owner").clone();
            if owner.is_none() {
                tracing::debug!(%upstream, "a log message outside calls, and the last call named no principal: passed to no client");
                return;
            }
            let _ = self
                .notices
                .send((upstream.clone(), Notice::Log(params, owner)));
        } else {
            // Bounded: a caller that does not read its stream must not hold the upstream's
            // notification tasks (each one a task of its own) forever.
            for c in callers {
                let sent = c.notify("notifications/message", params.clone());
                let _ = tokio::time::timeout(Duration::from_secs(5), sent).await;
            }
        }
    }

    pub(crate) fn notice(&self, upstream: &Arc<str>, notice: Notice) {
        let _ = self.notices.send((upstream.clone(), notice));
    }
}

/// Options for one generic request.
#[derive(Default)]
pub struct RequestOptions {
    pub timeout: Option<Duration>,
    /// Where the upstream's own requests go while this one is in flight.
    pub relay: Option<Arc<dyn ClientRelay>>,
    /// Whom the request acts for: a user-delegated upstream (token exchange) reads a
    /// resource or gets a prompt over that caller's own session; lists use the shared one.
    pub on_behalf: Option<toolgate_core::call::OnBehalf>,
}

impl Upstream {
    /// The upstream's declared capabilities (JSON), while connected.
    pub fn capabilities(&self) -> Option<Value> {
        let st = self.state.read().expect("state");
        let info = st.peer.as_ref()?.peer_info()?;
        serde_json::to_value(&info.capabilities).ok()
    }

    /// True when connected and the upstream declared capability `name` (e.g. `resources`).
    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities()
            .is_some_and(|c| c.get(name).is_some_and(|v| !v.is_null()))
    }

    /// Receives every upstream notice not tied to a call.
    pub fn notices(&self) -> broadcast::Receiver<(Arc<str>, Notice)> {
        self.relay.notices.subscribe()
    }

    /// Sends any client request (`method`, `params`) and returns the result as JSON.
    ///
    /// Boxed, as `Gateway::call` boxes a tool call: the request's future is kilobytes (rmcp's
    /// send and wait), and each future that awaits it inline is as large, rmcp's dispatch of
    /// every request kind included, which every request's task holds and moves whole
    /// (`front::fast::tests::a_calls_task_is_small`).
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        opts: RequestOptions,
    ) -> Result<Value, CallError> {
        Box::pin(self.request_inline(method, params, opts)).await
    }

    async fn request_inline(
        &self,
        method: &str,
        params: Value,
        opts: RequestOptions,
    ) -> Result<Value, CallError> {
        let name = self.name().to_string();
        // A user-delegated upstream answers what is the caller's over the caller's session.
        let (line, _lease) = match &self.delegated {
            Some(d) if CALLERS_OWN.contains(&method) => {
                let (line, lease) = self.delegated_line(d, opts.on_behalf.as_ref()).await?;
                (Some(line), Some(lease))
            }
            _ => (None, None),
        };
        let peer = match &line {
            Some(l) => l.peer.clone(),
            None => self.peer().ok_or_else(|| CallError::Unavailable {
                server: name.clone(),
                state: self.status().label().into(),
            })?,
        };
        let relay = line.as_ref().map_or(&self.relay, |l| &l.relay);
        let request: ClientRequest =
            serde_json::from_value(json!({"method": method, "params": params})).map_err(|e| {
                CallError::Other {
                    server: name.clone(),
                    message: format!("cannot build {method}: {e}"),
                }
            })?;
        let timeout = opts.timeout.unwrap_or(self.config.call_timeout);
        let caller = relay.register(opts.relay);
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await
            .map_err(|e| super::map_err(e, &self.config, method, timeout))?;
        if let Some(c) = &caller {
            c.bind(&handle.id);
        }
        let result = handle
            .await_response()
            .await
            .map_err(|e| super::map_err(e, &self.config, method, timeout))?;
        Ok(match result {
            ServerResult::EmptyResult(_) => json!({}),
            other => serde_json::to_value(other).unwrap_or(Value::Null),
        })
    }

    /// Subscribes upstream on the first session's interest; counts the others.
    pub async fn subscribe(&self, uri: &str) -> Result<(), CallError> {
        let first = {
            let mut subs = self.relay.subscriptions.lock().expect("subscriptions");
            let n = subs.entry(uri.to_string()).or_default();
            *n += 1;
            *n == 1
        };
        if first {
            if let Err(e) = self
                .request(
                    "resources/subscribe",
                    json!({"uri": uri}),
                    Default::default(),
                )
                .await
            {
                self.relay
                    .subscriptions
                    .lock()
                    .expect("subscriptions")
                    .remove(uri);
                return Err(e);
            }
        }
        Ok(())
    }

    /// After a reconnect: subscribes again to everything sessions still want, since
    /// subscriptions live and die with the upstream connection.
    pub(crate) async fn resubscribe(&self) {
        let uris: Vec<String> = {
            let subs = self.relay.subscriptions.lock().expect("subscriptions");
            subs.keys().cloned().collect()
        };
        for uri in uris {
            let params = json!({"uri": uri});
            if let Err(e) = self
                .request("resources/subscribe", params, Default::default())
                .await
            {
                tracing::warn!(upstream = self.name(), uri, "resubscribe failed: {e}");
            }
        }
    }

    /// Drops one session's interest; unsubscribes upstream when it was the last.
    pub async fn unsubscribe(&self, uri: &str) -> Result<(), CallError> {
        let last = {
            let mut subs = self.relay.subscriptions.lock().expect("subscriptions");
            match subs.get_mut(uri) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    subs.remove(uri);
                    true
                }
                None => false,
            }
        };
        if last {
            self.request(
                "resources/unsubscribe",
                json!({"uri": uri}),
                Default::default(),
            )
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::future::BoxFuture;

    /// A client of `owner` that can answer sampling, and says who it is when asked.
    struct Client(Principal, &'static str);

    impl ClientRelay for Client {
        fn supports(&self, kind: RelayKind) -> bool {
            kind == RelayKind::Sampling
        }
        fn request(&self, _: &'static str, _: Value) -> BoxFuture<'static, Result<Value, String>> {
            let who = self.1;
            Box::pin(async move { Ok(json!(who)) })
        }
        fn notify(&self, _: &'static str, _: Value) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn owner(&self) -> Option<Principal> {
            Some(self.0.clone())
        }
    }

    fn client(key: &str, who: &'static str) -> Option<Arc<dyn ClientRelay>> {
        Some(Arc::new(Client(Principal::key(key), who)))
    }

    #[tokio::test]
    async fn an_unmarked_request_goes_to_one_keys_newest_call_and_to_nobody_across_keys() {
        let relay = Arc::new(Relay::default());
        let ask = || relay.ask("up", RelayKind::Sampling, json!({}), None);
        let _a1 = relay.register(client("a", "a's first"));
        let a2 = relay.register(client("a", "a's second"));
        assert_eq!(ask().await, Ok(json!("a's second")));
        let b = relay.register(client("b", "b's"));
        let refused = ask().await.unwrap_err();
        assert!(refused.contains("several API keys"), "{refused}");
        // Marked with b's upstream request id, it is b's, whoever else is in flight.
        b.as_ref().unwrap().bind(&RequestId::Number(7));
        let marked = relay.ask(
            "up",
            RelayKind::Sampling,
            json!({}),
            Some(request_key(&RequestId::Number(7))),
        );
        assert_eq!(marked.await, Ok(json!("b's")));
        // b's call just ended: a request handled late may still be b's, so still nobody's.
        drop((a2, b));
        assert!(ask().await.is_err());
    }

    #[tokio::test]
    async fn a_log_outside_calls_is_for_the_last_callers_principal_or_nobody() {
        let relay = Arc::new(Relay::default());
        let mut rx = relay.notices.subscribe();
        let up: Arc<str> = "up".into();
        // No call yet: nobody's.
        relay.log(&up, json!({"n": 0})).await;
        assert!(rx.try_recv().is_err());
        // (One principal only: calls of two that ended in the last second make it nobody's.)
        drop(relay.register(client("b", "b's")));
        relay.log(&up, json!({"n": 1})).await;
        let (_, notice) = rx.try_recv().unwrap();
        assert_eq!(
            notice,
            Notice::Log(json!({"n": 1}), Some(Principal::key("b")))
        );
        // A call with no client behind it last: nobody's.
        assert!(relay.register(None).is_none());
        relay.log(&up, json!({"n": 2})).await;
        assert!(rx.try_recv().is_err());
    }
}
