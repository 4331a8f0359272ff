//! The state behind `continue`: cursors over stored pages and background operations, each
//! owned by the [`Principal`] that made it (its API key, else the gateway's local identity),
//! not by a session: a cursor or operation works from any request or connection of its
//! owner (MCP 2026-07-28 has no sessions) and only from those.
//!
//! One process-wide [`SessionStore`] is owned by the gateway, so that a cursor or operation
//! id of another principal is recognised as *foreign* (and refused with a message saying
//! so; the caller audits it), never mistaken for an unknown one. The owner is checked here,
//! where a handle is looked up, and nowhere else. Ids are 128 random bits (from the
//! OS-seeded CSPRNG behind `rand::random`), so they cannot be guessed.
//!
//! Everything expires and everything is bounded (see [`StoreLimits`]). Expired entries
//! are purged on access (at most once a second) and by [`SessionStore::spawn_sweeper`];
//! a purged id leaves a small tombstone for a while, so a late `continue` is told
//! "expired" rather than "unknown". Time is `tokio::time::Instant`, so tests run with
//! paused time and never sleep.

use super::cursors::Cursors;
use super::operations::{OperationStatus, Operations};
use crate::call::{CallOutcome, Progress};
use crate::principal::Principal;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long and how much the store keeps. `Default` is what the gateway uses.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreLimits {
    /// Unread pages are kept this long after their last use (10 min).
    pub cursor_ttl: Duration,
    /// A finished operation's result waits this long to be collected (10 min).
    pub operation_ttl: Duration,
    /// A last page or a result already delivered stays this long more, so a retried
    /// `continue` still gets it (60 s).
    pub grace: Duration,
    /// Paged results kept per owner; a new one beyond this replaces the oldest (64: without
    /// keys every caller is the one local identity).
    pub max_cursors_per_owner: usize,
    /// Paged results kept in all; a new one beyond this replaces the oldest anywhere (1,024).
    pub max_cursors: usize,
    /// Bytes of page text kept in all (64 MiB). One result, and one owner's results
    /// together, may take at most a quarter of it.
    pub max_bytes: usize,
    /// Operations running at once per owner; one more is refused (16).
    pub max_operations_per_owner: usize,
    /// Operations kept in all, running or finished; finished ones make room first (256).
    pub max_operations: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            cursor_ttl: Duration::from_secs(600),
            operation_ttl: Duration::from_secs(600),
            grace: Duration::from_secs(60),
            max_cursors_per_owner: 64,
            max_cursors: 1024,
            max_bytes: 64 << 20,
            max_operations_per_owner: 16,
            max_operations: 256,
        }
    }
}

/// What an id names, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Cursor,
    Operation,
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cursor => "cursor",
            Self::Operation => "operation",
        })
    }
}

/// Why `continue` (or starting an operation) could not be served. Every message says
/// what the model should do next; the front returns it as an `isError` tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("unknown {kind} {id:?}: it was not issued by this gateway (check it was copied exactly) or was cleaned up long ago; call execute again")]
    Unknown { kind: IdKind, id: String },
    #[error("{kind} {id:?} expired (results are kept {} s after last use, less when one caller keeps many); call execute again", .ttl.as_secs())]
    Expired {
        kind: IdKind,
        id: String,
        ttl: Duration,
    },
    #[error("{kind} {id:?} belongs to another caller (a different API key) and works only for the one that made it; call execute again")]
    Foreign { kind: IdKind, id: String },
    #[error("this caller (its API key, over all its connections) already has {limit} operations running; follow one with continue or stop one with cancel: true before starting another")]
    TooManyOperations { limit: usize },
    #[error("the gateway is already running {limit} operations; try again shortly")]
    Busy { limit: usize },
    #[error("the result is too large to keep for paging ({bytes} bytes, at most {limit}); ask for less, e.g. with fields")]
    TooLarge { bytes: usize, limit: usize },
}

/// What the store holds now (for status reports and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    pub cursors: usize,
    pub bytes: usize,
    pub operations: usize,
    pub running: usize,
}

/// Cursors and operations of every owner, with expiry and bounds.
pub struct SessionStore<T = CallOutcome> {
    limits: StoreLimits,
    cursors: Mutex<Cursors>,
    /// Shared with the operations' tasks, which record progress and results in it.
    operations: Arc<Mutex<Operations<T>>>,
    /// When the next purge on access is due.
    next_purge: Mutex<Instant>,
}

