//! The embedded store's file: opened with its checks (a zero-byte, truncated or damaged file
//! is refused with its path and what to do, never silently taken for a new store), redb's
//! errors and panics told as a [`StoreFault`], and what `toolgate store check` and
//! `toolgate store reset` do to it.
// redb's own error is large; it lives only here and becomes a small `StoreFault` at once.
#![expect(
    clippy::result_large_err,
    reason = "a StoreFault carries the path and what to do for the operator; faults are rare, so their size costs nothing"
)]

use super::seal::Sealer;
use super::{Kind, Meta, ResetError, StoreFault};
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// What the operator is told to do with a damaged file.
fn advice(path: &Path) -> String {
    format!(
        "move it aside with `toolgate store reset` (or `mv {} {}.damaged`) to start a new store; what it held is lost",
        path.display(),
        path.display()
    )
}

/// Runs `f` (redb work) so that neither its error nor its panic escapes as anything but a
/// [`StoreFault`]: redb asserts on a damaged page, and a panic must not cross a lock.
pub(super) fn guarded<R>(
    path: &Path,
    f: impl FnOnce() -> Result<R, redb::Error>,
) -> Result<R, StoreFault> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(fault(path, e)),
        Err(panic) => Err(panicked(path, panic.as_ref())),
    }
}

/// A panic inside redb: the file is not what redb wrote (or redb's state is broken).
fn panicked(path: &Path, payload: &(dyn std::any::Any + Send)) -> StoreFault {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    StoreFault::Damaged {
        place: path.display().to_string(),
        detail: format!("redb stopped on what it read: {}", first_line(&what)),
    }
}

fn first_line(s: &str) -> &str {
    let line = s.lines().next().unwrap_or("");
    &line[..line.len().min(200)]
}

/// redb's error as a fault: damaged, full, too large, or not answering (retry).
pub(super) fn fault(path: &Path, e: redb::Error) -> StoreFault {
    let place = path.display().to_string();
    let damaged = |detail: String| StoreFault::Damaged {
        place: place.clone(),
        detail,
    };
    let unavailable = |detail: String| StoreFault::Unavailable {
        backend: "embedded",
        place: place.clone(),
        detail,
    };
    match e {
        redb::Error::Corrupted(d) => damaged(format!("redb: {d}")),
        redb::Error::UpgradeRequired(v) => damaged(format!(
            "written in redb file format {v}, which this toolgate does not read"
        )),
        redb::Error::LockPoisoned(at) => damaged(format!("redb stopped after a panic at {at}")),
        redb::Error::ValueTooLarge(bytes) => StoreFault::TooLarge {
            place,
            bytes,
            detail: "redb keeps values up to 3 GiB".into(),
        },
        redb::Error::Io(io) => io_fault(path, &io),
        redb::Error::DatabaseAlreadyOpen => unavailable(
            "in use by another toolgate (one process per embedded store): stop it, or give this one its own [store] path (several replicas share state with backend = \"redis\")".into(),
        ),
        redb::Error::PreviousIo => {
            unavailable("an earlier write failed; the file is being reopened".into())
        }
        e => unavailable(format!("redb: {e}")),
    }
}

/// An I/O error: no space is "full", a file shorter than redb expects is "damaged".
pub(super) fn io_fault(path: &Path, io: &std::io::Error) -> StoreFault {
    let place = path.display().to_string();
    // ENOSPC, EDQUOT, EFBIG: the disk, the quota or the file size limit.
    if matches!(io.raw_os_error(), Some(28 | 122 | 27))
        || io.kind() == std::io::ErrorKind::StorageFull
        || io.kind() == std::io::ErrorKind::QuotaExceeded
    {
        return StoreFault::Full {
            place,
            detail: format!("writing failed: {io}"),
            advice: "free space on its disk, or move [store] path to a larger one",
        };
    }
    if io.kind() == std::io::ErrorKind::UnexpectedEof {
        return StoreFault::Damaged {
            place,
            detail: "the file is shorter than its header says: it was truncated".into(),
        };
    }
    StoreFault::Unavailable {
        backend: "embedded",
        place,
        detail: format!("I/O: {io}"),
    }
}

/// What opening found besides success: said once in the log (and by `store check`).
pub(super) type Notes = Vec<String>;

/// Opens the database at `path` (made when there is no file), checks every page's
/// checksum, and makes the tables. A zero-byte file, a truncated or damaged one is
/// refused with its path, what is wrong and how to move it aside.
pub(super) fn open_db(path: &Path) -> Result<(Database, Notes), StoreFault> {
    let mut notes = Notes::new();
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.len() == 0 {
            return Err(StoreFault::Damaged {
                place: path.display().to_string(),
                detail: format!(
                    "the file is empty (0 bytes): a store that was never finished, or one emptied by accident; it is not taken for a new store. {}",
                    advice(path)
                ),
            });
        }
    }
    let mut db = guarded(path, || Ok(Database::create(path)?))?;
    // A page changed behind redb's back is found here, not by the call that reads it.
    let clean = guarded(path, || Ok(db.check_integrity()?)).map_err(|f| with_advice(path, f))?;
    if !clean {
        notes.push(format!(
            "the state store {} was not whole: redb went back to its last complete commit",
            path.display()
        ));
    }
    guarded(path, || {
        let tx = db.begin_write()?;
        for kind in Kind::ALL {
            tx.open_table(values(kind))?;
            tx.open_table(metas(kind))?;
        }
        tx.commit()?;
        Ok(())
    })
    .map_err(|f| with_advice(path, f))?;
    Ok((db, notes))
}

