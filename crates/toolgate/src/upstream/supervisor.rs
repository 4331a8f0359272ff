//! The supervisor loop of one upstream: connect, serve, notice the end, back off, repeat.

use super::connect::connect;
use super::listing::{list_tools, ListError};
use super::{client::UpstreamEvent, Upstream, UpstreamStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A connection that stayed up at least this long, and twice the wait before it, resets
/// the backoff (`resets_backoff`).
const STABLE_MIN: Duration = Duration::from_secs(5);
/// The shortest time between two tool-list refreshes that `list_changed` asks for: a flood
/// of them is one refresh per gap (the last change is never lost: one stays pending).
const REFRESH_GAP: Duration = Duration::from_millis(200);
/// A tool list with a `ttlMs` is fetched again when it runs out, but not more often than
/// this (a 2026-07-28 server that sets no TTL gets 0, and cannot push list changes to a
/// client that does not listen).
const MIN_REFRESH: Duration = Duration::from_secs(10);
/// How long a child gets between SIGTERM and SIGKILL at shutdown.
const GRACE: Duration = Duration::from_secs(2);
/// How long a closed connection waits for its child's exit, to report why it died.
const EXIT_WAIT: Duration = Duration::from_secs(1);
/// How often the callers' idle sessions of a user-delegated upstream are looked for.
const SWEEP: Duration = Duration::from_secs(30);

/// Runs until `shutdown` is cancelled; then stops the connection and its child process.
pub(crate) async fn supervise(up: Arc<Upstream>, shutdown: CancellationToken) {
    if !up.config.enabled {
        return;
    }
    let mut attempt = 0u32;
    loop {
        // One slot: `list_changed` notifications coalesce into one pending refresh.
        let (tx, mut events) = mpsc::channel(1);
        let started = Instant::now();
        let limit = up.config.connect_timeout;
        let result = tokio::select! {
            _ = shutdown.cancelled() => return stopped(&up),
            r = tokio::time::timeout(limit, connect(&up, tx)) => r,
        };
        let error = match result {
            Err(_) => format!(
                "no answer to initialize and tools/list within {:.1} s (connect_timeout_secs)",
                limit.as_secs_f64()
            ),
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(conn)) => {
                let latency = started.elapsed();
                tracing::info!(upstream = up.name(), tools = conn.tools.len(), ms = latency.as_millis() as u64, server = %conn.server_info, protocol = %conn.protocol, "connected");
                let peer = conn.service.peer().clone();
                up.update(|s| {
                    s.status = Some(UpstreamStatus::Ready { latency });
                    s.tools = conn.tools;
                    s.peer = Some(peer.clone());
                    s.server_info = Some(conn.server_info);
                    s.protocol = Some(conn.protocol);
                });
                tokio::spawn({
                    let up = up.clone();
                    async move { up.resubscribe().await }
                });
                let up_since = Instant::now();
                let ct = conn.service.cancellation_token();
                let mut child = conn.child;
                let mut running = tokio::spawn(conn.service.waiting());
                let refresh_after = |ttl: Option<Duration>| ttl.map(|t| t.max(MIN_REFRESH));
                let mut ttl = refresh_after(conn.list_ttl);
                let mut quiet_until = tokio::time::Instant::now();
                // A user-delegated upstream's callers' sessions idle too long are closed.
                let mut sweep = tokio::time::interval(SWEEP);
                let delegated = up.delegated.is_some();
                let why = loop {
                    let quiet = tokio::time::Instant::now() < quiet_until;
                    let expired = async {
                        match ttl {
                            Some(t) => tokio::time::sleep(t).await,
                            None => std::future::pending().await,
                        }
                    };
                    let child_exit = async {
                        match child.as_mut() {
                            Some(c) => c.exit_reason().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = shutdown.cancelled() => {
                            ct.cancel();
                            let _ = tokio::time::timeout(GRACE, &mut running).await;
                            if let Some(c) = child.as_mut() {
                                c.terminate(GRACE).await;
                            }
                            return stopped(&up);
                        }
                        Some(UpstreamEvent::ToolsChanged) = events.recv(), if !quiet => {
                            match refresh(&up, &peer, &shutdown).await {
                                Ok((tools, t)) => {
                                    // Only a real change rebuilds the catalog.
                                    if up.state.read().expect("state").tools != tools {
                                        up.update(|s| s.tools = tools);
                                    }
                                    ttl = refresh_after(t);
                                }
                                Err(e) => tracing::warn!(upstream = up.name(), "refresh after list_changed failed: {e}"),
                            }
                            quiet_until = tokio::time::Instant::now() + REFRESH_GAP;
                        }
                        _ = tokio::time::sleep_until(quiet_until), if quiet => {}
                        _ = sweep.tick(), if delegated => {
                            up.close_idle_sessions(super::delegated::IDLE);
                        }
                        _ = expired => {
                            match refresh(&up, &peer, &shutdown).await {
                                Ok((tools, t)) => {
                                    // Only a real change rebuilds the catalog.
                                    if up.state.read().expect("state").tools != tools {
                                        up.update(|s| s.tools = tools);
                                    }
                                    ttl = refresh_after(t);
                                }
                                Err(e) => tracing::warn!(upstream = up.name(), "refresh after ttlMs failed: {e}"),
                            }
                        }
                        _ = &mut running => {
                            // A child that dies closes its stdout too, and either branch may
                            // be seen first: give its exit a moment, to say why it died.
                            let exited = match child.as_mut() {
                                Some(c) => tokio::time::timeout(EXIT_WAIT, c.exit_reason()).await.ok(),
                                None => None,
                            };
                            break exited.unwrap_or_else(|| "the connection closed".to_string());
                        }
                        why = child_exit => break why,
                    }
                };
                ct.cancel();
                if let Some(c) = child.as_mut() {
                    c.terminate(Duration::from_millis(500)).await;
                }
                if resets_backoff(attempt, up_since.elapsed()) {
                    attempt = 0;
                }
                why
            }
        };
        attempt += 1;
        tracing::warn!(upstream = up.name(), attempt, "down: {error}");
        up.update(|s| {
            s.status = Some(UpstreamStatus::Retrying {
                error: error.clone(),
                attempt,
            });
            s.tools.clear();
            s.peer = None;
        });
        up.close_sessions();
        tokio::select! {
            _ = shutdown.cancelled() => return stopped(&up),
            _ = tokio::time::sleep(backoff(attempt)) => {}
        }
    }
}

/// A tool-list refresh bounded by the upstream's call timeout and given up at shutdown:
/// an upstream that stops answering must not hold its supervisor (and so the gateway's
/// shutdown) forever.
async fn refresh(
    up: &Arc<Upstream>,
    peer: &rmcp::Peer<rmcp::RoleClient>,
    shutdown: &CancellationToken,
) -> Result<
    (
        Vec<serde_json::Map<String, serde_json::Value>>,
        Option<Duration>,
    ),
    ListError,
> {
    let limit = up.config.call_timeout;
    tokio::select! {
        _ = shutdown.cancelled() => Err(ListError::ShuttingDown),
        r = tokio::time::timeout(limit, list_tools(up.name(), peer, &up.raw_tools)) => match r {
            Ok(r) => r,
            Err(_) => Err(ListError::TimedOut { secs: limit.as_secs_f64() }),
        },
    }
}

/// Backoff before reconnect attempt `attempt` (1-based): 0.5 s doubling to 30 s.
fn backoff(attempt: u32) -> Duration {
    let ms = 500u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(6));
    Duration::from_millis(ms.min(30_000))
}

/// Whether a connection that stayed up `uptime` after `attempt` failures in a row was
/// healthy enough to start the backoff again from its shortest wait: up at least
/// `STABLE_MIN` and at least twice the wait that preceded it. A server that crashes after
/// serving for a while is retried at once; one that crashes as it starts backs off.
fn resets_backoff(attempt: u32, uptime: Duration) -> bool {
    let waited = if attempt == 0 {
        Duration::ZERO
    } else {
        backoff(attempt)
    };
    uptime >= STABLE_MIN.max(waited * 2)
}

fn stopped(up: &Upstream) {
    up.close_sessions();
    up.update(|s| {
        s.status = Some(UpstreamStatus::Stopped);
        s.peer = None;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_restarts_after_a_connection_that_outlived_its_wait() {
        // Served for 10 s after the first failure: the next retry waits the shortest time.
        assert!(resets_backoff(1, Duration::from_secs(10)));
        // Crashed 1 s after starting: keep backing off.
        assert!(!resets_backoff(1, Duration::from_secs(1)));
        // After a 30 s wait, up for 40 s is not yet twice that; 60 s is.
        assert!(!resets_backoff(8, Duration::from_secs(40)));
        assert!(resets_backoff(8, Duration::from_secs(60)));
    }
}