impl<T: Clone + Send + 'static> SessionStore<T> {
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            cursors: Mutex::new(Cursors::default()),
            operations: Arc::new(Mutex::new(Operations::default())),
            next_purge: Mutex::new(Instant::now()),
            limits,
        }
    }

    pub fn limits(&self) -> &StoreLimits {
        &self.limits
    }

    /// Keeps `pages` (the pages after the one already shown) for `owner`, and returns
    /// the cursor of the first of them. An empty `pages` is kept as one empty page.
    pub fn put_pages(&self, owner: &Principal, pages: Vec<String>) -> Result<String, StoreError> {
        let now = self.purge_if_due();
        self.cursors
            .lock()
            .expect("cursors")
            .put(owner.as_str(), pages, now, &self.limits)
    }

    /// The page `cursor` names, and the cursor of the page after it (`None` after the last).
    /// Reading a page again with the same cursor gives the same page (retries are safe).
    pub fn next_page(
        &self,
        owner: &Principal,
        cursor: &str,
    ) -> Result<(String, Option<String>), StoreError> {
        self.next_page_at(owner, cursor)
            .map(|(page, next, _)| (page, next))
    }

    /// `next_page`, with where the page stands among the pages kept (for "page N of M").
    pub fn next_page_at(
        &self,
        owner: &Principal,
        cursor: &str,
    ) -> Result<(String, Option<String>, super::PagePosition), StoreError> {
        let now = self.purge_if_due();
        self.cursors
            .lock()
            .expect("cursors")
            .next(owner.as_str(), cursor, now, &self.limits)
    }

    /// Runs a call in the background and returns its operation id at once. `call` gets
    /// the token that [`cancel`](Self::cancel) fires and the sender for its progress (for
    /// `CallOptions`); an `Err` result is kept as [`OperationStatus::Failed`] with its
    /// message. Must be called inside a tokio runtime.
    pub fn start<F, Fut, E>(&self, owner: &Principal, call: F) -> Result<String, StoreError>
    where
        F: FnOnce(CancellationToken, mpsc::UnboundedSender<Progress>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        let now = self.purge_if_due();
        Operations::start(&self.operations, owner.as_str(), call, now, &self.limits)
    }

    /// Where an operation stands. A result (done, failed or cancelled) is delivered and
    /// then kept for [`StoreLimits::grace`], so a retried `continue` gets it again.
    pub fn status(&self, owner: &Principal, id: &str) -> Result<OperationStatus<T>, StoreError> {
        let now = self.purge_if_due();
        self.operations
            .lock()
            .expect("operations")
            .status(owner.as_str(), id, now, &self.limits)
    }

    /// Like [`status`](Self::status), but first waits up to `max` for the operation to
    /// finish (how `execute` decides between answering and handing out an operation id,
    /// and how `continue` long-polls).
    pub async fn wait(
        &self,
        owner: &Principal,
        id: &str,
        max: Duration,
    ) -> Result<OperationStatus<T>, StoreError> {
        let done = self
            .operations
            .lock()
            .expect("operations")
            .watch(owner.as_str(), id);
        if let Some(mut done) = done {
            // A closed channel means the task is gone; status() says why.
            let _ = tokio::time::timeout(max, done.wait_for(|d| *d)).await;
        }
        self.status(owner, id)
    }

    /// Stops a running operation: fires its token (so the upstream is told) and drops the
    /// call. An operation that already finished is not changed; its status is returned.
    pub fn cancel(&self, owner: &Principal, id: &str) -> Result<OperationStatus<T>, StoreError> {
        let now = self.purge_if_due();
        self.operations
            .lock()
            .expect("operations")
            .cancel(owner.as_str(), id, now, &self.limits)
    }

    /// Purges every expired entry now.
    pub fn sweep(&self) {
        let now = Instant::now();
        self.cursors
            .lock()
            .expect("cursors")
            .purge(now, &self.limits);
        self.operations
            .lock()
            .expect("operations")
            .purge(now, &self.limits);
    }

    pub fn stats(&self) -> StoreStats {
        let (cursors, bytes) = self.cursors.lock().expect("cursors").stats();
        let (operations, running) = self.operations.lock().expect("operations").stats();
        StoreStats {
            cursors,
            bytes,
            operations,
            running,
        }
    }

    fn purge_if_due(&self) -> Instant {
        let now = Instant::now();
        let mut next = self.next_purge.lock().expect("purge");
        if now >= *next {
            *next = now + Duration::from_secs(1);
            drop(next);
            self.sweep();
        }
        now
    }

    /// Sweeps every `every` until `stop` fires or the store is dropped, so memory held by
    /// sessions that went quiet is freed even if nobody calls again.
    pub fn spawn_sweeper(
        self: &Arc<Self>,
        every: Duration,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => match weak.upgrade() {
                        Some(store) => store.sweep(),
                        None => return,
                    },
                }
            }
        })
    }
}

impl<T: Clone + Send + 'static> Default for SessionStore<T> {
    fn default() -> Self {
        Self::new(StoreLimits::default())
    }
}

/// A fresh unguessable id: 128 random bits in hex.
pub(crate) fn random_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Ids that were purged, remembered for a while so a late use is told "expired" (or
/// "another owner's") instead of "unknown".
#[derive(Debug, Default)]
pub(crate) struct Tombstones {
    /// Id -> (its owner, when the tombstone itself may go).
    dead: HashMap<String, (Arc<str>, Instant)>,
}

/// At most this many tombstones; past it the oldest half goes (they are only a courtesy).
const MAX_TOMBSTONES: usize = 16_384;

impl Tombstones {
    /// Remembers `id` of `owner` for six TTLs.
    pub(crate) fn bury(&mut self, id: String, owner: Arc<str>, now: Instant, ttl: Duration) {
        if self.dead.len() >= MAX_TOMBSTONES {
            let mut until: Vec<Instant> = self.dead.values().map(|(_, t)| *t).collect();
            until.sort();
            let cut = until[until.len() / 2];
            self.dead.retain(|_, (_, t)| *t > cut);
        }
        self.dead.insert(id, (owner, now + ttl * 6));
    }

    /// The error for an id that is not live: foreign, expired, or unknown.
    pub(crate) fn error_for(
        &self,
        kind: IdKind,
        id: &str,
        key: &str,
        owner: &str,
        ttl: Duration,
    ) -> StoreError {
        let id = id.to_string();
        match self.dead.get(key) {
            Some((made_by, _)) if &**made_by != owner => StoreError::Foreign { kind, id },
            Some(_) => StoreError::Expired { kind, id, ttl },
            None => StoreError::Unknown { kind, id },
        }
    }

    pub(crate) fn purge(&mut self, now: Instant) {
        self.dead.retain(|_, (_, until)| *until > now);
    }
}