/// A damaged file's fault, with how to move it aside.
fn with_advice(path: &Path, f: StoreFault) -> StoreFault {
    match f {
        StoreFault::Damaged { place, detail } if !detail.contains("store reset") => {
            StoreFault::Damaged {
                place,
                detail: format!("{detail}; {}", advice(path)),
            }
        }
        f => f,
    }
}

/// What `toolgate store check` found in one file.
#[derive(Debug)]
pub struct FileReport {
    /// The file checked.
    pub path: PathBuf,
    /// The file's size (`None`: there is no file).
    pub bytes: Option<u64>,
    /// Live values per kind, and how many of them did not open with the key given.
    pub kinds: Vec<(Kind, u64, u64)>,
    /// Said about the file (a repair on open).
    pub notes: Notes,
    /// What is wrong, if anything.
    pub fault: Option<StoreFault>,
}

impl FileReport {
    /// True when nothing is wrong and every value opened with the key.
    pub fn ok(&self) -> bool {
        self.fault.is_none() && self.kinds.iter().all(|(_, _, bad)| *bad == 0)
    }
}

/// Opens `path` as the gateway would (refused while a gateway holds it), checks every
/// page, counts the live values of each kind and, with `sealer`, tries each one's seal.
pub fn check(path: &Path, sealer: Option<&Sealer>) -> FileReport {
    let mut report = FileReport {
        path: path.to_path_buf(),
        bytes: std::fs::metadata(path).ok().map(|m| m.len()),
        kinds: Vec::new(),
        notes: Notes::new(),
        fault: None,
    };
    if report.bytes.is_none() {
        return report;
    }
    let (db, notes) = match open_db(path) {
        Ok(x) => x,
        Err(f) => {
            report.fault = Some(f);
            return report;
        }
    };
    report.notes = notes;
    let counted = guarded(path, || {
        let tx = db.begin_read()?;
        let mut kinds = Vec::new();
        for kind in Kind::ALL {
            let meta = tx.open_table(metas(kind))?;
            let table = tx.open_table(values(kind))?;
            let (mut live, mut bad) = (0, 0);
            for entry in table.iter()? {
                let (id, sealed) = entry?;
                live += 1;
                let owner = meta
                    .get(id.value())?
                    .and_then(|m| Meta::decode(m.value()))
                    .map(|m| m.owner);
                let opens = match (sealer, owner) {
                    (None, Some(_)) => true,
                    (Some(s), Some(owner)) => {
                        s.open(kind, id.value(), &owner, sealed.value()).is_ok()
                    }
                    (_, None) => false,
                };
                bad += u64::from(!opens);
            }
            debug_assert_eq!(live, table.len()?);
            kinds.push((kind, live, bad));
        }
        Ok(kinds)
    });
    match counted {
        Ok(kinds) => report.kinds = kinds,
        Err(f) => report.fault = Some(with_advice(path, f)),
    }
    let _ = catch_unwind(AssertUnwindSafe(move || drop(db)));
    report
}

/// `toolgate store reset`: moves the file (and a copy of its key file, which the values in
/// it need) aside to `<path>.damaged-<seconds since the epoch>`, and returns where. Refused
/// while a gateway holds the file: it would keep writing to the moved file.
pub fn move_aside(path: &Path, key_file: Option<&Path>) -> Result<PathBuf, ResetError> {
    let shown = path.display();
    if !path.exists() {
        return Err(ResetError::NoStore {
            path: path.to_path_buf(),
        });
    }
    // redb's lock on the file says whether a gateway has it open; any other outcome of
    // opening it (damaged, truncated, empty) means none has.
    let held = guarded(path, || Ok(Database::open(path)?));
    if let Err(StoreFault::Unavailable { detail, .. }) = &held {
        if detail.starts_with("in use") {
            return Err(ResetError::Held {
                path: path.to_path_buf(),
            });
        }
    }
    if let Ok(db) = held {
        let _ = catch_unwind(AssertUnwindSafe(move || drop(db)));
    }
    let aside = PathBuf::from(format!("{shown}.damaged-{}", super::now_ms() / 1000));
    if let Some(key) = key_file.filter(|k| k.exists()) {
        let copy = PathBuf::from(format!("{}.key", aside.display()));
        std::fs::copy(key, &copy).map_err(|e| ResetError::CopyKey {
            key_file: key.to_path_buf(),
            source: e,
        })?;
    }
    if let Err(e) = std::fs::rename(path, &aside) {
        return Err(ResetError::Move {
            path: path.to_path_buf(),
            aside,
            source: e,
        });
    }
    Ok(aside)
}

pub(super) type Table = TableDefinition<'static, &'static str, &'static [u8]>;

/// The table of `kind`'s sealed values: named as the kind is ([`Kind::as_str`]).
pub(super) fn values(kind: Kind) -> Table {
    TableDefinition::new(kind.as_str())
}

/// The table of `kind`'s facts (owner, expiry, live or tombstone).
pub(super) fn metas(kind: Kind) -> Table {
    TableDefinition::new(match kind {
        Kind::Pages => "pages.meta",
        Kind::Operation => "operation.meta",
        Kind::Selection => "selection.meta",
        Kind::Replica => "replica.meta",
        Kind::State => "state.meta",
        Kind::Run => "run.meta",
        Kind::Pii => "pii.meta",
        Kind::Learned => "learned.meta",
        Kind::Credential => "credential.meta",
    })
}
