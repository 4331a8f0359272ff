//! The embedded store: one redb file (ACID, one process at a time: redb locks the file).
//!
//! Each kind has two tables: `<kind>` holds the sealed values, `<kind>.meta` the facts
//! checked on every lookup (live or tombstone, expiry, owner), so keeping a cursor alive
//! rewrites a few bytes, not its pages. Writes that add or remove a value commit with
//! `Durability::Immediate` (on disk when `put` returns); expiry moves commit with
//! `Eventual` (they survive a killed process, and a lost one only shortens a TTL).
//!
//! A fault costs only the calls that meet it. Every redb call runs under `catch_unwind`
//! (redb asserts on a damaged page; `store::file::guarded`); on a fault of the whole
//! store (damaged, full, I/O) the database is let go of, and the next call that needs it
//! reopens it, with every check of a start, at most once per backoff ([`BACKOFF_MAX`]):
//! the store heals by itself once the file is good or the disk has room again (no
//! restart), and a file the operator moved aside (`toolgate store reset`) is started anew.
// redb's own error is large; it lives only inside a transaction closure and becomes a
// small `StoreFault` at once.
#![expect(
    clippy::result_large_err,
    reason = "a StoreFault carries the path and what to do for the operator; faults are rare, so their size costs nothing"
)]

use super::file::{guarded, metas, open_db, values};
use super::seal::Sealer;
use super::{Kind, Lookup, Meta, OpenError, Record, Store, StoreFault};
use redb::{Database, Durability, ReadableTable};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The first wait before reopening a store that failed, doubled on each failure up to
/// [`BACKOFF_MAX`]: calls in between get the last fault at once, without touching the disk.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two reopening attempts: how late, at most, a healed store is
/// noticed.
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The embedded store: one redb file, for one process.
pub struct EmbeddedStore {
    /// The open database; `None` after a fault of the whole store, until reopened.
    db: RwLock<Option<Arc<Database>>>,
    /// Why the store is closed and when it may be reopened.
    health: Mutex<Health>,
    sealer: Sealer,
    path: PathBuf,
    /// The file the open database was opened on (its inode), and when it was last looked
    /// at: a file removed, replaced or emptied behind redb's back closes the store.
    watched: Mutex<(u64, Instant)>,
}

/// How often the file is looked at (one `stat`).
const WATCH_EVERY: Duration = Duration::from_millis(500);

/// The file's inode (0 where there is none).
fn inode(path: &Path) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).map_or(0, |m| m.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        0
    }
}

/// The last fault of the whole store and the backoff before the next reopening.
struct Health {
    fault: Option<StoreFault>,
    retry_at: Instant,
    backoff: Duration,
}

