//! The HTTP front's connections: accepted up to `gateway.limits.max_connections` (the next
//! one is answered 503 and closed) and `max_connections_per_client` from one address (429),
//! each closed when its headers come too slowly or it idles too long, sooner while none of
//! its requests was authenticated (`front::conn`), and a shutdown that ends in bounded time: calls in
//! flight drain (`Gateway::drain`), their answers are written, sessions end, and whatever
//! is still open after that is closed.

use super::conn::{Activity, Answer, Deadline, Posts, Timeouts, Watched};
use crate::gateway::Gateway;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// After the drain, how long answers still being written (POSTs) may take.
const ANSWER_GRACE: Duration = Duration::from_secs(3);
/// After that, how long connections may take to close on their own before they are cut.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// Connections over the cap being told so at once; past this many, they are just closed.
const REFUSING_AT_ONCE: usize = 64;

/// Serves HTTP on `listener` until `shutdown` is cancelled, then shuts down in bounded time.
pub async fn serve_http(
    listener: TcpListener,
    gw: Arc<Gateway>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let limits = gw.settings().limits.clone();
    // Sessions end after the drain, not at the signal: their calls' answers go out first.
    let sessions_stop = CancellationToken::new();
    let (app, fast) = super::http::router(gw.clone(), sessions_stop.clone());
    let fast = Arc::new(fast);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let clients = Arc::new(Clients::default());
    let refusing = Arc::new(Semaphore::new(REFUSING_AT_ONCE));
    let posts = Arc::new(Posts::default());
    let conns = TaskTracker::new();
    let (closing, kill) = (CancellationToken::new(), CancellationToken::new());
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        let (stream, from) = match accepted {
            Ok((stream, from)) => (stream, from.ip().to_canonical()),
            Err(e) => {
                // Out of file descriptors, most often: let some close before accepting more.
                tracing::warn!("accepting an HTTP connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        set_nodelay(&stream);
        // The whole cap first (503), then this client's share of it (429).
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Ok(turn) = refusing.clone().try_acquire_owned() {
                tracing::debug!(
                    "HTTP connection refused: {} open (gateway.limits.max_connections)",
                    limits.max_connections
                );
                let max = limits.max_connections;
                conns.spawn(async move {
                    refuse(stream, Refusal::Total(max)).await;
                    drop(turn);
                });
            }
            continue;
        };
        let Some(client) = clients.enter(from, limits.max_connections_per_client) else {
            drop(slot);
            if let Ok(turn) = refusing.clone().try_acquire_owned() {
                tracing::debug!(
                    "HTTP connection from {from} refused: {} open from it (gateway.limits.max_connections_per_client)",
                    limits.max_connections_per_client
                );
                let max = limits.max_connections_per_client;
                conns.spawn(async move {
                    refuse(stream, Refusal::PerClient(max)).await;
                    drop(turn);
                });
            }
            continue;
        };
        let conn = Connection {
            app: app.clone(),
            fast: fast.clone(),
            limits: limits.clone(),
            posts: posts.clone(),
            closing: closing.clone(),
            kill: kill.clone(),
        };
        conns.spawn(async move {
            conn.serve(stream).await;
            drop((slot, client));
        });
    }
    drop(listener);
    tracing::info!("shutting down: no new connections");
    gw.drain(limits.shutdown_grace).await;
    if tokio::time::timeout(ANSWER_GRACE, posts.until_none())
        .await
        .is_err()
    {
        tracing::warn!(
            "shutting down: {} answers still unwritten after {} s; closing their connections",
            posts.count(),
            ANSWER_GRACE.as_secs()
        );
    }
    sessions_stop.cancel();
    closing.cancel();
    conns.close();
    if tokio::time::timeout(CLOSE_GRACE, conns.wait())
        .await
        .is_err()
    {
        tracing::info!(
            "shutting down: closing {} connections still open",
            conns.len()
        );
        kill.cancel();
        conns.wait().await;
    }
    tracing::info!("shutting down: HTTP closed");
    Ok(())
}

/// What every connection shares.
struct Connection {
    app: axum::Router,
    /// Plain 2026-07-28 `tools/call`s, answered before the router (`front::fast`).
    fast: Arc<super::fast::FastLane>,
    limits: crate::config::limits::Limits,
    posts: Arc<Posts>,
    /// Cancelled at shutdown: finish the request in hand, take no other.
    closing: CancellationToken,
    /// Cancelled when shutdown's bound is over: close now.
    kill: CancellationToken,
}

impl Connection {
    async fn serve(self, stream: TcpStream) {
        let activity = Activity::new();
        // The peer's address, so `/metrics` and `/ui` can answer loopback only (`admin`).
        let peer = stream.peer_addr().ok();
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: activity.clone(),
        });
        let (app, fast, posts) = (self.app, self.fast, self.posts);
        let body_limit = self.limits.body_timeout;
        let watch = activity.clone();
        let authenticated = activity.authenticated();
        let service =
            hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let request = watch.begin();
                let post = (req.method() == http::Method::POST).then(|| posts.enter());
                let mut req = req.map(|inner| {
                    axum::body::Body::new(Deadline {
                        inner,
                        sleep: Box::pin(tokio::time::sleep(body_limit)),
                        limit: body_limit,
                    })
                });
                if let Some(peer) = peer {
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                }
                req.extensions_mut().insert(authenticated.clone());
                let (mut app, fast) = (app.clone(), fast.clone());
                async move {
                    let response = match fast.serve(req).await {
                        Ok(response) => response,
                        Err(req) => tower_service::Service::call(&mut app, req).await?,
                    };
                    Ok::<_, Infallible>(response.map(|inner| Answer {
                        inner,
                        request: Some((request, post)),
                    }))
                }
            });
        let mut builder = hyper::server::conn::http1::Builder::new();
        // The watchdog below times headers (hyper's own timer would also start on idle).
        builder.timer(TokioTimer::new()).header_read_timeout(None);
        let conn = builder.serve_connection(io, service);
        let mut conn = std::pin::pin!(conn);
        let mut closing = false;
        let timeouts = Timeouts {
            header: self.limits.header_timeout,
            idle: self.limits.idle_timeout,
            unauthenticated: self.limits.unauthenticated_idle,
        };
        loop {
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!("HTTP connection: {e}");
                    }
                    return;
                }
                why = activity.expired(timeouts) => {
                    tracing::debug!("HTTP connection closed: {why:?} timeout");
                    return;
                }
                _ = self.closing.cancelled(), if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = self.kill.cancelled() => return,
            }
        }
    }
}

