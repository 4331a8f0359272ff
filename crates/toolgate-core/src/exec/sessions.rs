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
//!
//! With a durable store (`[store] backend = "embedded"`, see `exec::durable`) every
//! paged result and operation is also written there, and a handle this process does not
//! hold is read back from it: after a restart, cursors continue and finished operations
//! are delivered; one that was running is reported lost, unless it left a note of how to
//! follow it again ([`Resumable`]: an upstream's own task), in which case the process that
//! is asked after it takes it over ([`Resume`]).

use super::cursors::{self, Cursors};
use super::durable::{Durable, StoredOperation};
use super::limits::{IdKind, StoreError, StoreLimits, StoreStats};
use super::operations::{ListedOperation, OnEnd, OperationState, OperationStatus, Operations};
use crate::call::{CallOutcome, Progress};
use crate::principal::Principal;
use resume::{ending_record, ResumableInner};
pub use resume::{Resumable, Resume};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod pages;
mod resume;

/// Cursors and operations of every owner, with expiry and bounds.
pub struct SessionStore<T = CallOutcome> {
    limits: StoreLimits,
    cursors: Mutex<Cursors>,
    /// Shared with the operations' tasks, which record progress and results in it.
    operations: Arc<Mutex<Operations<T>>>,
    /// When the next purge on access is due.
    next_purge: Mutex<Instant>,
    /// Where handles outlive the process; `None`: memory only.
    durable: Option<Arc<Durable>>,
    /// When the durable store's next sweep is due (a pass over its tables: rarer).
    next_durable_sweep: Mutex<Instant>,
    /// Fired at shutdown: endings after it are not written to the durable store.
    closing: CancellationToken,
    /// How an operation a stopped process left running is followed again, if it can be.
    resumer: OnceLock<Arc<dyn Resume<T>>>,
}

/// How often `wait` looks again at an operation another replica runs.
const REMOTE_POLL: Duration = Duration::from_millis(250);

/// How often the durable store drops what expired.
const DURABLE_SWEEP: Duration = Duration::from_secs(60);

