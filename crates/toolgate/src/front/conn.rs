//! What one HTTP connection is doing, for its timeouts: the socket wrapped so every byte
//! read is seen, requests counted from their headers to the end of their answer, whether
//! any request on it was authenticated, and a request body that fails once its deadline
//! passes (`gateway.limits`).

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Milliseconds since the connection opened of the moments its timeouts are counted from.
pub(super) struct Activity {
    opened: Instant,
    /// Requests whose headers arrived and whose answer is not yet fully written.
    active: AtomicUsize,
    /// When the connection last became free of requests (or opened).
    idle_since: AtomicU64,
    /// The first byte read while free of requests: a request's headers are on their way.
    /// `u64::MAX` when none.
    first_byte: AtomicU64,
    /// Set once a request on the connection passed authentication (`Authenticated`): until
    /// then it gets `unauthenticated_idle_secs`, not `idle_timeout_secs`.
    authenticated: Arc<AtomicBool>,
}

/// A request extension: marks its connection as authenticated (`front::auth`, the fast
/// lane and the admin guard call [`Authenticated::mark`] once a key is accepted).
#[derive(Clone)]
pub(super) struct Authenticated(Arc<AtomicBool>);

impl Authenticated {
    /// Marks the connection of `extensions`' request, if it came over one.
    pub(super) fn mark(extensions: &http::Extensions) {
        if let Some(a) = extensions.get::<Authenticated>() {
            a.0.store(true, Ordering::Release);
        }
    }
}

/// Why a connection is closed by its watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expired {
    /// A request's headers did not arrive in full within `header_timeout_secs`.
    Headers,
    /// No request came within `idle_timeout_secs`.
    Idle,
    /// Idle, `unauthenticated_idle_secs` after it opened, and no request was authenticated.
    Unauthenticated,
}

/// The idle limits of a connection: authenticated, and not yet.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeouts {
    pub header: Duration,
    pub idle: Duration,
    pub unauthenticated: Duration,
}

impl Activity {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            opened: Instant::now(),
            active: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            first_byte: AtomicU64::new(u64::MAX),
            authenticated: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The extension each request carries, to mark this connection authenticated.
    pub(super) fn authenticated(&self) -> Authenticated {
        Authenticated(self.authenticated.clone())
    }

    fn now(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    fn read(&self) {
        if self.active.load(Ordering::Acquire) == 0 {
            let now = self.now();
            let _ = (self.first_byte).compare_exchange(
                u64::MAX,
                now,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }

    /// A request's headers arrived: its timeouts stop until its answer is written.
    pub(super) fn begin(self: &Arc<Self>) -> InRequest {
        self.active.fetch_add(1, Ordering::AcqRel);
        self.first_byte.store(u64::MAX, Ordering::Release);
        InRequest(self.clone())
    }

    /// When the connection is due to be closed, if nothing happens before; `None` while a
    /// request is being answered.
    fn deadline(&self, t: Timeouts) -> Option<(u64, Expired)> {
        if self.active.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(match self.first_byte.load(Ordering::Acquire) {
            u64::MAX => {
                let since = self.idle_since.load(Ordering::Acquire);
                let idle = (since + t.idle.as_millis() as u64, Expired::Idle);
                let keyless = (
                    t.unauthenticated.as_millis() as u64,
                    Expired::Unauthenticated,
                );
                match self.authenticated.load(Ordering::Acquire) {
                    false if keyless.0 < idle.0 => keyless,
                    _ => idle,
                }
            }
            first => (first + t.header.as_millis() as u64, Expired::Headers),
        })
    }

    /// Resolves when the connection has been idle, or slow with its headers, too long.
    /// Wakes at least once a second to re-read the moments, which requests move.
    pub(super) async fn expired(&self, t: Timeouts) -> Expired {
        loop {
            let now = self.now();
            let wait = match self.deadline(t) {
                Some((at, why)) if at <= now => return why,
                Some((at, _)) => (at - now).min(1000),
                None => 1000,
            };
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    }
}

/// One request being answered; dropped when its answer's body has been written (or lost).
pub(super) struct InRequest(Arc<Activity>);

impl Drop for InRequest {
    fn drop(&mut self) {
        let a = &self.0;
        if a.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            a.idle_since.store(a.now(), Ordering::Release);
            a.first_byte.store(u64::MAX, Ordering::Release);
        }
    }
}

/// The accepted socket, telling `Activity` of every read.
pub(super) struct Watched<S> {
    pub inner: S,
    pub activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// An answer's body that holds its request's `InRequest` (and, for a POST, its count in
/// `Posts`) until it is written in full.
pub(super) struct Answer<B> {
    pub inner: B,
    pub request: Option<(InRequest, Option<Post>)>,
}

impl<B: Body + Unpin> Body for Answer<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = r {
            self.request = None;
        }
        r
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The error a request body gives once `body_timeout_secs` has passed without its end;
/// `front::http` answers 408 when it finds it.
#[derive(Debug)]
pub(super) struct BodyTimedOut(pub Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body did not arrive within gateway.limits.body_timeout_secs = {}",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for BodyTimedOut {}

/// A request body with a deadline for its last byte.
pub(super) struct Deadline<B> {
    pub inner: B,
    pub sleep: Pin<Box<tokio::time::Sleep>>,
    pub limit: Duration,
}

impl<B> Body for Deadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(r) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(r.map(|f| f.map_err(Into::into)));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(self.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// POST requests whose answer is not yet written, across connections: shutdown waits for
/// them (the drained calls' answers) before it ends the sessions.
#[derive(Default)]
pub(super) struct Posts {
    n: AtomicUsize,
    none: Notify,
}

/// One POST being answered.
pub(super) struct Post(Arc<Posts>);

impl Posts {
    pub(super) fn enter(self: &Arc<Self>) -> Post {
        self.n.fetch_add(1, Ordering::AcqRel);
        Post(self.clone())
    }
    pub(super) fn count(&self) -> usize {
        self.n.load(Ordering::Acquire)
    }
    pub(super) async fn until_none(&self) {
        loop {
            let woken = self.none.notified();
            if self.count() == 0 {
                return;
            }
            woken.await;
        }
    }
}

impl Drop for Post {
    fn drop(&mut self) {
        if self.0.n.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none.notify_waiters();
        }
    }
}

/// A request's body, up to `max_body` bytes: past it 413, and 408 when it comes too slowly
/// (`gateway.limits.body_timeout_secs`), each saying which setting it is.
pub(super) async fn read_body(
    body: axum::body::Body,
    max_body: usize,
) -> Result<axum::body::Bytes, axum::response::Response> {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    axum::body::to_bytes(body, max_body)
        .await
        .map_err(|e| match timed_out(&e) {
            Some(why) => (StatusCode::REQUEST_TIMEOUT, why).into_response(),
            None => {
                let why =
                    format!("the request body is larger than gateway.max_body_bytes = {max_body}");
                (StatusCode::PAYLOAD_TOO_LARGE, why).into_response()
            }
        })
}

/// The message of a body that failed because `gateway.limits.body_timeout_secs` passed.
fn timed_out(e: &axum::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(t) = err.downcast_ref::<BodyTimedOut>() {
            return Some(t.to_string());
        }
        source = err.source();
    }
    None
}
