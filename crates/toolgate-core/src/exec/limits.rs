//! What the session store keeps and for how long ([`StoreLimits`]), what a handle is
//! ([`IdKind`]), and why a handle or a new operation is refused ([`StoreError`]).

use std::fmt;
use std::time::Duration;

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
    /// A `continue` cursor over a paged result.
    Cursor,
    /// A running or finished operation.
    Operation,
    /// A route selection (`selectionId`).
    Selection,
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cursor => "cursor",
            Self::Operation => "operation",
            Self::Selection => "selectionId",
        })
    }
}

/// Why `continue` (or starting an operation) could not be served. Every message says
/// what the model should do next; the front returns it as an `isError` tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The id was never issued here, or was forgotten long ago.
    #[error("unknown {kind} {id:?}: it was not issued by this gateway (check it was copied exactly) or was cleaned up long ago; call execute again")]
    Unknown {
        /// What the id names.
        kind: IdKind,
        /// The id as the caller sent it.
        id: String,
    },
    /// The id's time ran out.
    #[error("{kind} {id:?} expired (results are kept {} s after last use, less when one caller keeps many); call execute again", .ttl.as_secs())]
    Expired {
        /// What the id names.
        kind: IdKind,
        /// The id as the caller sent it.
        id: String,
        /// How long such ids are kept after last use.
        ttl: Duration,
    },
    /// The id belongs to another principal.
    #[error("{kind} {id:?} belongs to another caller (a different API key or user) and works only for the one that made it; call execute again")]
    Foreign {
        /// What the id names.
        kind: IdKind,
        /// The id as the caller sent it.
        id: String,
    },
    /// The caller already runs as many operations as one principal may.
    #[error("this caller (its API key, over all its connections) already has {limit} operations running; follow one with continue or stop one with cancel: true before starting another")]
    TooManyOperations {
        /// Operations one principal may run at once.
        limit: usize,
    },
    /// The gateway already runs as many operations as it may.
    #[error("the gateway is already running {limit} operations; try again shortly")]
    Busy {
        /// Operations the gateway may run at once.
        limit: usize,
    },
    /// The result is larger than the store keeps for paging.
    #[error("the result is too large to keep for paging ({bytes} bytes, at most {limit}); ask for less, e.g. with fields")]
    TooLarge {
        /// The result's size.
        bytes: usize,
        /// The most one result may take.
        limit: usize,
    },
    /// The operation's process restarted before it finished.
    #[error("operation {id:?} was lost: the gateway restarted before it finished, so no result was kept; call execute again (the upstream may have run it already: check first if the call changes something)")]
    Lost {
        /// The operation's id.
        id: String,
    },
    /// The operation runs on another replica.
    #[error("operation {id:?} runs on another replica of this gateway: follow it with continue from any replica; it can be cancelled only on the one running it (call continue with cancel: true again, a later request may reach it)")]
    Elsewhere {
        /// The operation's id.
        id: String,
    },
    /// The durable store failed; the message names it and says what to do.
    #[error("{0}")]
    Store(crate::store::StoreFault),
}

/// What the store holds now (for status reports and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Cursors held in memory.
    pub cursors: usize,
    /// Bytes of pages held in memory.
    pub bytes: usize,
    /// Operations held, running or finished.
    pub operations: usize,
    /// Operations still running.
    pub running: usize,
}
