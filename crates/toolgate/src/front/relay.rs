//! A session as the upstream layer sees it during a call (`ClientRelay`), and the task
//! that passes upstream notices (logs, resource updates, list changes) on to the session.
// Logging, sampling and roots are deprecated by SEP-2577 but are what 2025-era peers speak.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]

use crate::gateway::Gateway;
use crate::upstream::mrtr::MrtrRequest;
use crate::upstream::Notice;
use futures::future::BoxFuture;
use rmcp::model::{ClientResult, GetExtensions, RequestId, ServerNotification, ServerRequest};
use rmcp::service::{OriginatingRequestId, Peer, RequestContext, RoleServer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use toolgate_core::call::{ClientRelay, RelayKind};
use toolgate_core::principal::Principal;

/// One client session, for an upstream's requests while that session's call is in flight.
pub(super) struct SessionRelay {
    peer: Peer<RoleServer>,
    /// Whom the session's call acts for (see [`ClientRelay::owner`]).
    owner: Principal,
    /// The session's request being served, so relayed requests travel on its stream.
    origin: RequestId,
    /// A 2026-07-28 request: nothing can be sent to its client, so it supports nothing,
    /// remembers what was asked, and takes an upstream's `input_required` to its client.
    modern: bool,
    /// What the call's upstream asked for that this client could not be asked.
    refused: Mutex<Option<RelayKind>>,
    /// The `data` of the upstream's -32021 refusing the call (what it requires).
    missing: Mutex<Option<Option<Value>>>,
    /// The gateway's own timeout ended a call of this client's.
    timed_out: AtomicBool,
    /// A 2026-07-28 request's `inputResponses` and resumed upstream state (`upstream::mrtr`).
    mrtr: Option<MrtrRequest>,
    /// The upstream's `input_required` answer, with the upstream and tool it came from.
    asked: Mutex<Option<(String, String, Value)>>,
    /// A 2026-07-28 request's `_meta` log level: its call's log messages at or above it
    /// are passed on, and none when it set none (SEP-2575).
    log_floor: Option<rmcp::model::LoggingLevel>,
    /// A 2026-07-28 one-tool call that may be parked (`front/inputs.rs`): where an older
    /// upstream's request goes, to be answered by the client's retry.
    park: Option<tokio::sync::mpsc::Sender<Asked>>,
    /// What that client declared in its `_meta`: only those requests can be parked.
    declared: rmcp::model::ClientCapabilities,
}

/// An older upstream's request during a 2026-07-28 call, waiting for the client's retry.
pub(super) struct Asked {
    pub kind: RelayKind,
    /// `{"method", "params"}`, as an input request.
    pub request: Value,
    // `Err` is the client's own error text, relayed to the upstream as it came: a string is
    // the value.
    pub reply: tokio::sync::oneshot::Sender<Result<Value, String>>,
}

/// How long a parked question waits for the client's retry.
const PARK_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

impl SessionRelay {
    /// The relay of a 2026-07-28 request, carrying what it brings for its upstream call;
    /// with `park`, a one-tool call whose older upstream's requests go there, to be
    /// answered by the client's retry (`front/inputs.rs`).
    pub(super) fn modern(
        context: &RequestContext<RoleServer>,
        owner: Principal,
        mrtr: MrtrRequest,
        park: Option<tokio::sync::mpsc::Sender<Asked>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            peer: context.peer.clone(),
            owner,
            origin: context.id.clone(),
            modern: true,
            refused: Mutex::new(None),
            missing: Mutex::new(None),
            timed_out: AtomicBool::new(false),
            mrtr: Some(mrtr),
            asked: Mutex::new(None),
            log_floor: context.meta.log_level(),
            park,
            declared: context.client_capabilities().unwrap_or_default(),
        })
    }

    /// What the call's upstream asked for and this client could not be asked, if anything.
    pub(super) fn refused_kind(&self) -> Option<RelayKind> {
        *self.refused.lock().expect("refused")
    }

    /// The `data` of the upstream's -32021, when it refused the call for a capability
    /// this client did not declare.
    pub(super) fn missing_data(&self) -> Option<Option<Value>> {
        self.missing.lock().expect("missing").clone()
    }

    /// True when the gateway's own timeout ended a call of this client's.
    pub(super) fn ended_by_timeout(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// The upstream's `input_required` answer (upstream, tool, result), if it gave one.
    pub(super) fn take_asked(&self) -> Option<(String, String, Value)> {
        self.asked.lock().expect("asked").take()
    }
}

