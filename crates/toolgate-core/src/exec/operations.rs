//! Calls running in the background, followed with `continue {operationId}`.
//!
//! Each operation is a tokio task that drives the call, records its latest progress, and
//! stores its result when it ends. Cancelling fires the token the call was given and lets
//! the call end in its own words for up to [`CANCEL_GRACE`] (its upstream hears
//! `notifications/cancelled`, its audit record ends), then drops it, in case it does not
//! listen.

use super::limits::{IdKind, StoreError, StoreLimits};
use super::tombstones::{random_id, Tombstones};
use crate::call::Progress;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a cancelled call has to end on its own before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Where an operation stands, as `continue` reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum OperationStatus<T> {
    /// Still running: the latest progress the upstream sent, if any, and time since start.
    Running {
        /// The latest progress the upstream sent.
        progress: Option<Progress>,
        /// Time since the operation started.
        elapsed: Duration,
    },
    /// Finished with a result.
    Done(T),
    /// Finished with an error; the message names the upstream and what went wrong.
    Failed(String),
    /// Stopped by `cancel`.
    Cancelled,
}

impl<T> OperationStatus<T> {
    /// True while the operation runs.
    pub fn is_running(&self) -> bool {
        matches!(self, Self::Running { .. })
    }
}

/// Where one of a caller's operations stands, as a listing shows it (without its result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationState {
    /// Still running (here, or on a replica that is alive).
    Running,
    /// Finished with a result.
    Done,
    /// Finished with an error: the message.
    Failed(String),
    /// Stopped by `cancel`.
    Cancelled,
    /// Its process is gone while it ran: why, in words.
    Lost(String),
}

/// One of a caller's operations in a listing (`tasks/list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOperation {
    /// Its id (`op-…`).
    pub id: String,
    /// When it started, milliseconds since the Unix epoch (the same on every replica).
    pub started_ms: u64,
    /// Where it stands.
    pub state: OperationState,
}

