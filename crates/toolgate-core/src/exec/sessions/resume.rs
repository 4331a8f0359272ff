//! Operations that outlive their process: a call started by
//! [`SessionStore::start_resumable`] may keep a note of how to follow it
//! ([`Resumable::keep`]), and an operation a stopped process left running with a note is
//! taken over by the process asked after it ([`Resume`], set with
//! [`SessionStore::set_resumer`]), under the same id and owner.

use super::{Durable, OperationStatus, Operations, SessionStore, StoreError, StoredOperation};
use crate::call::Progress;
use crate::principal::Principal;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a gateway follows again an operation a stopped process left running, given the
/// note the call left of how to ([`Resumable::keep`]): the future it returns is the
/// operation from now on, under the same id and owner. A note it cannot use is an `Err`
/// saying why (kept as the operation's failure).
pub trait Resume<T>: Send + Sync {
    /// The call `note` describes, for `owner`, cancelled by `cancel`.
    fn resume(
        &self,
        owner: &Principal,
        note: serde_json::Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<T, String>>;
}

/// Given to a call started by [`SessionStore::start_resumable`]: where it keeps how a later
/// process can follow it. Does nothing without a durable store.
pub struct Resumable<T>(pub(super) Option<Arc<ResumableInner<T>>>);

impl<T> Clone for Resumable<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

pub(super) struct ResumableInner<T> {
    pub(super) durable: Arc<Durable>,
    pub(super) operations: Arc<Mutex<Operations<T>>>,
    pub(super) key: Arc<Mutex<String>>,
    pub(super) owner: Principal,
    pub(super) started_ms: u64,
    pub(super) ttl: Duration,
}

impl<T: Clone + Send + Serialize + 'static> Resumable<T> {
    /// Keeps `note` with the running operation's record: after a restart (or on another
    /// replica once this one is gone), the operation is followed again from it. An
    /// ending already recorded stands.
    pub fn keep(&self, note: serde_json::Value) {
        let Some(inner) = &self.0 else { return };
        // Filled (and the running record written) before the lock is let go.
        let key = inner.key.lock().unwrap_or_else(PoisonError::into_inner);
        let running: StoredOperation<T> = StoredOperation::Running {
            boot: inner.durable.boot().to_string(),
            started_ms: inner.started_ms,
            resume: Some(note),
        };
        let owner = inner.owner.as_str();
        if let Err(e) = inner
            .durable
            .put_operation(owner, &key, &running, inner.ttl)
        {
            tracing::warn!("how to follow an operation after a restart was not kept (it is lost if this process stops first): {e}");
        }
        // The call may have ended meanwhile: its ending was (or is about to be) written,
        // and is written again so the note does not stand over it.
        let ended = (inner
            .operations
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
        .ending(&key);
        if let Some(stored) = ended.and_then(|s| ending_record(&s, inner.started_ms)) {
            let _ = inner.durable.put_operation(owner, &key, &stored, inner.ttl);
        }
    }
}

/// The record of an operation that ended with `status` (`None` while it runs).
pub(super) fn ending_record<T: Clone>(
    status: &OperationStatus<T>,
    started_ms: u64,
) -> Option<StoredOperation<T>> {
    Some(match status {
        OperationStatus::Done(v) => StoredOperation::Done {
            result: v.clone(),
            started_ms,
        },
        OperationStatus::Failed(m) => StoredOperation::Failed {
            message: m.clone(),
            started_ms,
        },
        OperationStatus::Cancelled => StoredOperation::Cancelled { started_ms },
        OperationStatus::Running { .. } => return None,
    })
}

/// An operation's id from its table key.
fn op_id_of(key: &str) -> String {
    format!("op-{key}")
}

impl<T: Clone + Send + Serialize + DeserializeOwned + 'static> SessionStore<T> {
    /// [`start`](Self::start), with a [`Resumable`] the call may tell how a later process
    /// can follow it (kept with the operation's record), so that after a restart the
    /// operation is taken over by the [`Resume`] given to [`set_resumer`](Self::set_resumer)
    /// rather than reported lost.
    pub fn start_resumable<F, Fut, E>(
        &self,
        owner: &Principal,
        call: F,
    ) -> Result<String, StoreError>
    where
        F: FnOnce(CancellationToken, mpsc::UnboundedSender<Progress>, Resumable<T>) -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        self.launch(owner, None, call)
    }

    /// How this process follows an operation an earlier one left running with a note of
    /// how to (set once, by the gateway; without it such an operation is reported lost).
    pub fn set_resumer(&self, resumer: Arc<dyn Resume<T>>) {
        let _ = self.resumer.set(resumer);
    }

    /// Takes over the operation `key` of `owner`, which a process that is gone left
    /// running with `note` (how to follow it), if a resumer is set: it runs here from now
    /// on. `None`: it cannot be, and stays lost.
    pub(super) fn adopt(
        &self,
        owner: &Principal,
        key: &str,
        started_ms: u64,
        note: serde_json::Value,
    ) -> Option<OperationStatus<T>> {
        let resumer = self.resumer.get()?.clone();
        let adopted = Some((key, started_ms, note.clone()));
        let (who, id) = (owner.clone(), op_id_of(key));
        let launched = self.launch(owner, adopted, move |ct, _progress, _| {
            resumer.resume(&who, note, ct)
        });
        if let Err(e) = launched {
            tracing::warn!(
                "an operation left running by a gateway that stopped was not taken over: {e}"
            );
            return None;
        }
        tracing::info!(operation = %crate::principal::redacted(key), "took over an operation left running by a gateway that stopped");
        let now = Instant::now();
        (self.operations())
            .status(owner.as_str(), &id, now, &self.limits)
            .ok()
    }
}
