//! A session as the upstream layer sees it during a call (`ClientRelay`), and the task
//! that passes upstream notices (logs, resource updates, list changes) on to the session.
// Logging, sampling and roots are deprecated by SEP-2577 but are what 2025-era peers speak.
#![allow(deprecated)]

use crate::gateway::Gateway;
use crate::upstream::{ClientRelay, Notice, RelayKind};
use futures::future::BoxFuture;
use rmcp::model::{ClientResult, GetExtensions, RequestId, ServerNotification, ServerRequest};
use rmcp::service::{OriginatingRequestId, Peer, RequestContext, RoleServer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// One client session, for an upstream's requests while that session's call is in flight.
pub(super) struct SessionRelay {
    peer: Peer<RoleServer>,
    /// The session's request being served, so relayed requests travel on its stream.
    origin: RequestId,
    /// A 2026-07-28 request: nothing can be sent to its client (MRTR for an upstream's
    /// requests is not built), so it supports nothing and remembers what was asked.
    modern: bool,
    /// What the call's upstream asked for that this client could not be asked.
    refused: Mutex<Option<RelayKind>>,
}

impl SessionRelay {
    /// The relay of a 2026-07-28 request.
    pub(super) fn modern(context: &RequestContext<RoleServer>) -> Arc<Self> {
        Arc::new(Self {
            peer: context.peer.clone(),
            origin: context.id.clone(),
            modern: true,
            refused: Mutex::new(None),
        })
    }

    /// What the call's upstream asked for and this client could not be asked, if anything.
    pub(super) fn refused_kind(&self) -> Option<RelayKind> {
        *self.refused.lock().expect("refused")
    }
}

/// The relay for the session behind `context`, while it serves that request.
pub(super) fn relay_for(context: &RequestContext<RoleServer>) -> Arc<dyn ClientRelay> {
    Arc::new(SessionRelay {
        peer: context.peer.clone(),
        origin: context.id.clone(),
        modern: false,
        refused: Mutex::new(None),
    })
}

impl ClientRelay for SessionRelay {
    fn refused(&self, kind: RelayKind) {
        self.refused.lock().expect("refused").get_or_insert(kind);
    }

    fn supports(&self, kind: RelayKind) -> bool {
        if self.modern {
            return false;
        }
        let Some(info) = self.peer.peer_info() else {
            return false;
        };
        let caps = &info.capabilities;
        match kind {
            RelayKind::Sampling => caps.sampling.is_some(),
            RelayKind::Elicitation => caps.elicitation.is_some(),
            RelayKind::Roots => caps.roots.is_some(),
        }
    }

    fn request(
        &self,
        method: &'static str,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, String>> {
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

/// Passes every upstream's notices to this session until `closed`: logs outside calls,
/// `resources/updated` for what this session subscribed to, and list changes.
pub(super) fn spawn_notices(
    gw: &Gateway,
    peer: Peer<RoleServer>,
    subs: Arc<Subscriptions>,
    closed: CancellationToken,
) {
    for up in gw.upstreams() {
        let mut rx = up.notices();
        let (peer, subs, closed) = (peer.clone(), subs.clone(), closed.clone());
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
                    Notice::Log(v) => match serde_json::from_value(v) {
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