impl<T> OperationStatus<T> {
    /// The status without its result, for a listing.
    pub fn state(&self) -> OperationState {
        match self {
            Self::Running { .. } => OperationState::Running,
            Self::Done(_) => OperationState::Done,
            Self::Failed(message) => OperationState::Failed(message.clone()),
            Self::Cancelled => OperationState::Cancelled,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Operations<T> {
    live: HashMap<String, Operation<T>>,
    tombs: Tombstones,
}

impl<T> Default for Operations<T> {
    fn default() -> Self {
        Self {
            live: HashMap::new(),
            tombs: Tombstones::default(),
        }
    }
}

#[derive(Debug)]
struct Operation<T> {
    owner: Arc<str>,
    started: Instant,
    /// `started` on the wall clock (the durable record and a task's id carry it).
    started_ms: u64,
    /// Given to the call; fired by `cancel`.
    cancel: CancellationToken,
    status: OperationStatus<T>,
    /// Becomes true when the operation ends, for `wait`.
    done: watch::Receiver<bool>,
    /// Set when it ends: the result is dropped after this.
    expires: Option<Instant>,
}

impl<T: Clone + Send + 'static> Operations<T> {
    /// `on_end` hears the operation's final status once (the durable store keeps it).
    pub(super) fn start<F, Fut, E>(
        table: &Arc<Mutex<Self>>,
        owner: &str,
        key: Option<&str>,
        call: F,
        on_end: Option<OnEnd<T>>,
        (now, started_ms): (Instant, u64),
        limits: &StoreLimits,
    ) -> Result<String, StoreError>
    where
        F: FnOnce(CancellationToken, mpsc::UnboundedSender<Progress>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        let id = {
            let mut ops = table.lock().unwrap_or_else(PoisonError::into_inner);
            // An operation taken over under its own id (`key`) that already runs here
            // (two requests asked after it at once) is not started twice.
            if let Some(key) = key.filter(|k| ops.live.contains_key(*k)) {
                return Ok(op_id(key));
            }
            ops.make_room(owner, now, limits)?;
            let id = key.map_or_else(random_id, str::to_string);
            ops.live.insert(
                id.clone(),
                Operation {
                    owner: owner.into(),
                    started: now,
                    started_ms,
                    cancel: cancel.clone(),
                    status: OperationStatus::Running {
                        progress: None,
                        elapsed: Duration::ZERO,
                    },
                    done: done_rx,
                    expires: None,
                },
            );
            id
        };
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel();
        let fut = call(cancel.clone(), progress_tx);
        let mut ending = Ending {
            table: Arc::clone(table),
            key: id.clone(),
            ttl: limits.operation_ttl,
            done: Some(done_tx),
            on_end,
        };
        tokio::spawn(async move {
            tokio::pin!(fut);
            let mut progress_open = true;
            let end = loop {
                let cancelled = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => true,
                    r = &mut fut => break Some(r),
                    p = progress_rx.recv(), if progress_open => {
                        match p {
                            Some(p) => ending.table.lock().unwrap_or_else(PoisonError::into_inner).progress(&ending.key, p),
                            None => progress_open = false,
                        }
                        false
                    }
                };
                if cancelled {
                    // The call holds this token too: dropped at once, it would never tell
                    // its upstream or end its audit record.
                    let _ = tokio::time::timeout(CANCEL_GRACE, &mut fut).await;
                    break None;
                }
            };
            ending.finish(match end {
                None => OperationStatus::Cancelled,
                Some(Ok(v)) => OperationStatus::Done(v),
                Some(Err(e)) => OperationStatus::Failed(e.to_string()),
            });
        });
        Ok(op_id(&id))
    }

    pub(super) fn status(
        &mut self,
        owner: &str,
        id: &str,
        now: Instant,
        limits: &StoreLimits,
    ) -> Result<OperationStatus<T>, StoreError> {
        let key = self.key(owner, id, now, limits)?;
        let op = self.live.get_mut(&key).expect("checked by key()");
        Ok(match &op.status {
            OperationStatus::Running { progress, .. } => OperationStatus::Running {
                progress: progress.clone(),
                elapsed: now.saturating_duration_since(op.started),
            },
            ended => {
                // Delivered: keep it only briefly now, for a retried continue.
                let grace = now + limits.grace;
                op.expires = Some(op.expires.map_or(grace, |e| e.min(grace)));
                ended.clone()
            }
        })
    }

    pub(super) fn cancel(
        &mut self,
        owner: &str,
        id: &str,
        now: Instant,
        limits: &StoreLimits,
    ) -> Result<OperationStatus<T>, StoreError> {
        let key = self.key(owner, id, now, limits)?;
        let op = self.live.get_mut(&key).expect("checked by key()");
        if op.status.is_running() {
            op.cancel.cancel();
            op.status = OperationStatus::Cancelled;
            op.expires = Some(now + limits.grace);
        }
        self.status(owner, id, now, limits)
    }

    /// The live, unexpired operations of `owner`, without changing any (a listing is not a
    /// delivery: it starts no grace).
    pub(super) fn listed(&self, owner: &str, now: Instant) -> Vec<ListedOperation> {
        self.live
            .iter()
            .filter(|(_, op)| &*op.owner == owner && op.expires.is_none_or(|e| now < e))
            .map(|(key, op)| ListedOperation {
                id: op_id(key),
                started_ms: op.started_ms,
                state: op.status.state(),
            })
            .collect()
    }

    /// When a live operation of `owner` started (wall clock), if this process holds it.
    pub(super) fn started_ms(&self, owner: &str, id: &str) -> Option<u64> {
        let op = self.live.get(parse(id)?)?;
        (&*op.owner == owner).then_some(op.started_ms)
    }

    /// How the operation under table key `key` ended, if it is live and has ended.
    pub(super) fn ending(&self, key: &str) -> Option<OperationStatus<T>> {
        let op = self.live.get(key)?;
        (!op.status.is_running()).then(|| op.status.clone())
    }

    /// A receiver that turns true when the operation ends (`None` if `id` is not live).
    pub(super) fn watch(&self, owner: &str, id: &str) -> Option<watch::Receiver<bool>> {
        let op = self.live.get(parse(id)?)?;
        (&*op.owner == owner).then(|| op.done.clone())
    }

    pub(super) fn purge(&mut self, now: Instant, limits: &StoreLimits) {
        let dead: Vec<String> = self
            .live
            .iter()
            .filter(|(_, op)| op.expires.is_some_and(|e| now >= e))
            .map(|(id, _)| id.clone())
            .collect();
        for id in dead {
            self.remove(id, now, limits);
        }
        self.tombs.purge(now);
    }

    /// (operations kept, of which running).
    pub(super) fn stats(&self) -> (usize, usize) {
        let running = self.live.values().filter(|o| o.status.is_running()).count();
        (self.live.len(), running)
    }

    /// The table key of a live, unexpired operation of `owner`, or why there is none.
    fn key(
        &mut self,
        owner: &str,
        id: &str,
        now: Instant,
        limits: &StoreLimits,
    ) -> Result<String, StoreError> {
        let ttl = limits.operation_ttl;
        let Some(key) = parse(id) else {
            return Err(StoreError::Unknown {
                kind: IdKind::Operation,
                id: id.into(),
            });
        };
        let Some(op) = self.live.get(key) else {
            return Err(self.tombs.error_for(IdKind::Operation, id, key, owner, ttl));
        };
        if &*op.owner != owner {
            return Err(StoreError::Foreign {
                kind: IdKind::Operation,
                id: id.into(),
            });
        }
        if op.expires.is_some_and(|e| now >= e) {
            self.remove(key.to_string(), now, limits);
            return Err(StoreError::Expired {
                kind: IdKind::Operation,
                id: id.into(),
                ttl,
            });
        }
        Ok(key.to_string())
    }

    /// Refuses a new operation over the running limits; evicts the oldest finished ones
    /// to stay under the total.
    fn make_room(
        &mut self,
        owner: &str,
        now: Instant,
        limits: &StoreLimits,
    ) -> Result<(), StoreError> {
        self.purge(now, limits);
        let running_here = self
            .live
            .values()
            .filter(|o| o.status.is_running() && &*o.owner == owner)
            .count();
        if running_here >= limits.max_operations_per_owner {
            return Err(StoreError::TooManyOperations {
                limit: limits.max_operations_per_owner,
            });
        }
        while self.live.len() >= limits.max_operations {
            let oldest = self
                .live
                .iter()
                .filter(|(_, o)| !o.status.is_running())
                .min_by_key(|(_, o)| o.started)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => self.remove(id, now, limits),
                None => {
                    return Err(StoreError::Busy {
                        limit: limits.max_operations,
                    })
                }
            }
        }
        Ok(())
    }

