//! Cursors and operations written through to the durable [`Store`], and read back from it
//! when a handle is not in this process's memory (it was made before a restart).
//!
//! Memory stays the fast path and keeps the bounds; the store keeps what a restart must
//! not lose: every paged result (its pages, owner and expiry) and every operation (running
//! here, or how it ended). An operation the store says is running under another boot of
//! the gateway was lost with that process: it is reported so, never as still running,
//! unless its record says how to follow it again (an upstream's own task), in which case
//! this process takes it over.

use super::limits::{IdKind, StoreError};
use crate::store::{self as st, Kind, Lookup, Record, Store, StoreFault};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// A process's heartbeat lasts this long; one that stopped beating is taken for gone,
/// and its running operations for lost.
pub(crate) const HEARTBEAT_TTL: Duration = Duration::from_secs(15);
const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// The owner heartbeats are stored under (no principal has this form).
const REPLICA_OWNER: &str = "gateway:replica";

/// How an operation stands in the store.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub(crate) enum StoredOperation<T> {
    /// Running in the gateway process whose boot id this is, since `started_ms`. `resume`
    /// is what a later process needs to follow the call if that one stops first (an
    /// upstream's own task: see [`Resume`](super::Resume)); without it, the call is lost
    /// with its process.
    Running {
        boot: String,
        #[serde(default)]
        started_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<serde_json::Value>,
    },
    Done {
        result: T,
        /// When it started (records written before this field was: 0).
        #[serde(default)]
        started_ms: u64,
    },
    Failed {
        message: String,
        #[serde(default)]
        started_ms: u64,
    },
    Cancelled {
        #[serde(default)]
        started_ms: u64,
    },
}

impl<T> StoredOperation<T> {
    /// When the operation started (0 for a record written before the field was).
    pub(crate) fn started_ms(&self) -> u64 {
        match self {
            Self::Running { started_ms, .. }
            | Self::Done { started_ms, .. }
            | Self::Failed { started_ms, .. }
            | Self::Cancelled { started_ms } => *started_ms,
        }
    }
}

/// The store, and this process's boot id (so a record left running by an earlier
/// process is known to be lost).
pub(crate) struct Durable {
    store: Arc<dyn Store>,
    boot: String,
}

