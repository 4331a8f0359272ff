//! The shared store of a fleet: Redis (or Valkey), so any replica serves any handle of
//! its caller. Expiry is the server's (`PX` on every key); nothing needs sweeping.
//!
//! Each id has two keys: `toolgate:<kind>:v:<id>`, the sealed value, and
//! `toolgate:<kind>:m:<id>`, its facts (live or tombstone, expiry, owner), which outlive
//! the value by [`TOMBSTONE`] so a late use is told "expired" rather than "unknown".
//! A kind that can be listed by owner ([`Kind::listed`]: operations) also has, per owner,
//! `toolgate:<kind>:o:<owner>`, a sorted set of the owner's ids scored by their expiry, so
//! [`Store::owned`] reads one key rather than scanning the server.
//! One connection per process, serialised by a mutex; a broken one is dropped and the
//! next call dials again (once per call), so a restarted server is picked up by itself.
//! While the server is down every call that needs it fails with a message saying so.

use super::seal::Sealer;
use super::{now_ms, Kind, Lookup, Meta, OpenError, Record, Store, StoreFault};
use redis::{Client, Connection, RedisResult};
use std::sync::Mutex;
use std::time::Duration;

/// How long an id's facts outlive its value.
pub(crate) const TOMBSTONE: Duration = Duration::from_secs(3600);
/// Dialing, and each command, give up after this.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The Redis store, shared by a fleet of replicas (feature `redis`).
pub struct RedisStore {
    client: Client,
    /// `None` until dialed, and after a failure.
    con: Mutex<Option<Connection>>,
    sealer: Sealer,
    /// The URL without its password, for messages.
    shown: String,
    /// The largest value the server takes (`proto-max-bulk-len`, read at start; Redis's
    /// default when the server does not say): a larger one is refused before it is sent,
    /// since the server answers it by closing the connection.
    max_value: usize,
}

/// Redis's default `proto-max-bulk-len`.
const DEFAULT_MAX_VALUE: usize = 512 << 20;

impl RedisStore {
    /// Checks the URL and dials once, so a wrong address stops the gateway at start.
    pub fn open(url: &str, sealer: Sealer) -> Result<Self, OpenError> {
        let shown = without_password(url);
        let client = Client::open(url).map_err(|e| OpenError::RedisUrl {
            shown: shown.clone(),
            source: e,
        })?;
        let store = Self {
            client,
            con: Mutex::new(None),
            sealer,
            shown,
            max_value: DEFAULT_MAX_VALUE,
        };
        store
            .run(|con| redis::cmd("PING").query::<String>(con))
            .map_err(|e| OpenError::Unreachable { source: e })?;
        // A managed server may refuse CONFIG: then its default is assumed.
        let said: Option<Vec<String>> = store
            .run(|con| {
                redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("proto-max-bulk-len")
                    .query(con)
            })
            .ok();
        let max_value = said
            .and_then(|v| v.get(1).and_then(|n| n.parse().ok()))
            .unwrap_or(DEFAULT_MAX_VALUE);
        Ok(Self { max_value, ..store })
    }

    fn key(kind: Kind, part: &str, id: &str) -> String {
        format!("toolgate:{kind}:{part}:{id}")
    }

    fn down(&self, e: impl std::fmt::Display) -> StoreFault {
        StoreFault::Unavailable {
            backend: "redis",
            place: self.shown.clone(),
            detail: e.to_string(),
        }
    }

    /// Redis's refusal as a fault: `OOM` (at `maxmemory` with no eviction) is "full", a
    /// value over `proto-max-bulk-len` is "too large", the rest "not answering".
    fn refused(&self, e: &redis::RedisError, bytes: usize) -> StoreFault {
        let said = e.to_string();
        if e.code() == Some("OOM") || said.contains("OOM") {
            return StoreFault::Full {
                place: format!("(redis, {})", self.shown),
                detail: "Redis answered OOM: it is at its maxmemory".into(),
                advice: "raise Redis's maxmemory, or let it evict with maxmemory-policy volatile-ttl (every toolgate key has a TTL)",
            };
        }
        if said.contains("exceeds maximum allowed size")
            || said.contains("invalid bulk length")
            || said.contains("proto-max-bulk-len")
        {
            return StoreFault::TooLarge {
                place: format!("(redis, {})", self.shown),
                bytes,
                detail: "over Redis's proto-max-bulk-len".into(),
            };
        }
        self.down(e)
    }

