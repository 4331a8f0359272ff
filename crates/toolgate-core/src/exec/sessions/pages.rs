//! Paged results and route's selections: the cursors `continue` reads pages with, kept in
//! memory and, with a durable store, written there too so that another replica or a
//! restarted gateway can continue them; and route's selections, kept the same way.

use super::cursors::{self, PagePosition};
use super::SessionStore;
use super::{IdKind, StoreError};
use crate::principal::Principal;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;

impl<T: Clone + Send + Serialize + DeserializeOwned + 'static> SessionStore<T> {
    /// Keeps a selection of route's in the durable store too (for another replica, or
    /// after a restart). `tool` is (server, name).
    pub fn keep_selection(&self, owner: &Principal, id: &str, tool: (&str, &str), ttl: Duration) {
        if let Some(d) = &self.durable {
            d.put_selection(owner.as_str(), id, tool, ttl);
        }
    }

    /// A selection this process does not hold, from the durable store: `Ok(None)` if it
    /// does not know it either (or there is none).
    pub fn stored_selection(
        &self,
        owner: &Principal,
        id: &str,
        ttl: Duration,
    ) -> Result<Option<(String, String)>, StoreError> {
        match &self.durable {
            Some(d) => d.selection(owner.as_str(), id, ttl),
            None => Ok(None),
        }
    }

    /// Keeps `pages` (the pages after the one already shown) for `owner`, and returns
    /// the cursor of the first of them. An empty `pages` is kept as one empty page.
    pub fn put_pages(&self, owner: &Principal, pages: Vec<String>) -> Result<String, StoreError> {
        let now = self.purge_if_due();
        let Some(durable) = &self.durable else {
            return self.cursors().put(owner.as_str(), pages, now, &self.limits);
        };
        let kept = if pages.is_empty() {
            vec![String::new()]
        } else {
            pages.clone()
        };
        let cursor = self
            .cursors()
            .put(owner.as_str(), pages, now, &self.limits)?;
        let (id, _) = cursors::parse(&cursor).expect("a cursor just made");
        if let Err(e) = durable.put_pages(owner.as_str(), id, &kept, self.limits.cursor_ttl) {
            // One process on its own store: the pages this process holds are all a cursor
            // needs until a restart, so a store fault costs only that.
            let local = matches!(&e, StoreError::Store(f) if f.whole_store()) && !durable.shared();
            if !local {
                self.cursors().forget(&cursor);
                return Err(e);
            }
            tracing::warn!("a paged result is kept in this process only (its cursor works until a restart): {e}");
        }
        self.forget_evicted();
        Ok(cursor)
    }

    /// The page `cursor` names, and the cursor of the page after it (`None` after the last).
    /// Reading a page again with the same cursor gives the same page (retries are safe).
    #[cfg(test)]
    pub(crate) fn next_page(
        &self,
        owner: &Principal,
        cursor: &str,
    ) -> Result<(String, Option<String>), StoreError> {
        self.next_page_at(owner, cursor)
            .map(|(page, next, _)| (page, next))
    }

    /// `next_page`, with where the page stands among the pages kept (for "page N of M").
    pub fn next_page_at(
        &self,
        owner: &Principal,
        cursor: &str,
    ) -> Result<(String, Option<String>, PagePosition), StoreError> {
        let now = self.purge_if_due();
        let Some(durable) = &self.durable else {
            return self
                .cursors()
                .next(owner.as_str(), cursor, now, &self.limits);
        };
        let Some((id, _)) = cursors::parse(cursor) else {
            return Err(StoreError::Unknown {
                kind: IdKind::Cursor,
                id: cursor.to_string(),
            });
        };
        if !self.cursors().contains(id) {
            let ttl = self.limits.cursor_ttl;
            if let Some((pages, left)) = durable.pages(owner.as_str(), id, cursor, ttl)? {
                self.cursors()
                    .adopt(id, owner.as_str(), pages, now, left, &self.limits)?;
                self.forget_evicted();
            }
        }
        let read = self
            .cursors()
            .next(owner.as_str(), cursor, now, &self.limits)?;
        // As in memory: reading on keeps the rest alive, the last page leaves a grace.
        let keep = if read.1.is_some() {
            self.limits.cursor_ttl
        } else {
            self.limits.grace
        };
        durable.touch(crate::store::Kind::Pages, id, keep);
        Ok(read)
    }

    /// Removes from the durable store what memory evicted to make room.
    fn forget_evicted(&self) {
        if let Some(durable) = &self.durable {
            let evicted = self.cursors().take_evicted();
            for id in evicted {
                durable.remove(crate::store::Kind::Pages, &id);
            }
        }
    }
}