impl EmbeddedStore {
    /// Opens (or creates) the database at `path`, its folder too. A file another process
    /// holds, an empty, truncated or damaged one is refused with a message naming it and
    /// saying what to do.
    pub fn open(path: &Path, sealer: Sealer) -> Result<Self, OpenError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| OpenError::Folder {
                dir: dir.to_path_buf(),
                source: e,
            })?;
        }
        let (db, notes) = open_db(path).map_err(|e| match e {
            StoreFault::Unavailable { ref detail, .. } if detail.starts_with("in use") => {
                OpenError::InUse {
                    path: path.to_path_buf(),
                    source: e,
                }
            }
            e => OpenError::File { source: e },
        })?;
        for note in notes {
            tracing::warn!("{note}");
        }
        Ok(Self {
            db: RwLock::new(Some(Arc::new(db))),
            health: Mutex::new(Health {
                fault: None,
                retry_at: Instant::now(),
                backoff: BACKOFF_FIRST,
            }),
            sealer,
            path: path.to_path_buf(),
            watched: Mutex::new((inode(path), Instant::now())),
        })
    }

    /// Opens the store at `path` with its key: from the variable `key_env` if it is set,
    /// else from the key file beside the database (`<path>.key`, made on first start).
    /// A store that exists without its key file is refused (a new key would make every
    /// value in it unreadable); a key file others may read is warned about.
    pub fn open_with_key(path: &Path, key_env: &str) -> Result<Self, OpenError> {
        let sealer = match Sealer::from_env(key_env)? {
            Some(sealer) => sealer,
            None => {
                let file = key_file(path);
                let store_exists = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
                if store_exists && !file.exists() {
                    return Err(OpenError::KeyFileMissing {
                        path: path.to_path_buf(),
                        key_file: file,
                        key_env: key_env.to_string(),
                    });
                }
                if let Some(warning) = super::seal::key_file_warning(&file) {
                    tracing::warn!("{warning}");
                }
                Sealer::from_key_file(&file)?
            }
        };
        Self::open(path, sealer)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open database, reopened first if a fault closed it and its backoff is over.
    fn handle(&self) -> Result<Arc<Database>, StoreFault> {
        if let Some(db) = self.db.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return Ok(db.clone());
        }
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        // Another call may have reopened it while this one waited.
        if let Some(db) = self.db.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return Ok(db.clone());
        }
        let now = Instant::now();
        if now < health.retry_at {
            if let Some(fault) = &health.fault {
                return Err(fault.clone());
            }
        }
        match open_db(&self.path) {
            Ok((db, notes)) => {
                for note in notes {
                    tracing::warn!("{note}");
                }
                let db = Arc::new(db);
                *self.watched.lock().unwrap_or_else(|p| p.into_inner()) =
                    (inode(&self.path), Instant::now());
                *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(db.clone());
                health.fault = None;
                health.backoff = BACKOFF_FIRST;
                tracing::info!(path = %self.path.display(), "state store: reopened, serving again");
                Ok(db)
            }
            Err(fault) => {
                health.retry_at = now + health.backoff;
                health.backoff = (health.backoff * 2).min(BACKOFF_MAX);
                if health.fault.as_ref() != Some(&fault) {
                    tracing::warn!("state store: still closed: {fault}");
                }
                health.fault = Some(fault.clone());
                Err(fault)
            }
        }
    }

    /// Lets go of `db` after a fault of the whole store: the next call reopens the file
    /// (after the backoff), so a healed disk or a replaced file is picked up.
    fn close(&self, db: Arc<Database>, fault: &StoreFault) {
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        {
            let mut slot = self.db.write().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_some_and(|open| Arc::ptr_eq(open, &db)) {
                *slot = None;
                tracing::error!("state store: closed after a fault (reopened by itself once it is gone): {fault}");
                health.retry_at = Instant::now() + health.backoff;
                health.backoff = (health.backoff * 2).min(BACKOFF_MAX);
            }
        }
        health.fault = Some(fault.clone());
        drop(health);
        release(db);
    }

    /// At most every [`WATCH_EVERY`]: whether the file was removed, replaced or emptied
    /// under the open database (redb would go on writing to what is no longer the store).
    fn file_changed(&self) -> Option<StoreFault> {
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        if watched.1.elapsed() < WATCH_EVERY {
            return None;
        }
        watched.1 = Instant::now();
        let what = match std::fs::metadata(&self.path) {
            Err(_) => "removed or moved away",
            Ok(m) if m.len() == 0 => "emptied (0 bytes)",
            Ok(_) if inode(&self.path) != watched.0 => "replaced by another file",
            Ok(_) => return None,
        };
        Some(StoreFault::Damaged {
            place: self.path.display().to_string(),
            detail: format!("the file was {what} while the gateway had it open"),
        })
    }

    /// Runs `f` on the database, so that a panic or an error inside redb becomes this
    /// call's [`StoreFault`] (and closes the store if it is the whole store's).
    fn run<R>(&self, f: impl FnOnce(&Database) -> Result<R, redb::Error>) -> Result<R, StoreFault> {
        let db = self.handle()?;
        if let Some(fault) = self.file_changed() {
            self.close(db, &fault);
            return Err(fault);
        }
        let out = guarded(&self.path, || f(&db));
        match &out {
            Err(fault) if fault.whole_store() => self.close(db, fault),
            _ => release(db),
        }
        out
    }

    fn write<R>(
        &self,
        durability: Durability,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<R, redb::Error>,
    ) -> Result<R, StoreFault> {
        self.run(|db| {
            let mut tx = db.begin_write()?;
            tx.set_durability(durability);
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    /// Whether a sweep would change anything (a read, so a quiet store is not rewritten).
    fn anything_to_sweep(&self, now_ms: u64, keep_ms: u64) -> Result<bool, StoreFault> {
        self.run(|db| {
            let tx = db.begin_read()?;
            for kind in Kind::ALL {
                let meta = tx.open_table(metas(kind))?;
                for entry in meta.iter()? {
                    let (_, bytes) = entry?;
                    let due = Meta::decode(bytes.value()).is_none_or(|m| {
                        let until = if m.live {
                            m.expires_ms
                        } else {
                            m.expires_ms.saturating_add(keep_ms)
                        };
                        now_ms >= until
                    });
                    if due {
                        return Ok(true);
                    }
                }
            }
            Ok(false)
        })
    }

    fn damaged_record(&self, kind: Kind, id: &str) -> StoreFault {
        StoreFault::Damaged {
            place: self.path.display().to_string(),
            detail: format!("the facts of {kind} {id:?} do not decode"),
        }
    }
}

/// `<path>.key`: where the embedded store's key file is.
pub fn key_file(path: &Path) -> PathBuf {
    let mut file = path.as_os_str().to_owned();
    file.push(".key");
    PathBuf::from(file)
}

/// Drops a handle to the database; the last one closes the file, which redb may try to
/// write to and trip over (after a fault): never past this point.
fn release(db: Arc<Database>) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(db)));
}

impl Store for EmbeddedStore {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    fn put(&self, kind: Kind, id: &str, record: &Record) -> Result<(), StoreFault> {
        let (sealed, meta) = self.sealer.seal_record(kind, id, record);
        self.write(Durability::Immediate, |tx| {
            tx.open_table(values(kind))?.insert(id, sealed.as_slice())?;
            tx.open_table(metas(kind))?.insert(id, meta.as_slice())?;
            Ok(())
        })
    }