    /// Runs `f` on the connection, dialing first if there is none; a connection that
    /// failed is dropped, and an I/O failure on an old one is retried once on a new one.
    fn run<R>(&self, f: impl Fn(&mut Connection) -> RedisResult<R>) -> Result<R, StoreFault> {
        self.run_sized(0, f)
    }

    /// `run` for a write of `bytes`, named if Redis refuses it as too large.
    fn run_sized<R>(
        &self,
        bytes: usize,
        f: impl Fn(&mut Connection) -> RedisResult<R>,
    ) -> Result<R, StoreFault> {
        let mut guard = self.con.lock().unwrap_or_else(|p| p.into_inner());
        for attempt in 0..2 {
            let fresh = guard.is_none();
            if fresh {
                let con = self
                    .client
                    .get_connection_with_timeout(TIMEOUT)
                    .map_err(|e| self.down(e))?;
                con.set_read_timeout(Some(TIMEOUT))
                    .and_then(|_| con.set_write_timeout(Some(TIMEOUT)))
                    .map_err(|e| self.down(e))?;
                *guard = Some(con);
            }
            match f(guard.as_mut().expect("dialed above")) {
                Ok(r) => return Ok(r),
                Err(e) => {
                    *guard = None;
                    let retry =
                        attempt == 0 && !fresh && (e.is_io_error() || e.is_connection_dropped());
                    if !retry {
                        return Err(self.refused(&e, bytes));
                    }
                }
            }
        }
        unreachable!("the second attempt returns")
    }
}

