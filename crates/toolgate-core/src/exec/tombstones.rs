//! Handle ids, and the tombstones purged ones leave so a late use is told "expired" (or
//! "another owner's") instead of "unknown".

use super::limits::{IdKind, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

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