/// Whether a client that declared `caps` may be asked for `kind`.
pub(super) fn declares(caps: &rmcp::model::ClientCapabilities, kind: RelayKind) -> bool {
    match kind {
        RelayKind::Sampling => caps.sampling.is_some(),
        RelayKind::Elicitation => caps.elicitation.is_some(),
        RelayKind::Roots => caps.roots.is_some(),
    }
}

/// The relay for the session behind `context`, while it serves that request for `owner`.
pub(super) fn relay_for(
    context: &RequestContext<RoleServer>,
    owner: Principal,
) -> Arc<dyn ClientRelay> {
    Arc::new(SessionRelay {
        peer: context.peer.clone(),
        owner,
        origin: context.id.clone(),
        modern: false,
        refused: Mutex::new(None),
        missing: Mutex::new(None),
        timed_out: AtomicBool::new(false),
        mrtr: None,
        asked: Mutex::new(None),
        log_floor: None,
        park: None,
        declared: Default::default(),
    })
}

impl ClientRelay for SessionRelay {
    fn owner(&self) -> Option<Principal> {
        Some(self.owner.clone())
    }

    fn refused(&self, kind: RelayKind) {
        self.refused.lock().expect("refused").get_or_insert(kind);
    }

    fn timed_out(&self) {
        self.timed_out.store(true, Ordering::Relaxed);
    }

    fn missing(&self, data: Option<Value>) {
        *self.missing.lock().expect("missing") = Some(data);
    }

    fn mrtr(&self) -> Option<MrtrRequest> {
        self.mrtr.clone()
    }

    fn input_required(&self, server: &str, tool: &str, result: Value) -> bool {
        if !self.modern {
            return false;
        }
        *self.asked.lock().expect("asked") = Some((server.into(), tool.into(), result));
        true
    }

    fn supports(&self, kind: RelayKind) -> bool {
        if self.modern {
            return self.park.is_some() && declares(&self.declared, kind);
        }
        (self.peer.peer_info()).is_some_and(|info| declares(&info.capabilities, kind))
    }

    fn request(
        &self,
        method: &'static str,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, String>> {
        if let Some(park) = self.park.clone() {
            return Box::pin(async move {
                let kind = crate::upstream::mrtr::kind_of(method).ok_or("not relayable")?;
                let (reply, answer) = tokio::sync::oneshot::channel();
                let request = json!({"method": method, "params": params});
                let asked = Asked {
                    kind,
                    request,
                    reply,
                };
                park.send(asked)
                    .await
                    .map_err(|_| "the client's call has ended")?;
                match tokio::time::timeout(PARK_WAIT, answer).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(_)) => Err("the client did not retry with an answer".into()),
                    Err(_) => Err(format!("no retry within {} s", PARK_WAIT.as_secs())),
                }
            });
        }
        let (peer, origin) = (self.peer.clone(), self.origin.clone());
        Box::pin(async move {
            let mut request: ServerRequest =
                serde_json::from_value(json!({"method": method, "params": params}))
                    .map_err(|e| format!("cannot relay {method}: {e}"))?;
            // Over HTTP the request goes out on the stream of the client's own call. A fresh
            // task, because rmcp would otherwise tag it with the *upstream* request id
            // (task-local in the handler this runs in), which means nothing here.
            request
                .extensions_mut()
                .insert(OriginatingRequestId(origin));
            let sent = tokio::spawn(async move { peer.send_request(request).await });
            let answer = sent.await.map_err(|e| e.to_string())?;
            match answer {
                Ok(ClientResult::EmptyResult(_)) => Ok(json!({})),
                Ok(r) => serde_json::to_value(r).map_err(|e| e.to_string()),
                Err(e) => Err(format!("the client did not answer {method}: {e}")),
            }
        })
    }

    fn notify(&self, method: &'static str, params: Value) -> BoxFuture<'static, ()> {
        let peer = self.peer.clone();
        if self.modern && method == "notifications/message" {
            let level =
                serde_json::from_value::<rmcp::model::LoggingLevel>(params["level"].clone());
            let wanted = match (self.log_floor, level) {
                (Some(floor), Ok(level)) => level as u8 >= floor as u8,
                _ => false,
            };
            if !wanted {
                return Box::pin(async {});
            }
        }
        Box::pin(async move {
            let n = serde_json::from_value::<ServerNotification>(
                json!({"method": method, "params": params}),
            );
            if let Ok(n) = n {
                let _ = peer.send_notification(n).await;
            }
        })
    }
}

