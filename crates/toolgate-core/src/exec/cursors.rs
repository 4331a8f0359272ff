//! The pages of over-budget results, kept per owner and named by cursors.
//!
//! A cursor is `pg-<id>-<n>`: the stored result's random id and a page number. Cursors
//! never change meaning, so a retried `continue` with the same cursor gets the same page.

use super::limits::{IdKind, StoreError, StoreLimits};
use super::tombstones::{random_id, Tombstones};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::time::Instant;

/// Where a page stands among the pages kept for one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagePosition {
    /// 0 for the first page kept.
    pub index: usize,
    /// How many pages were kept.
    pub stored: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Cursors {
    /// Result id -> its pages.
    results: HashMap<String, PageSet>,
    /// Ids that expired or were evicted.
    tombs: Tombstones,
    /// Bytes of page text held, against `max_bytes`.
    bytes: usize,
    /// Results evicted to make room since the last `take_evicted` (the durable store
    /// forgets them too, so a restart does not bring them back).
    evicted: Vec<String>,
}

#[derive(Debug)]
struct PageSet {
    owner: Arc<str>,
    pages: Vec<String>,
    bytes: usize,
    /// For choosing what to evict: the least recently used goes first.
    used: Instant,
    expires: Instant,
}

impl Cursors {
    /// Keeps `pages` under a new id; returns the cursor of the first.
    pub(super) fn put(
        &mut self,
        owner: &str,
        mut pages: Vec<String>,
        now: Instant,
        limits: &StoreLimits,
    ) -> Result<String, StoreError> {
        if pages.is_empty() {
            pages.push(String::new());
        }
        let id = random_id();
        self.insert(&id, owner, pages, now, now + limits.cursor_ttl, limits)?;
        Ok(cursor(&id, 0))
    }

    /// Takes in a result read back from the durable store (made before a restart), with
    /// the time it has left.
    pub(super) fn adopt(
        &mut self,
        id: &str,
        owner: &str,
        pages: Vec<String>,
        now: Instant,
        left: std::time::Duration,
        limits: &StoreLimits,
    ) -> Result<(), StoreError> {
        self.insert(id, owner, pages, now, now + left, limits)
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.results.contains_key(id)
    }

    /// Drops a result without a tombstone (it could not be kept durably).
    pub(super) fn forget(&mut self, cursor_text: &str) {
        if let Some(set) = parse(cursor_text).and_then(|(id, _)| self.results.remove(id)) {
            self.bytes -= set.bytes;
        }
    }

    pub(super) fn take_evicted(&mut self) -> Vec<String> {
        std::mem::take(&mut self.evicted)
    }

    fn insert(
        &mut self,
        id: &str,
        owner: &str,
        pages: Vec<String>,
        now: Instant,
        expires: Instant,
        limits: &StoreLimits,
    ) -> Result<(), StoreError> {
        let bytes: usize = pages.iter().map(String::len).sum();
        let limit = limits.max_bytes / 4;
        if bytes > limit {
            return Err(StoreError::TooLarge { bytes, limit });
        }
        self.purge(now, limits);
        // A owner makes room from its own results first: by count, and by bytes so that
        // one busy owner cannot push every other owner's pages out.
        while self.count(owner) >= limits.max_cursors_per_owner.max(1)
            || (self.count(owner) > 0 && self.owner_bytes(owner) + bytes > limit)
        {
            self.evict_oldest(Some(owner), now, limits);
        }
        while !self.results.is_empty()
            && (self.results.len() >= limits.max_cursors.max(1)
                || self.bytes + bytes > limits.max_bytes)
        {
            self.evict_oldest(None, now, limits);
        }
        self.bytes += bytes;
        self.results.insert(
            id.to_string(),
            PageSet {
                owner: owner.into(),
                pages,
                bytes,
                used: now,
                expires,
            },
        );
        Ok(())
    }

    /// The page a cursor names, the cursor of the one after it (none after the last),
    /// and where it stands among the stored pages.
    pub(super) fn next(
        &mut self,
        owner: &str,
        cursor_text: &str,
        now: Instant,
        limits: &StoreLimits,
    ) -> Result<(String, Option<String>, PagePosition), StoreError> {
        let ttl = limits.cursor_ttl;
        let unknown = || StoreError::Unknown {
            kind: IdKind::Cursor,
            id: cursor_text.to_string(),
        };
        let (id, n) = parse(cursor_text).ok_or_else(unknown)?;
        let Some(set) = self.results.get_mut(id) else {
            return Err(self
                .tombs
                .error_for(IdKind::Cursor, cursor_text, id, owner, ttl));
        };
        if &*set.owner != owner {
            return Err(StoreError::Foreign {
                kind: IdKind::Cursor,
                id: cursor_text.to_string(),
            });
        }
        if now >= set.expires {
            self.remove(id.to_string(), now, limits);
            return Err(StoreError::Expired {
                kind: IdKind::Cursor,
                id: cursor_text.to_string(),
                ttl,
            });
        }
        let page = set.pages.get(n).ok_or_else(unknown)?.clone();
        let last = n + 1 == set.pages.len();
        set.used = now;
        // Reading on keeps the rest alive; the last page read leaves a short grace for retries.
        set.expires = now + if last { limits.grace } else { ttl };
        let position = PagePosition {
            index: n,
            stored: set.pages.len(),
        };
        Ok((page, (!last).then(|| cursor(id, n + 1)), position))
    }

    pub(super) fn purge(&mut self, now: Instant, limits: &StoreLimits) {
        let dead: Vec<String> = self
            .results
            .iter()
            .filter(|(_, s)| now >= s.expires)
            .map(|(id, _)| id.clone())
            .collect();
        for id in dead {
            self.remove(id, now, limits);
        }
        self.tombs.purge(now);
    }

    /// (results kept, bytes of page text).
    pub(super) fn stats(&self) -> (usize, usize) {
        (self.results.len(), self.bytes)
    }

    fn count(&self, owner: &str) -> usize {
        self.results.values().filter(|s| &*s.owner == owner).count()
    }

    fn owner_bytes(&self, owner: &str) -> usize {
        self.results
            .values()
            .filter(|s| &*s.owner == owner)
            .map(|s| s.bytes)
            .sum()
    }

    /// Removes the least recently used result (of `owner`, or of anyone).
    fn evict_oldest(&mut self, owner: Option<&str>, now: Instant, limits: &StoreLimits) {
        let oldest = self
            .results
            .iter()
            .filter(|(_, s)| owner.is_none_or(|x| &*s.owner == x))
            .min_by_key(|(_, s)| s.used)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            tracing::debug!(cursor = %crate::principal::redacted(&id), "cursor evicted to make room");
            self.evicted.push(id.clone());
            self.remove(id, now, limits);
        }
    }

    fn remove(&mut self, id: String, now: Instant, limits: &StoreLimits) {
        if let Some(set) = self.results.remove(&id) {
            self.bytes -= set.bytes;
            self.tombs.bury(id, set.owner, now, limits.cursor_ttl);
        }
    }
}

fn cursor(id: &str, n: usize) -> String {
    format!("pg-{id}-{n}")
}

/// `pg-<id>-<n>` -> (id, n).
pub(crate) fn parse(cursor: &str) -> Option<(&str, usize)> {
    let (id, n) = cursor.strip_prefix("pg-")?.rsplit_once('-')?;
    Some((id, n.parse().ok()?))
}
