//! State that outlives one process: the [`Store`] trait and its durable implementation.
//!
//! A store keeps opaque values by kind and id, each with its owner (a principal's name)
//! and a wall-clock expiry. It knows nothing of pages, operations or selections: the
//! modules that own those (`exec/`, `guided/`) encode their own values and keep their
//! in-process tables as the fast path, writing through to the store and reading from it
//! when a handle is not in memory (after a restart). [`Store::lookup`] is where the owner
//! and the expiry are checked, so a foreign or expired handle is told apart from an
//! unknown one for the same messages as in memory.
//!
//! `backend = "memory"` has no store at all (today's in-process tables alone);
//! `"embedded"` is [`EmbeddedStore`] (one redb file, one process), `"redis"` is
//! `RedisStore` (a fleet of replicas sharing one Redis or Valkey; feature `redis`),
//! their values sealed by [`Sealer`]. The modules (`embedded`, `file`, `redis`,
//! `seal`) are private; their API is re-exported here. This module imports nothing else of the crate.

mod embedded;
mod file;
mod open;
pub use embedded::{key_file, EmbeddedStore};
pub use file::{check as check_file, move_aside, FileReport};
pub use open::{OpenError, ResetError};
#[cfg(feature = "redis")]
pub use redis::RedisStore;
pub use seal::{key_file_warning, Sealer};
#[cfg(feature = "redis")]
mod redis;
mod seal;

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a stored value is; each kind is its own table (and its own id space).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The pages of one paged result.
    Pages,
    /// One background operation: running (and where), or its ending.
    Operation,
    /// A tool route chose, for execute by `selectionId`.
    Selection,
    /// A gateway process's heartbeat (shared stores): its operations are still running.
    Replica,
    /// One code-mode `state` value of one principal.
    State,
    /// A finished code-mode run, kept for `propose_skill`.
    Run,
    /// A PII token handed to the model, and the value it stands for.
    Pii,
    /// Route's learned examples (`toolgate_route::Learned`), one value for the whole set.
    Learned,
    /// An upstream's OAuth tokens from `toolgate auth login` (the gateway's own login at it).
    Credential,
}

impl Kind {
    /// Every kind, one table each.
    pub const ALL: [Kind; 9] = [
        Kind::Pages,
        Kind::Operation,
        Kind::Selection,
        Kind::Replica,
        Kind::State,
        Kind::Run,
        Kind::Pii,
        Kind::Learned,
        Kind::Credential,
    ];

    /// The kind's name in tables, keys and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pages => "pages",
            Kind::Operation => "operation",
            Kind::Selection => "selection",
            Kind::Replica => "replica",
            Kind::State => "state",
            Kind::Run => "run",
            Kind::Pii => "pii",
            Kind::Learned => "learned",
            Kind::Credential => "credential",
        }
    }
}

impl Kind {
    /// Whether the ids of this kind can be listed by owner ([`Store::owned`]): operations
    /// (a caller's tasks). The rest are only ever found by id, so a store that needs an
    /// index to list (Redis) keeps none for them.
    pub fn listed(self) -> bool {
        matches!(self, Kind::Operation)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stored value with the facts the store checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The principal that made it (`Principal::as_str`).
    pub owner: String,
    /// Wall-clock expiry, milliseconds since the Unix epoch: a restart keeps the clock.
    pub expires_ms: u64,
    /// The value, as its module encoded it (the store seals it).
    pub value: Vec<u8>,
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The caller's value, live.
    Found(Record),
    /// The id is known but belongs to another owner.
    Foreign,
    /// The id was the caller's but its time ran out (kept a while as a tombstone).
    Expired,
    /// Never stored here, or removed long ago.
    Unknown,
}

/// The store could not do what was asked. Each message names the store, says what is wrong
/// and what to do; a call that needs the store fails with it (nothing is silently dropped),
/// and a call that needs nothing stored does not meet it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreFault {
    /// The store's data is damaged (a bad page, a truncated file, redb tripping over one).
    #[error("the state store {place} is damaged ({detail}): calls that need a value stored there (a cursor, an operation or code mode's state from earlier) fail until it is repaired, other calls keep working (call execute again for a fresh handle); the operator should run `toolgate store check`, then `toolgate store reset` to move the file aside (the gateway then starts a new store by itself, no restart)")]
    Damaged {
        /// Where: the file or server, for the message.
        place: String,
        /// What the backend said.
        detail: String,
    },
    /// The store cannot take more: a full disk or quota, Redis at its `maxmemory`.
    #[error("the state store {place} is full ({detail}): nothing was kept; the operator should free space there ({advice}); the gateway picks the store up again by itself, so try again shortly")]
    Full {
        /// Where: the file or server, for the message.
        place: String,
        /// What the backend said.
        detail: String,
        /// What the operator can free, for this backend.
        advice: &'static str,
    },
    /// The store does not answer now (a server down, an I/O error, another process on the
    /// file); it is dialed or reopened again with backoff.
    #[error("the state store ({backend}) is not answering ({place}: {detail}): nothing was kept or changed; try again shortly (the operator should check the store)")]
    Unavailable {
        /// `embedded` or `redis`.
        backend: &'static str,
        /// Where: the file or server, for the message.
        place: String,
        /// What the backend said.
        detail: String,
    },
    /// One value is larger than the store takes (Redis's `proto-max-bulk-len`, redb's 3 GiB).
    #[error("a value of {bytes} bytes is larger than the state store {place} takes ({detail}): nothing was kept; ask for less (e.g. with fields) so the result needs no paging")]
    TooLarge {
        /// Where: the file or server, for the message.
        place: String,
        /// The value's size.
        bytes: usize,
        /// The backend's limit, in words.
        detail: String,
    },
    /// A value that does not open with the store's key (another key, or altered).
    #[error("a stored {kind} could not be opened: {detail} (was the store key changed? every replica and restart needs the same key)")]
    Unsealed {
        /// The value's kind.
        kind: Kind,
        /// Why it did not open.
        detail: String,
    },
}