impl Store for RedisStore {
    fn backend(&self) -> &'static str {
        "redis"
    }

    fn shared(&self) -> bool {
        true
    }

    fn put(&self, kind: Kind, id: &str, record: &Record) -> Result<(), StoreFault> {
        let (sealed, meta) = self.sealer.seal_record(kind, id, record);
        let ttl = ttl_ms(record.expires_ms);
        let tomb = ttl + TOMBSTONE.as_millis() as u64;
        if sealed.len() > self.max_value {
            return Err(StoreFault::TooLarge {
                place: format!("(redis, {})", self.shown),
                bytes: sealed.len(),
                detail: format!("Redis's proto-max-bulk-len is {} bytes", self.max_value),
            });
        }
        let (v, m) = (Self::key(kind, "v", id), Self::key(kind, "m", id));
        let index = Self::key(kind, "o", &record.owner);
        self.run_sized(sealed.len(), |con| {
            let mut p = redis::pipe();
            p.atomic()
                .cmd("SET")
                .arg(&v)
                .arg(sealed.as_slice())
                .arg("PX")
                .arg(ttl)
                .ignore()
                .cmd("SET")
                .arg(&m)
                .arg(meta.as_slice())
                .arg("PX")
                .arg(tomb)
                .ignore();
            if kind.listed() {
                // Every value of a kind has the same lifetime, so the latest put's is the
                // longest: the index lives as long as its last entry.
                p.cmd("ZADD")
                    .arg(&index)
                    .arg(record.expires_ms)
                    .arg(id)
                    .ignore()
                    .cmd("PEXPIRE")
                    .arg(&index)
                    .arg(tomb)
                    .ignore();
            }
            p.query::<()>(con)
        })
    }

    fn lookup(&self, kind: Kind, id: &str, owner: &str, now_ms: u64) -> Result<Lookup, StoreFault> {
        let (v, m) = (Self::key(kind, "v", id), Self::key(kind, "m", id));
        let (meta, value): (Option<Vec<u8>>, Option<Vec<u8>>) =
            self.run(|con| redis::cmd("MGET").arg(&m).arg(&v).query(con))?;
        let Some(meta) = meta else {
            return Ok(Lookup::Unknown);
        };
        let Some(meta) = Meta::decode(&meta) else {
            return Err(self.down(format!("the {kind} record {id:?} is damaged")));
        };
        if meta.owner != owner {
            return Ok(Lookup::Foreign);
        }
        let Some(value) = value.filter(|_| meta.live && now_ms < meta.expires_ms) else {
            return Ok(Lookup::Expired);
        };
        let value = self.sealer.open(kind, id, owner, &value)?;
        Ok(Lookup::Found(Record {
            owner: meta.owner,
            expires_ms: meta.expires_ms,
            value,
        }))
    }

    fn touch(&self, kind: Kind, id: &str, expires_ms: u64) -> Result<(), StoreFault> {
        let (v, m) = (Self::key(kind, "v", id), Self::key(kind, "m", id));
        let meta: Option<Vec<u8>> = self.run(|con| redis::cmd("GET").arg(&m).query(con))?;
        let Some(mut meta) = meta.as_deref().and_then(Meta::decode).filter(|m| m.live) else {
            return Ok(());
        };
        meta.expires_ms = expires_ms;
        let ttl = ttl_ms(expires_ms);
        let tomb = ttl + TOMBSTONE.as_millis() as u64;
        let bytes = meta.encode();
        let index = Self::key(kind, "o", &meta.owner);
        self.run(|con| {
            let mut p = redis::pipe();
            p.atomic()
                .cmd("PEXPIRE")
                .arg(&v)
                .arg(ttl)
                .ignore()
                .cmd("SET")
                .arg(&m)
                .arg(bytes.as_slice())
                .arg("PX")
                .arg(tomb)
                .ignore();
            if kind.listed() {
                p.cmd("ZADD")
                    .arg(&index)
                    .arg("XX")
                    .arg(expires_ms)
                    .arg(id)
                    .ignore();
            }
            p.query::<()>(con)
        })
    }

    fn remove(&self, kind: Kind, id: &str, now_ms: u64) -> Result<(), StoreFault> {
        let (v, m) = (Self::key(kind, "v", id), Self::key(kind, "m", id));
        let meta: Option<Vec<u8>> = self.run(|con| redis::cmd("GET").arg(&m).query(con))?;
        let meta = meta.as_deref().and_then(Meta::decode);
        let index = meta
            .as_ref()
            .filter(|_| kind.listed())
            .map(|m| Self::key(kind, "o", &m.owner));
        let tomb = meta.map(|mut t| {
            t.live = false;
            t.expires_ms = now_ms;
            t.encode()
        });
        self.run(|con| {
            let mut p = redis::pipe();
            p.atomic().cmd("DEL").arg(&v).ignore();
            if let Some(index) = &index {
                p.cmd("ZREM").arg(index).arg(id).ignore();
            }
            if let Some(t) = &tomb {
                p.cmd("SET")
                    .arg(&m)
                    .arg(t.as_slice())
                    .arg("PX")
                    .arg(TOMBSTONE.as_millis() as u64)
                    .ignore();
            }
            p.query::<()>(con)
        })
    }

    /// The owner's index, read from `now_ms` on; its expired entries are dropped as it is
    /// read.
    fn owned(&self, kind: Kind, owner: &str, now_ms: u64) -> Result<Vec<String>, StoreFault> {
        if !kind.listed() {
            return Ok(Vec::new());
        }
        let index = Self::key(kind, "o", owner);
        let (ids,): (Vec<String>,) = self.run(|con| {
            redis::pipe()
                .atomic()
                .cmd("ZREMRANGEBYSCORE")
                .arg(&index)
                .arg("-inf")
                .arg(now_ms)
                .ignore()
                .cmd("ZRANGEBYSCORE")
                .arg(&index)
                .arg(format!("({now_ms}"))
                .arg("+inf")
                .query(con)
        })?;
        Ok(ids)
    }

    /// The server expires every key itself.
    fn sweep(&self, _now_ms: u64, _tombstone_for: Duration) -> Result<usize, StoreFault> {
        Ok(0)
    }
}

/// Milliseconds from now until `expires_ms`, at least 1 (`PX` refuses 0).
fn ttl_ms(expires_ms: u64) -> u64 {
    expires_ms.saturating_sub(now_ms()).max(1)
}

/// `redis://user:secret@host` -> `redis://user:***@host`.
fn without_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s + 3 => {
            let user = &url[s + 3..at];
            let user = user.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            super::without_password("redis://app:s3cret@10.0.0.5:6379/2"),
            "redis://app:***@10.0.0.5:6379/2"
        );
        assert_eq!(
            super::without_password("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }
}