impl<T: Clone + Send + Serialize + DeserializeOwned + 'static> SessionStore<T> {
    /// An empty store under `limits`, with no durable store behind it.
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            cursors: Mutex::new(Cursors::default()),
            operations: Arc::new(Mutex::new(Operations::default())),
            next_purge: Mutex::new(Instant::now()),
            durable: None,
            next_durable_sweep: Mutex::new(Instant::now()),
            closing: CancellationToken::new(),
            resumer: OnceLock::new(),
            limits,
        }
    }

    /// Also keeps every paged result and operation in `store`, and reads back from it the
    /// handles this process does not hold.
    /// Once `closing` fires (the gateway is shutting down), calls that end are not
    /// recorded: their upstreams are being closed under them, and after the restart they
    /// are reported lost rather than failed.
    pub fn with_durable(
        mut self,
        store: Option<Arc<dyn crate::store::Store>>,
        closing: CancellationToken,
    ) -> Self {
        self.durable = store.map(|s| Arc::new(Durable::new(s)));
        if let Some(d) = self.durable.as_ref().filter(|d| d.shared()) {
            d.spawn_heartbeat(closing.clone());
        }
        self.closing = closing;
        self
    }

    /// The cursors, locked (a panic while another thread held them leaves them usable).
    fn cursors(&self) -> MutexGuard<'_, Cursors> {
        self.cursors.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The operations, locked, as [`Self::cursors`].
    fn operations(&self) -> MutexGuard<'_, Operations<T>> {
        self.operations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The durable backend's name, if there is one.
    pub fn durable_backend(&self) -> Option<&'static str> {
        self.durable.as_ref().map(|d| d.backend())
    }

    /// The limits it keeps.
    pub fn limits(&self) -> &StoreLimits {
        &self.limits
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
        self.launch(owner, None, |ct, progress, _| call(ct, progress))
    }

    /// Starts `call` as a new operation, or as the one `adopted` names (taken over from
    /// a process that is gone: its key, start and note are kept).
    fn launch<F, Fut, E>(
        &self,
        owner: &Principal,
        adopted: Option<(&str, u64, serde_json::Value)>,
        call: F,
    ) -> Result<String, StoreError>
    where
        F: FnOnce(CancellationToken, mpsc::UnboundedSender<Progress>, Resumable<T>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        let now = self.purge_if_due();
        // One wall-clock start for the table, the record and a task's id (a taken-over
        // operation keeps its own).
        let started_ms = adopted.as_ref().map_or_else(crate::store::now_ms, |a| a.1);
        let fixed = adopted.as_ref().map(|a| a.0);
        let Some(durable) = &self.durable else {
            return Operations::start(
                &self.operations,
                owner.as_str(),
                fixed,
                |ct, progress| call(ct, progress, Resumable(None)),
                None,
                (now, started_ms),
                &self.limits,
            );
        };
        // The ending is written once the id is known; `key` is filled right after start.
        let key: Arc<Mutex<String>> = Arc::default();
        let ttl = self.limits.operation_ttl;
        let on_end: OnEnd<T> = {
            let (durable, key, owner) = (durable.clone(), key.clone(), owner.clone());
            let closing = self.closing.clone();
            Box::new(move |status: &OperationStatus<T>| {
                if closing.is_cancelled() {
                    return;
                }
                let key = key.lock().unwrap_or_else(PoisonError::into_inner).clone();
                let Some(stored) = ending_record(status, started_ms) else {
                    return;
                };
                if let Err(e) = durable.put_operation(owner.as_str(), &key, &stored, ttl) {
                    tracing::error!("an operation's result was not kept in the state store (it is still delivered by this process): {e}");
                }
            })
        };
        let resumable = Resumable(Some(Arc::new(ResumableInner {
            durable: durable.clone(),
            operations: self.operations.clone(),
            key: key.clone(),
            owner: owner.clone(),
            started_ms,
            ttl,
        })));
        // Held while the record is written, so a fast call cannot record its end first
        // (nor its note of how to resume).
        let written = key.lock().unwrap_or_else(PoisonError::into_inner);
        let id = Operations::start(
            &self.operations,
            owner.as_str(),
            fixed,
            |ct, progress| call(ct, progress, resumable),
            Some(on_end),
            (now, started_ms),
            &self.limits,
        )?;
        let op_key = id.strip_prefix("op-").unwrap_or(&id).to_string();
        let running: StoredOperation<T> = StoredOperation::Running {
            boot: durable.boot().to_string(),
            started_ms,
            resume: adopted.map(|a| a.2),
        };
        let mut written = written;
        if let Err(e) = durable.put_operation(owner.as_str(), &op_key, &running, ttl) {
            // The record is for a restart (or another replica); the call itself needs
            // nothing stored, so a store fault does not stop it. Its ending is written
            // if the store is back by then.
            tracing::warn!("an operation is known to this process only until it ends (the state store did not take its record): {e}");
        }
        *written = op_key;
        Ok(id)
    }

    /// Where an operation stands. A result (done, failed or cancelled) is delivered and
    /// then kept for [`StoreLimits::grace`], so a retried `continue` gets it again.
    pub fn status(&self, owner: &Principal, id: &str) -> Result<OperationStatus<T>, StoreError> {
        let now = self.purge_if_due();
        let here = self
            .operations()
            .status(owner.as_str(), id, now, &self.limits);
        match (&self.durable, here) {
            (Some(durable), Err(StoreError::Unknown { .. })) => {
                self.stored_status(durable, owner, id)
            }
            (Some(durable), Ok(status)) if !status.is_running() => {
                let key = id.strip_prefix("op-").unwrap_or(id);
                durable.touch(crate::store::Kind::Operation, key, self.limits.grace);
                Ok(status)
            }
            (_, here) => here,
        }
    }

    /// How an operation this process does not hold stands in the durable store: its
    /// ending (delivered, then kept for the grace), or lost if it was running elsewhen.
    fn stored_status(
        &self,
        durable: &Durable,
        owner: &Principal,
        id: &str,
    ) -> Result<OperationStatus<T>, StoreError> {
        let unknown = || StoreError::Unknown {
            kind: IdKind::Operation,
            id: id.to_string(),
        };
        let key = id.strip_prefix("op-").ok_or_else(unknown)?;
        let ttl = self.limits.operation_ttl;
        let stored = durable
            .operation::<T>(owner.as_str(), key, id, ttl)?
            .ok_or_else(unknown)?;
        let status = match stored {
            // Not in this process's memory, so not running here; on a shared store it
            // may be running on a replica that is alive, else its process is gone.
            StoredOperation::Running {
                boot,
                started_ms,
                resume,
            } => {
                if durable.running_elsewhere(&boot)? {
                    let elapsed = crate::store::now_ms().saturating_sub(started_ms);
                    return Ok(OperationStatus::Running {
                        progress: None,
                        elapsed: Duration::from_millis(elapsed),
                    });
                }
                // Its process is gone; an upstream's own task is followed again from here.
                let adopted = resume.and_then(|note| self.adopt(owner, key, started_ms, note));
                return adopted.ok_or_else(|| StoreError::Lost { id: id.to_string() });
            }
            StoredOperation::Done { result, .. } => OperationStatus::Done(result),
            StoredOperation::Failed { message, .. } => OperationStatus::Failed(message),
            StoredOperation::Cancelled { .. } => OperationStatus::Cancelled,
        };
        durable.touch(crate::store::Kind::Operation, key, self.limits.grace);
        Ok(status)
    }

    /// The operations of `owner` that are still kept, running or ended, oldest first: this
    /// process's, and with a durable store every replica's and those from before a
    /// restart. Nothing is delivered by listing (no grace starts).
    pub fn list(&self, owner: &Principal) -> Result<Vec<ListedOperation>, StoreError> {
        let now = self.purge_if_due();
        let mut listed = self.operations().listed(owner.as_str(), now);
        if let Some(durable) = &self.durable {
            let here: std::collections::HashSet<String> =
                listed.iter().map(|op| op.id.clone()).collect();
            for key in durable.owned(crate::store::Kind::Operation, owner.as_str())? {
                let id = format!("op-{key}");
                if here.contains(&id) {
                    continue;
                }
                let ttl = self.limits.operation_ttl;
                // Gone or unreadable since it was listed: left out (its lookup says why).
                let Ok(Some(stored)) = durable.operation::<T>(owner.as_str(), &key, &id, ttl)
                else {
                    continue;
                };
                let started_ms = stored.started_ms();
                let state = match stored {
                    StoredOperation::Running { boot, resume, .. } => {
                        let taken_over = || {
                            let note = resume?;
                            self.adopt(owner, &key, started_ms, note)
                        };
                        match durable.running_elsewhere(&boot)? {
                            true => OperationState::Running,
                            false if taken_over().is_some() => OperationState::Running,
                            false => OperationState::Lost(
                                StoreError::Lost { id: id.clone() }.to_string(),
                            ),
                        }
                    }
                    StoredOperation::Done { .. } => OperationState::Done,
                    StoredOperation::Failed { message, .. } => OperationState::Failed(message),
                    StoredOperation::Cancelled { .. } => OperationState::Cancelled,
                };
                listed.push(ListedOperation {
                    id,
                    started_ms,
                    state,
                });
            }
        }
        listed.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
        Ok(listed)
    }

    /// When an operation this process runs (or holds) started, on the wall clock: the
    /// time a task's id carries, the same one [`list`](Self::list) reports.
    pub fn started_ms(&self, owner: &Principal, id: &str) -> Option<u64> {
        self.operations().started_ms(owner.as_str(), id)
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
        let done = self.operations().watch(owner.as_str(), id);
        if let Some(mut done) = done {
            // A closed channel means the task is gone; status() says why.
            let _ = tokio::time::timeout(max, done.wait_for(|d| *d)).await;
            return self.status(owner, id);
        }
        // Running on another replica: look again now and then, within `max`.
        let until = Instant::now() + max;
        loop {
            let status = self.status(owner, id);
            let running = matches!(&status, Ok(s) if s.is_running());
            if !running || Instant::now() + REMOTE_POLL > until {
                return status;
            }
            tokio::time::sleep(REMOTE_POLL).await;
        }
    }

    /// Stops a running operation: fires its token (so the upstream is told) and drops the
    /// call. An operation that already finished is not changed; its status is returned.
    pub fn cancel(&self, owner: &Principal, id: &str) -> Result<OperationStatus<T>, StoreError> {
        let now = self.purge_if_due();
        let here = self
            .operations()
            .cancel(owner.as_str(), id, now, &self.limits);
        match (&self.durable, here) {
            // One that ended before a restart keeps its ending; a lost one says so; one
            // running on another replica cannot be stopped from here.
            (Some(durable), Err(StoreError::Unknown { .. })) => {
                match self.stored_status(durable, owner, id)? {
                    OperationStatus::Running { .. } => {
                        Err(StoreError::Elsewhere { id: id.to_string() })
                    }
                    ended => Ok(ended),
                }
            }
            (_, here) => here,
        }
    }

    /// Purges every expired entry now.
    pub fn sweep(&self) {
        let now = Instant::now();
        self.cursors().purge(now, &self.limits);
        self.operations().purge(now, &self.limits);
        if let Some(durable) = &self.durable {
            let mut next = self
                .next_durable_sweep
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if now >= *next {
                *next = now + DURABLE_SWEEP;
                drop(next);
                // Tombstones as long as memory keeps them: six TTLs.
                let ttl = self.limits.cursor_ttl.max(self.limits.operation_ttl);
                durable.sweep(ttl * 6);
            }
        }
    }

    /// What it holds now in memory.
    pub fn stats(&self) -> StoreStats {
        let (cursors, bytes) = self.cursors().stats();
        let (operations, running) = self.operations().stats();
        StoreStats {
            cursors,
            bytes,
            operations,
            running,
        }
    }

    fn purge_if_due(&self) -> Instant {
        let now = Instant::now();
        let mut next = self
            .next_purge
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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

impl<T: Clone + Send + Serialize + DeserializeOwned + 'static> Default for SessionStore<T> {
    fn default() -> Self {
        Self::new(StoreLimits::default())
    }
}
