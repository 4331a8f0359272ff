//! Why a store could not be opened or reset: typed, with the source kept, in the words the
//! operator reads (`toolgate serve` stops with an [`OpenError`], `toolgate store reset`
//! with a [`ResetError`]).

use super::StoreFault;
use std::path::PathBuf;

/// Why a store (or its key) could not be opened. Each message names the file, variable or
/// URL and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The key is not hex.
    #[error("{place}: the store key must be 64 hex digits ({source}); make one with `openssl rand -hex 32`")]
    KeyNotHex {
        /// Where the key came from: the variable's name or the key file's path.
        place: String,
        /// What decoding said.
        source: hex::FromHexError,
    },
    /// The key is hex, but not 32 bytes.
    #[error("{place}: the store key must be 32 bytes (64 hex digits), not {bytes}; make one with `openssl rand -hex 32`")]
    KeyLength {
        /// Where the key came from: the variable's name or the key file's path.
        place: String,
        /// The bytes it has.
        bytes: usize,
    },
    /// A new key file could not be written.
    #[error("cannot write the store key file {}: {source}", .path.display())]
    KeyFileWrite {
        /// The key file.
        path: PathBuf,
        /// What writing said.
        source: std::io::Error,
    },
    /// The key file exists but could not be read.
    #[error("cannot read the store key file {}: {source}", .path.display())]
    KeyFileRead {
        /// The key file.
        path: PathBuf,
        /// What reading said.
        source: std::io::Error,
    },
    /// The store exists without its key file (a new key would make every value unreadable).
    #[error("the store {} exists but its key file {} is missing: every value in the store was sealed with that key, and a new key would make each stored handle fail later. Put the key file back, or set {key_env} to the key; to start afresh instead, move the store aside with `toolgate store reset`", .path.display(), .key_file.display())]
    KeyFileMissing {
        /// The store's file.
        path: PathBuf,
        /// Where its key file should be.
        key_file: PathBuf,
        /// The variable that may hold the key instead.
        key_env: String,
    },
    /// The store's folder could not be made.
    #[error("cannot make the store folder {}: {source}", .dir.display())]
    Folder {
        /// The folder.
        dir: PathBuf,
        /// What making it said.
        source: std::io::Error,
    },
    /// Another process holds the file.
    #[error("the store {} is {}", .path.display(), held_detail(.source))]
    InUse {
        /// The store's file.
        path: PathBuf,
        /// The fault opening it met (`Unavailable`, "in use ...").
        source: StoreFault,
    },
    /// The file could not be opened: damaged, truncated, empty, unreadable.
    #[error("cannot open the store: {source}")]
    File {
        /// What opening it met.
        source: StoreFault,
    },
    /// `store.url` is not a Redis URL.
    #[cfg(feature = "redis")]
    #[error("store.url {shown:?} is not a Redis URL ({source}): write redis://HOST:PORT[/DB]")]
    RedisUrl {
        /// The URL without its password.
        shown: String,
        /// What the client said.
        source: redis::RedisError,
    },
    /// The Redis server did not answer the first dial.
    #[error("{source}")]
    Unreachable {
        /// The fault dialing it met.
        source: StoreFault,
    },
}

/// The detail of an `Unavailable` fault (what `InUse` says after "is").
fn held_detail(fault: &StoreFault) -> &str {
    match fault {
        StoreFault::Unavailable { detail, .. } => detail,
        _ => "",
    }
}

impl OpenError {
    /// A short, stable name of what went wrong (for logs and metrics labels).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::KeyNotHex { .. } | Self::KeyLength { .. } => "bad_key",
            Self::KeyFileWrite { .. } | Self::KeyFileRead { .. } => "key_file",
            Self::KeyFileMissing { .. } => "key_file_missing",
            Self::Folder { .. } => "folder",
            Self::InUse { .. } => "in_use",
            Self::File { .. } => "file",
            #[cfg(feature = "redis")]
            Self::RedisUrl { .. } => "redis_url",
            Self::Unreachable { .. } => "unreachable",
        }
    }

    /// Whether opening again later may succeed with nothing changed: another process held
    /// the file, or the store was full or not answering. A bad key, a missing key file or
    /// a damaged store waits for the operator.
    pub fn retryable(&self) -> bool {
        match self {
            Self::InUse { .. } => true,
            Self::File { source } | Self::Unreachable { source } => source.retryable(),
            _ => false,
        }
    }
}

/// Why `toolgate store reset` did not move the store aside.
#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    /// There is no file at the path.
    #[error("there is no store at {}: nothing to reset", .path.display())]
    NoStore {
        /// The store's file.
        path: PathBuf,
    },
    /// A running gateway holds the file (it would keep writing to the moved file).
    #[error("the store {} is open in a running toolgate, which is using it (a gateway lets go of a damaged store by itself): stop that gateway first, then reset", .path.display())]
    Held {
        /// The store's file.
        path: PathBuf,
    },
    /// The key file could not be copied beside the moved store.
    #[error("cannot copy the key file {}: {source}", .key_file.display())]
    CopyKey {
        /// The key file.
        key_file: PathBuf,
        /// What copying said.
        source: std::io::Error,
    },
    /// The file could not be renamed.
    #[error("cannot move {} to {}: {source}", .path.display(), .aside.display())]
    Move {
        /// The store's file.
        path: PathBuf,
        /// Where it was to go.
        aside: PathBuf,
        /// What renaming said.
        source: std::io::Error,
    },
}

impl ResetError {
    /// A short, stable name of what went wrong (for logs and metrics labels).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoStore { .. } => "no_store",
            Self::Held { .. } => "held",
            Self::CopyKey { .. } => "copy_key",
            Self::Move { .. } => "move",
        }
    }
}
