//! The embedded store: one redb file (ACID, one process at a time: redb locks the file).
//!
//! Each kind has two tables: `<kind>` holds the sealed values, `<kind>.meta` the facts
//! checked on every lookup (live or tombstone, expiry, owner), so keeping a cursor alive
//! rewrites a few bytes, not its pages. Writes that add or remove a value commit with
//! `Durability::Immediate` (on disk when `put` returns); expiry moves commit with
//! `Eventual` (they survive a killed process, and a lost one only shortens a TTL).
// redb's own error is large; it lives only inside a transaction closure and becomes a
// small `StoreFault` at once.
#![allow(clippy::result_large_err)]

use super::seal::Sealer;
use super::{Kind, Lookup, Meta, Record, Store, StoreFault};
use redb::{Database, Durability, ReadableTable, TableDefinition};
use std::path::{Path, PathBuf};
use std::time::Duration;

type Table = TableDefinition<'static, &'static str, &'static [u8]>;

fn values(kind: Kind) -> Table {
    TableDefinition::new(match kind {
        Kind::Pages => "pages",
        Kind::Operation => "operation",
        Kind::Selection => "selection",
        Kind::Replica => "replica",
        Kind::State => "state",
        Kind::Run => "run",
        Kind::Pii => "pii",
    })
}

fn metas(kind: Kind) -> Table {
    TableDefinition::new(match kind {
        Kind::Pages => "pages.meta",
        Kind::Operation => "operation.meta",
        Kind::Selection => "selection.meta",
        Kind::Replica => "replica.meta",
        Kind::State => "state.meta",
        Kind::Run => "run.meta",
        Kind::Pii => "pii.meta",
    })
}

pub struct EmbeddedStore {
    db: Database,
    sealer: Sealer,
    path: PathBuf,
}