    fn progress(&mut self, key: &str, p: Progress) {
        if let Some(op) = self.live.get_mut(key) {
            if let OperationStatus::Running { progress, .. } = &mut op.status {
                *progress = Some(p);
            }
        }
    }

    /// Records the ending; returns the status that stands.
    fn finish(
        &mut self,
        key: &str,
        status: OperationStatus<T>,
        expires: Instant,
    ) -> OperationStatus<T> {
        match self.live.get_mut(key) {
            Some(op) => {
                // A cancel that got here first stands: the model was told it was cancelled.
                if op.status.is_running() {
                    op.status = status;
                    op.expires = Some(expires);
                }
                op.status.clone()
            }
            None => status,
        }
    }

    fn remove(&mut self, key: String, now: Instant, limits: &StoreLimits) {
        if let Some(op) = self.live.remove(&key) {
            op.cancel.cancel();
            self.tombs.bury(key, op.owner, now, limits.operation_ttl);
        }
    }
}

/// Records how an operation's task ended, and wakes its waiters. If the task ends
/// without saying (the call panicked, or the runtime is shutting down), dropping this
/// records a failure, so the operation never stays "running" forever.
struct Ending<T: Clone + Send + 'static> {
    table: Arc<Mutex<Operations<T>>>,
    key: String,
    ttl: Duration,
    /// Taken when the end is recorded.
    done: Option<watch::Sender<bool>>,
    on_end: Option<OnEnd<T>>,
}

/// Told the final status of an operation, once (before its waiters wake).
pub(crate) type OnEnd<T> = Box<dyn FnOnce(&OperationStatus<T>) + Send>;

impl<T: Clone + Send + 'static> Ending<T> {
    fn finish(&mut self, status: OperationStatus<T>) {
        let Some(done) = self.done.take() else { return };
        // A poisoned lock means another task panicked mid-update; the table is still
        // consistent enough to record an ending (every update is a single assignment).
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let stands = table.finish(&self.key, status, Instant::now() + self.ttl);
        drop(table);
        if let Some(on_end) = self.on_end.take() {
            on_end(&stands);
        }
        tracing::debug!(operation = %crate::principal::redacted(&self.key), "operation ended");
        let _ = done.send(true);
    }
}

impl<T: Clone + Send + 'static> Drop for Ending<T> {
    fn drop(&mut self) {
        // Not told to the durable store: there it stays running under this boot, so after
        // a restart (the usual reason for a task to be dropped) it is reported lost.
        self.on_end = None;
        self.finish(OperationStatus::Failed(
            "the call stopped unexpectedly inside the gateway; call execute again".into(),
        ));
    }
}

fn op_id(key: &str) -> String {
    format!("op-{key}")
}

fn parse(id: &str) -> Option<&str> {
    id.strip_prefix("op-")
}