    fn lookup(&self, kind: Kind, id: &str, owner: &str, now_ms: u64) -> Result<Lookup, StoreFault> {
        // `None`: undecodable facts (one record damaged, not the whole store).
        let found = self.run(|db| {
            let tx = db.begin_read()?;
            let meta = tx.open_table(metas(kind))?;
            let Some(bytes) = meta.get(id)? else {
                return Ok(Some((Lookup::Unknown, None)));
            };
            let Some(m) = Meta::decode(bytes.value()) else {
                return Ok(None);
            };
            if m.owner != owner {
                return Ok(Some((Lookup::Foreign, None)));
            }
            if !m.live || now_ms >= m.expires_ms {
                return Ok(Some((Lookup::Expired, None)));
            }
            let table = tx.open_table(values(kind))?;
            let Some(sealed) = table.get(id)? else {
                return Ok(Some((Lookup::Expired, None)));
            };
            Ok(Some((Lookup::Unknown, Some((m, sealed.value().to_vec())))))
        })?;
        match found {
            None => Err(self.damaged_record(kind, id)),
            Some((_, Some((m, sealed)))) => {
                let value = self.sealer.open(kind, id, owner, &sealed)?;
                Ok(Lookup::Found(Record {
                    owner: m.owner,
                    expires_ms: m.expires_ms,
                    value,
                }))
            }
            Some((lookup, None)) => Ok(lookup),
        }
    }

    fn touch(&self, kind: Kind, id: &str, expires_ms: u64) -> Result<(), StoreFault> {
        self.write(Durability::Eventual, |tx| {
            let mut meta = tx.open_table(metas(kind))?;
            let current = meta.get(id)?.and_then(|b| Meta::decode(b.value()));
            if let Some(mut m) = current.filter(|m| m.live) {
                m.expires_ms = expires_ms;
                meta.insert(id, m.encode().as_slice())?;
            }
            Ok(())
        })
    }

    fn remove(&self, kind: Kind, id: &str, now_ms: u64) -> Result<(), StoreFault> {
        self.write(Durability::Immediate, |tx| {
            tx.open_table(values(kind))?.remove(id)?;
            let mut meta = tx.open_table(metas(kind))?;
            let current = meta.get(id)?.and_then(|b| Meta::decode(b.value()));
            if let Some(mut m) = current {
                m.live = false;
                m.expires_ms = now_ms;
                meta.insert(id, m.encode().as_slice())?;
            }
            Ok(())
        })
    }

    /// A pass over the kind's facts (every kind can be listed here; the table is bounded
    /// by the operation limits and the sweep).
    fn owned(&self, kind: Kind, owner: &str, now_ms: u64) -> Result<Vec<String>, StoreFault> {
        self.run(|db| {
            let tx = db.begin_read()?;
            let meta = tx.open_table(metas(kind))?;
            let mut ids = Vec::new();
            for entry in meta.iter()? {
                let (id, bytes) = entry?;
                // An undecodable record is skipped here: its own lookup names it.
                let live = Meta::decode(bytes.value())
                    .is_some_and(|m| m.live && now_ms < m.expires_ms && m.owner == owner);
                if live {
                    ids.push(id.value().to_string());
                }
            }
            Ok(ids)
        })
    }

    fn sweep(&self, now_ms: u64, tombstone_for: Duration) -> Result<usize, StoreFault> {
        let keep_ms = tombstone_for.as_millis() as u64;
        if !self.anything_to_sweep(now_ms, keep_ms)? {
            return Ok(0);
        }
        self.write(Durability::Immediate, |tx| {
            let mut dropped = 0;
            for kind in Kind::ALL {
                let mut meta = tx.open_table(metas(kind))?;
                let mut bury = Vec::new();
                let mut forget = Vec::new();
                for entry in meta.iter()? {
                    let (id, bytes) = entry?;
                    let Some(m) = Meta::decode(bytes.value()) else {
                        forget.push(id.value().to_string());
                        continue;
                    };
                    if m.live && now_ms >= m.expires_ms {
                        bury.push((id.value().to_string(), m));
                    } else if !m.live && now_ms >= m.expires_ms.saturating_add(keep_ms) {
                        forget.push(id.value().to_string());
                    }
                }
                let mut table = tx.open_table(values(kind))?;
                for (id, mut m) in bury {
                    table.remove(id.as_str())?;
                    m.live = false;
                    m.expires_ms = now_ms;
                    meta.insert(id.as_str(), m.encode().as_slice())?;
                    dropped += 1;
                }
                for id in forget {
                    table.remove(id.as_str())?;
                    meta.remove(id.as_str())?;
                }
            }
            Ok(dropped)
        })
    }
}

#[cfg(test)]
#[path = "embedded_tests.rs"]
mod tests;
