//! The callers' own sessions with a user-delegated upstream (`[upstreams.NAME.oauth]
//! grant = "token_exchange"`). The upstream's shared connection (the supervisor's) is the
//! gateway's own client and only lists the tools and carries what belongs to the whole
//! server; a call (and a resource or prompt read) for a caller goes over a session of that
//! caller's, opened on first use with a token exchanged from the caller's access token
//! (`oauth::TokenSource::delegated`, RFC 8693), so the upstream sees each caller as
//! themselves and never another's token or the caller's original one.
//!
//! The sessions are a small pool keyed by principal: at most [`MAX_SESSIONS`], one closed
//! when it has been idle for [`IDLE`] (or, when the pool is full, the one idle longest),
//! never one with a call in flight. A session whose connection ended is opened again at
//! its next call. Each has its own progress routes and relay (rmcp numbers requests and
//! progress tokens per connection, so two sessions' numbers may be equal).

use super::client::ProgressRoutes;
use super::oauth::TokenSource;
use super::requests::Relay;
use super::Upstream;
use crate::config::upstream::UpstreamOAuth;
use rmcp::service::{RoleClient, RunningService};
use rmcp::Peer;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_core::principal::Principal;

/// The most callers holding a session with one upstream at once.
pub(crate) const MAX_SESSIONS: usize = 64;
/// A session unused this long is closed.
pub(crate) const IDLE: Duration = Duration::from_secs(300);

/// What a request to an upstream goes over: the connection, and where what it sends back
/// during the request goes.
#[derive(Clone)]
pub(crate) struct Line {
    pub peer: Peer<RoleClient>,
    pub progress: ProgressRoutes,
    pub relay: Arc<Relay>,
}

/// One upstream's callers' sessions.
pub(crate) struct Delegated {
    config: UpstreamOAuth,
    sessions: Mutex<HashMap<Principal, Arc<Session>>>,
}

/// One caller's session: its token source and, once opened, its connection.
pub(crate) struct Session {
    pub token: Arc<TokenSource>,
    open: tokio::sync::Mutex<Option<Open>>,
    progress: ProgressRoutes,
    relay: Arc<Relay>,
    /// Calls in flight over it (an idle session has none).
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
}

struct Open {
    service: RunningService<RoleClient, super::client::UpstreamClient>,
}

impl Drop for Open {
    fn drop(&mut self) {
        // The connection's tasks end, and its HTTP session with them.
        self.service.cancellation_token().cancel();
    }
}

/// A session in use by one call: counted busy until dropped.
pub(crate) struct Lease(Arc<Session>);