impl EmbeddedStore {
    /// Opens (or creates) the database at `path`, its folder too. A file another process
    /// holds is refused with a message naming it.
    pub fn open(path: &Path, sealer: Sealer) -> Result<Self, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot make the store folder {}: {e}", dir.display()))?;
        }
        let db = Database::create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => format!(
                "the store {} is in use by another toolgate (one process per embedded store): stop it, or give this one its own [store] path (several replicas share state with backend = \"redis\")",
                path.display()
            ),
            e => format!("cannot open the store {}: {e}", path.display()),
        })?;
        let store = Self {
            db,
            sealer,
            path: path.to_path_buf(),
        };
        // Every table exists from the start, so reads never meet a missing one.
        store
            .write(Durability::Immediate, |tx| {
                for kind in Kind::ALL {
                    tx.open_table(values(kind))?;
                    tx.open_table(metas(kind))?;
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        Ok(store)
    }

    /// Opens the store at `path` with its key: from the variable `key_env` if it is set,
    /// else from the key file beside the database (`<path>.key`, made on first start).
    pub fn open_with_key(path: &Path, key_env: &str) -> Result<Self, String> {
        let sealer = match Sealer::from_env(key_env)? {
            Some(sealer) => sealer,
            None => {
                let mut file = path.as_os_str().to_owned();
                file.push(".key");
                Sealer::from_key_file(Path::new(&file))?
            }
        };
        Self::open(path, sealer)
    }

    /// Whether a sweep would change anything (a read, so a quiet store is not rewritten).
    fn anything_to_sweep(&self, now_ms: u64, keep_ms: u64) -> Result<bool, StoreFault> {
        let tx = self.db.begin_read().map_err(|e| self.down(e))?;
        for kind in Kind::ALL {
            let meta = tx.open_table(metas(kind)).map_err(|e| self.down(e))?;
            for entry in meta.iter().map_err(|e| self.down(e))? {
                let (_, bytes) = entry.map_err(|e| self.down(e))?;
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
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn down(&self, e: impl std::fmt::Display) -> StoreFault {
        StoreFault::Down {
            backend: "embedded",
            detail: format!("{}: {e}", self.path.display()),
        }
    }

    fn write<R>(
        &self,
        durability: Durability,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<R, redb::Error>,
    ) -> Result<R, StoreFault> {
        let mut tx = self.db.begin_write().map_err(|e| self.down(e))?;
        tx.set_durability(durability);
        let out = f(&tx).map_err(|e| self.down(e))?;
        tx.commit().map_err(|e| self.down(e))?;
        Ok(out)
    }
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
        let tx = self.db.begin_read().map_err(|e| self.down(e))?;
        let meta = tx.open_table(metas(kind)).map_err(|e| self.down(e))?;
        let Some(bytes) = meta.get(id).map_err(|e| self.down(e))? else {
            return Ok(Lookup::Unknown);
        };
        let Some(m) = Meta::decode(bytes.value()) else {
            return Err(self.down(format!("the {kind} record {id:?} is damaged")));
        };
        if m.owner != owner {
            return Ok(Lookup::Foreign);
        }
        if !m.live || now_ms >= m.expires_ms {
            return Ok(Lookup::Expired);
        }
        let table = tx.open_table(values(kind)).map_err(|e| self.down(e))?;
        let Some(sealed) = table.get(id).map_err(|e| self.down(e))? else {
            return Ok(Lookup::Expired);
        };
        let value = self.sealer.open(kind, id, owner, sealed.value())?;
        Ok(Lookup::Found(Record {
            owner: m.owner,
            expires_ms: m.expires_ms,
            value,
        }))
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
mod tests {
    use super::*;

    fn open(dir: &Path) -> EmbeddedStore {
        EmbeddedStore::open(&dir.join("state.redb"), Sealer::new([1; 32])).unwrap()
    }

    fn record(owner: &str, expires_ms: u64, value: &[u8]) -> Record {
        Record {
            owner: owner.into(),
            expires_ms,
            value: value.to_vec(),
        }
    }

    #[test]
    fn a_value_survives_reopening_and_is_checked_for_owner_and_expiry() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = open(dir.path());
            s.put(Kind::Pages, "a", &record("alice", 1_000, b"pages"))
                .unwrap();
        }
        let s = open(dir.path());
        assert_eq!(
            s.lookup(Kind::Pages, "a", "alice", 500).unwrap(),
            Lookup::Found(record("alice", 1_000, b"pages"))
        );
        assert_eq!(
            s.lookup(Kind::Pages, "a", "bob", 500).unwrap(),
            Lookup::Foreign
        );
        assert_eq!(
            s.lookup(Kind::Pages, "a", "alice", 1_000).unwrap(),
            Lookup::Expired
        );
        assert_eq!(
            s.lookup(Kind::Operation, "a", "alice", 500).unwrap(),
            Lookup::Unknown
        );
        s.touch(Kind::Pages, "a", 2_000).unwrap();
        assert!(matches!(
            s.lookup(Kind::Pages, "a", "alice", 1_500).unwrap(),
            Lookup::Found(_)
        ));
    }

    #[test]
    fn values_are_not_stored_in_plain_text() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        s.put(
            Kind::Pages,
            "a",
            &record("alice", u64::MAX, b"the-secret-result"),
        )
        .unwrap();
        drop(s);
        let raw = std::fs::read(dir.path().join("state.redb")).unwrap();
        assert!(!raw.windows(10).any(|w| w == b"the-secret"));
    }

    #[test]
    fn a_removed_or_swept_value_leaves_a_tombstone_then_goes() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        s.put(Kind::Operation, "gone", &record("o", 10_000, b"v"))
            .unwrap();
        s.put(Kind::Operation, "old", &record("o", 100, b"v"))
            .unwrap();
        s.remove(Kind::Operation, "gone", 50).unwrap();
        assert_eq!(s.sweep(200, Duration::from_secs(1)).unwrap(), 1);
        for id in ["gone", "old"] {
            assert_eq!(
                s.lookup(Kind::Operation, id, "o", 300).unwrap(),
                Lookup::Expired
            );
            assert_eq!(
                s.lookup(Kind::Operation, id, "x", 300).unwrap(),
                Lookup::Foreign
            );
        }
        s.sweep(5_000, Duration::from_secs(1)).unwrap();
        assert_eq!(
            s.lookup(Kind::Operation, "old", "o", 5_000).unwrap(),
            Lookup::Unknown
        );
    }

    #[test]
    fn a_second_process_on_the_same_file_is_refused_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let _first = open(dir.path());
        let e = EmbeddedStore::open(&dir.path().join("state.redb"), Sealer::new([1; 32]))
            .err()
            .unwrap();
        assert!(e.contains("in use by another toolgate"), "{e}");
    }
}