/// A session's resource subscriptions: (upstream, upstream URI) -> the URI the client used.
#[derive(Default)]
pub(super) struct Subscriptions(pub Mutex<HashMap<(String, String), String>>);

impl Subscriptions {
    fn exposed(&self, upstream: &str, uri: &str) -> Option<String> {
        let subs = self.0.lock().expect("subscriptions");
        subs.get(&(upstream.to_string(), uri.to_string())).cloned()
    }
}

/// Passes every upstream's notices to this session until `closed`: logs outside calls
/// from the upstreams `sees_logs` names, and only those whose last call was `principal`'s
/// (a late log of another key's call is never shown here), `resources/updated` for what
/// this session subscribed to, and list changes.
pub(super) fn spawn_notices(
    gw: &Gateway,
    peer: Peer<RoleServer>,
    subs: Arc<Subscriptions>,
    closed: CancellationToken,
    principal: Principal,
    sees_logs: impl Fn(&str) -> bool,
) {
    for up in gw.upstreams() {
        let mut rx = up.notices();
        let logs = sees_logs(up.name());
        let (peer, subs, closed) = (peer.clone(), subs.clone(), closed.clone());
        let principal = principal.clone();
        tokio::spawn(async move {
            loop {
                let (upstream, notice) = tokio::select! {
                    _ = closed.cancelled() => return,
                    r = rx.recv() => match r {
                        Ok(n) => n,
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => return,
                    },
                };
                let sent = match notice {
                    Notice::Log(_, owner) if !logs || owner.as_ref() != Some(&principal) => Ok(()),
                    Notice::Log(v, _) => match serde_json::from_value(v) {
                        Ok(p) => peer.notify_logging_message(p).await,
                        Err(_) => Ok(()),
                    },
                    Notice::ResourceUpdated(uri) => match subs.exposed(&upstream, &uri) {
                        Some(exposed) => {
                            let p = rmcp::model::ResourceUpdatedNotificationParam::new(exposed);
                            peer.notify_resource_updated(p).await
                        }
                        None => Ok(()),
                    },
                    Notice::ResourcesChanged => peer.notify_resource_list_changed().await,
                    Notice::PromptsChanged => peer.notify_prompt_list_changed().await,
                };
                if sent.is_err() {
                    return;
                }
            }
        });
    }
}

/// The browser origins an HTTP endpoint accepts: the allowed hosts, any port, http(s).
pub(super) fn allowed_origins(hosts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for h in hosts {
        // An IPv6 address is bracketed; a `host:port` entry allows that port only.
        let authority = if h.parse::<std::net::Ipv6Addr>().is_ok() {
            format!("[{h}]:*")
        } else if h.contains(':') {
            h.clone()
        } else {
            format!("{h}:*")
        };
        for scheme in ["http", "https"] {
            out.push(format!("{scheme}://{authority}"));
        }
    }
    out
}