impl Drop for Lease {
    fn drop(&mut self) {
        *self.0.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::ops::Deref for Lease {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl Delegated {
    pub(crate) fn new(config: UpstreamOAuth) -> Self {
        Self {
            config,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// How many callers hold a session now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The session of `principal`, made if it has none; idle sessions are closed first.
    pub(crate) fn lease(
        &self,
        upstream: &str,
        principal: &Principal,
    ) -> Result<Lease, super::exchange::ExchangeError> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        sessions.retain(|_, s| !s.idle_since(now, IDLE));
        let session = match sessions.get(principal) {
            Some(s) => s.clone(),
            None => {
                if sessions.len() >= MAX_SESSIONS {
                    let longest = (sessions.iter())
                        .filter(|(_, s)| s.busy.load(Ordering::Relaxed) == 0)
                        .min_by_key(|(_, s)| s.last_used())
                        .map(|(p, _)| p.clone());
                    match longest {
                        Some(p) => drop(sessions.remove(&p)),
                        None => {
                            return Err(super::exchange::ExchangeError::Busy {
                                active: sessions.len(),
                            })
                        }
                    }
                }
                let token =
                    TokenSource::delegated(upstream, self.config.clone(), principal.clone());
                let s = Arc::new(Session {
                    token: Arc::new(token),
                    open: tokio::sync::Mutex::new(None),
                    progress: Default::default(),
                    relay: Default::default(),
                    busy: AtomicUsize::new(0),
                    last_used: Mutex::new(now),
                });
                sessions.insert(principal.clone(), s.clone());
                s
            }
        };
        session.busy.fetch_add(1, Ordering::Relaxed);
        Ok(Lease(session))
    }

    /// Closes the sessions idle for `idle` (the supervisor asks now and then).
    pub(crate) fn close_idle(&self, idle: Duration) {
        let now = Instant::now();
        (self.sessions.lock().unwrap_or_else(|e| e.into_inner()))
            .retain(|_, s| !s.idle_since(now, idle));
    }

    /// Closes every session (the upstream stops).
    pub(crate) fn close_all(&self) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl Session {
    fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn idle_since(&self, now: Instant, idle: Duration) -> bool {
        self.busy.load(Ordering::Relaxed) == 0 && now.duration_since(self.last_used()) >= idle
    }

    /// The session's line, connecting (or connecting again, when its connection ended) with
    /// the protocol the upstream's shared connection agreed.
    pub(crate) async fn line(&self, up: &Upstream) -> Result<Line, super::connect::ConnectError> {
        let mut open = self.open.lock().await;
        if let Some(o) = &*open {
            if !o.service.peer().is_transport_closed() {
                return Ok(self.line_of(o));
            }
        }
        *open = None;
        let service = super::connect::open_delegated(
            up,
            self.token.clone(),
            self.progress.clone(),
            self.relay.clone(),
        )
        .await?;
        let o = Open { service };
        let line = self.line_of(&o);
        *open = Some(o);
        Ok(line)
    }

    fn line_of(&self, o: &Open) -> Line {
        Line {
            peer: o.service.peer().clone(),
            progress: self.progress.clone(),
            relay: self.relay.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::upstream::OAuthGrant;

    fn pool() -> Delegated {
        Delegated::new(UpstreamOAuth {
            grant: OAuthGrant::TokenExchange,
            endpoint: None,
            client_id: Some("gw".into()),
            client_secret: Some("s".into()),
            scopes: vec![],
            resource: "http://up/mcp".into(),
            audience: None,
        })
    }

    #[test]
    fn one_session_per_principal_and_idle_ones_close_but_never_a_busy_one() {
        let pool = pool();
        let (alice, bob) = (
            Principal::subject("i", "alice"),
            Principal::subject("i", "bob"),
        );
        let a1 = pool.lease("up", &alice).unwrap();
        let a2 = pool.lease("up", &alice).unwrap();
        assert!(Arc::ptr_eq(&a1.0, &a2.0), "alice's calls share her session");
        let b = pool.lease("up", &bob).unwrap();
        assert!(!Arc::ptr_eq(&a1.0, &b.0), "bob has his own");
        assert!(!Arc::ptr_eq(&a1.token, &b.token), "and his own tokens");
        assert_eq!(pool.len(), 2);
        // Busy sessions stay, however long ago they were last used.
        pool.close_idle(Duration::ZERO);
        assert_eq!(pool.len(), 2);
        drop((a1, a2));
        pool.close_idle(Duration::ZERO);
        assert_eq!(
            pool.len(),
            1,
            "alice's idle session is closed, bob's busy one kept"
        );
        drop(b);
        pool.close_all();
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn a_full_pool_closes_the_longest_idle_session_or_says_it_is_busy() {
        let pool = pool();
        let mut held = Vec::new();
        for i in 0..MAX_SESSIONS {
            held.push(
                pool.lease("up", &Principal::subject("i", &i.to_string()))
                    .unwrap(),
            );
        }
        let extra = Principal::subject("i", "extra");
        let busy = pool
            .lease("up", &extra)
            .err()
            .expect("every session is busy");
        assert!(busy.to_string().contains("64 callers"), "{busy}");
        held.remove(3);
        let lease = pool.lease("up", &extra).unwrap();
        assert_eq!(pool.len(), MAX_SESSIONS);
        let map = pool.sessions.lock().unwrap();
        assert!(
            !map.contains_key(&Principal::subject("i", "3")),
            "the idle one went"
        );
        drop(map);
        drop(lease);
    }
}