impl Durable {
    pub(super) fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            boot: super::tombstones::random_id(),
        }
    }

    pub(super) fn boot(&self) -> &str {
        &self.boot
    }

    pub(super) fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// Whether other processes share the store (and may be running operations).
    pub(super) fn shared(&self) -> bool {
        self.store.shared()
    }

    /// Says this process is alive for [`HEARTBEAT_TTL`] more (shared stores only).
    pub(super) fn beat(&self) -> Result<(), StoreError> {
        self.put(
            Kind::Replica,
            REPLICA_OWNER,
            &self.boot,
            Vec::new(),
            HEARTBEAT_TTL,
        )
    }

    /// Whether an operation the store says runs under `boot` is running on another replica
    /// that is alive (only on a shared store); else its process is gone and it was lost.
    pub(super) fn running_elsewhere(&self, boot: &str) -> Result<bool, StoreError> {
        Ok(self.shared() && boot != self.boot && self.alive(boot)?)
    }

    /// Whether the process `boot` has beaten within [`HEARTBEAT_TTL`].
    pub(super) fn alive(&self, boot: &str) -> Result<bool, StoreError> {
        let found = self
            .store
            .lookup(Kind::Replica, boot, REPLICA_OWNER, st::now_ms())
            .map_err(fault)?;
        Ok(matches!(found, Lookup::Found(_)))
    }

    /// Beats every [`HEARTBEAT_EVERY`] until `stop` fires (inside a tokio runtime).
    pub(super) fn spawn_heartbeat(self: &Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let me = Arc::clone(self);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {
                        let me = me.clone();
                        let beat = tokio::task::spawn_blocking(move || me.beat()).await;
                        if let Ok(Err(e)) = beat {
                            tracing::warn!("state store: heartbeat failed: {e}");
                        }
                    }
                }
            }
        });
    }

    /// A selection (`server` and `name` of the tool route chose).
    pub(super) fn put_selection(&self, owner: &str, id: &str, tool: (&str, &str), ttl: Duration) {
        let value = serde_json::to_vec(&[tool.0, tool.1]).expect("strings serialize");
        if let Err(e) = self.put(Kind::Selection, owner, id, value, ttl) {
            tracing::warn!("a selection was kept in this process only (execute it here, or by the tool's name): {e}");
        }
    }

    /// A selection made by another process (or before a restart); `None` if unknown.
    pub(super) fn selection(
        &self,
        owner: &str,
        id: &str,
        ttl: Duration,
    ) -> Result<Option<(String, String)>, StoreError> {
        let Some(record) = self.lookup(Kind::Selection, IdKind::Selection, owner, id, id, ttl)?
        else {
            return Ok(None);
        };
        let [server, name]: [String; 2] = serde_json::from_slice(&record.value).map_err(|e| {
            down(
                self.backend(),
                format!("a stored selection is damaged: {e}"),
            )
        })?;
        Ok(Some((server, name)))
    }

    pub(super) fn put_pages(
        &self,
        owner: &str,
        id: &str,
        pages: &[String],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let value = serde_json::to_vec(pages).expect("strings serialize");
        self.put(Kind::Pages, owner, id, value, ttl)
    }

    /// The pages kept for result `id` and how long they have left; `None` if the store
    /// does not know the id either.
    pub(super) fn pages(
        &self,
        owner: &str,
        id: &str,
        cursor: &str,
        ttl: Duration,
    ) -> Result<Option<(Vec<String>, Duration)>, StoreError> {
        let Some(record) = self.lookup(Kind::Pages, IdKind::Cursor, owner, id, cursor, ttl)? else {
            return Ok(None);
        };
        let pages = serde_json::from_slice(&record.value)
            .map_err(|e| down(self.backend(), format!("a stored result is damaged: {e}")))?;
        let left = record.expires_ms.saturating_sub(st::now_ms());
        Ok(Some((pages, Duration::from_millis(left))))
    }

    pub(super) fn put_operation<T: Serialize>(
        &self,
        owner: &str,
        id: &str,
        op: &StoredOperation<T>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let value = serde_json::to_vec(op)
            .map_err(|e| down(self.backend(), format!("a result could not be kept: {e}")))?;
        self.put(Kind::Operation, owner, id, value, ttl)
    }

    /// How operation `key` stands in the store; `None` if the store does not know it.
    pub(super) fn operation<T: DeserializeOwned>(
        &self,
        owner: &str,
        key: &str,
        id: &str,
        ttl: Duration,
    ) -> Result<Option<StoredOperation<T>>, StoreError> {
        let Some(record) = self.lookup(Kind::Operation, IdKind::Operation, owner, key, id, ttl)?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&record.value)
            .map(Some)
            .map_err(|e| {
                down(
                    self.backend(),
                    format!("a stored operation is damaged: {e}"),
                )
            })
    }

    /// The ids of `kind` that `owner` holds in the store, live now.
    pub(super) fn owned(&self, kind: Kind, owner: &str) -> Result<Vec<String>, StoreError> {
        self.store.owned(kind, owner, st::now_ms()).map_err(fault)
    }

    /// Moves an expiry; a failure only shortens a TTL, so it is logged, not returned.
    pub(super) fn touch(&self, kind: Kind, id: &str, ttl: Duration) {
        if let Err(e) = self.store.touch(kind, id, st::expiry_after(ttl)) {
            tracing::warn!(%kind, "state store: could not extend an expiry: {e}");
        }
    }

    /// Forgets an evicted handle, so it is not read back after a restart.
    pub(super) fn remove(&self, kind: Kind, id: &str) {
        if let Err(e) = self.store.remove(kind, id, st::now_ms()) {
            tracing::warn!(%kind, "state store: could not remove an evicted entry: {e}");
        }
    }

    pub(super) fn sweep(&self, tombstone_for: Duration) {
        match self.store.sweep(st::now_ms(), tombstone_for) {
            Ok(0) => {}
            Ok(n) => tracing::debug!(n, "state store: expired entries dropped"),
            Err(e) => tracing::warn!("state store: sweep failed: {e}"),
        }
    }

    fn put(
        &self,
        kind: Kind,
        owner: &str,
        id: &str,
        value: Vec<u8>,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let record = Record {
            owner: owner.to_string(),
            expires_ms: st::expiry_after(ttl),
            value,
        };
        self.store.put(kind, id, &record).map_err(fault)
    }

    fn lookup(
        &self,
        kind: Kind,
        id_kind: IdKind,
        owner: &str,
        key: &str,
        shown: &str,
        ttl: Duration,
    ) -> Result<Option<Record>, StoreError> {
        let id = shown.to_string();
        match self
            .store
            .lookup(kind, key, owner, st::now_ms())
            .map_err(fault)?
        {
            Lookup::Found(r) => Ok(Some(r)),
            Lookup::Unknown => Ok(None),
            Lookup::Foreign => Err(StoreError::Foreign { kind: id_kind, id }),
            Lookup::Expired => Err(StoreError::Expired {
                kind: id_kind,
                id,
                ttl,
            }),
        }
    }
}

fn fault(e: StoreFault) -> StoreError {
    StoreError::Store(e)
}

/// A value the store gave back that does not decode: that one record is damaged.
fn down(backend: &'static str, detail: String) -> StoreError {
    fault(StoreFault::Damaged {
        place: format!("({backend})"),
        detail,
    })
}