/// Open connections per client address, for `max_connections_per_client`.
#[derive(Default)]
struct Clients(std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>);

/// One connection counted for its client address; uncounted when dropped.
struct ClientSlot(Arc<Clients>, IpAddr);

impl Clients {
    /// Counts a connection from `ip`, unless `ip` already holds `max`.
    fn enter(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<ClientSlot> {
        let mut open = self.0.lock().expect("clients");
        let n = open.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ClientSlot(self.clone(), ip))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.0 .0.lock().expect("clients");
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

/// Which cap a refused connection is over.
enum Refusal {
    /// `max_connections`: every client together.
    Total(usize),
    /// `max_connections_per_client`: this client's address.
    PerClient(usize),
}

/// A connection over a cap: told why, in HTTP, then closed.
async fn refuse(mut stream: TcpStream, over: Refusal) {
    let (status, body) = match over {
        Refusal::Total(max) => ("503 Service Unavailable", format!(
            "toolgate: too many open connections (gateway.limits.max_connections = {max}); retry shortly, reuse keep-alive connections, or raise the limit\n"
        )),
        Refusal::PerClient(max) => ("429 Too Many Requests", format!(
            "toolgate: too many open connections from your address (gateway.limits.max_connections_per_client = {max}); close idle connections, reuse keep-alive ones, or raise the limit\n"
        )),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // Read what the client sent first: closing with unread bytes resets the connection,
    // and the client would never see the answer.
    let mut buf = [0u8; 8192];
    let _ = tokio::time::timeout(Duration::from_millis(500), stream.read(&mut buf)).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// Every accepted connection sends each write at once. Without it, Nagle holds the later
/// small writes of a streamed (SSE) answer until the client ACKs the first, and a client
/// with delayed ACKs waits ~40 ms per call on a keep-alive connection.
fn set_nodelay(stream: &TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY on an accepted connection: {e}");
    }
}