impl StoreFault {
    /// Whether the same call may succeed later without anyone changing the value: the
    /// store was full or not answering. A damaged store waits for the operator; a value
    /// too large or sealed with another key stays so.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Full { .. } | Self::Unavailable { .. })
    }

    /// Whether the fault is the store's as a whole (the handle is reopened), not one value's.
    pub fn whole_store(&self) -> bool {
        !matches!(self, Self::TooLarge { .. } | Self::Unsealed { .. })
    }
}

/// Values by kind and id, with owner, expiry and tombstones. Implementations are shared
/// by every request of the process (`Send + Sync`) and do their own locking.
pub trait Store: Send + Sync {
    /// A short name for messages and reports ("embedded", "redis").
    fn backend(&self) -> &'static str;

    /// True when other gateway processes use the same store at once (a fleet): an
    /// operation running under another boot may be alive there.
    fn shared(&self) -> bool {
        false
    }

    /// Stores (or replaces) `id` of `kind`.
    fn put(&self, kind: Kind, id: &str, record: &Record) -> Result<(), StoreFault>;

    /// The record of `id` if `owner` may have it and it has not expired at `now_ms`.
    fn lookup(&self, kind: Kind, id: &str, owner: &str, now_ms: u64) -> Result<Lookup, StoreFault>;

    /// Moves the expiry of `id` (keeps reading alive; a delivered result's grace).
    fn touch(&self, kind: Kind, id: &str, expires_ms: u64) -> Result<(), StoreFault>;

    /// Forgets `id` now, leaving a tombstone so a late use is told "expired".
    fn remove(&self, kind: Kind, id: &str, now_ms: u64) -> Result<(), StoreFault>;

    /// The ids of `kind` that `owner` holds, live at `now_ms` (not removed, not expired),
    /// in no particular order: how `tasks/list` finds a caller's operations on any replica.
    /// Only kinds whose [`Kind::listed`] is true are kept findable this way; others
    /// answer empty on a store that needs an index for it (Redis).
    fn owned(&self, kind: Kind, owner: &str, now_ms: u64) -> Result<Vec<String>, StoreFault>;

    /// Drops the values that expired and the tombstones older than `tombstone_for`;
    /// returns how many values went.
    fn sweep(&self, now_ms: u64, tombstone_for: Duration) -> Result<usize, StoreFault>;
}

/// The facts about one id: `[live: u8][expires_ms: u64 LE][owner bytes]`. A tombstone
/// (live = 0) keeps the owner, and its expiry is when it was buried.
pub(crate) struct Meta {
    pub live: bool,
    pub expires_ms: u64,
    pub owner: String,
}

impl Meta {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.owner.len());
        out.push(u8::from(self.live));
        out.extend_from_slice(&self.expires_ms.to_le_bytes());
        out.extend_from_slice(self.owner.as_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < 9 {
            return None;
        }
        Some(Self {
            live: bytes[0] == 1,
            expires_ms: u64::from_le_bytes(bytes[1..9].try_into().ok()?),
            owner: String::from_utf8(bytes[9..].to_vec()).ok()?,
        })
    }
}

/// Now, in the store's clock (milliseconds since the Unix epoch).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `now_ms() + ttl`.
pub fn expiry_after(ttl: Duration) -> u64 {
    now_ms().saturating_add(ttl.as_millis() as u64)
}
