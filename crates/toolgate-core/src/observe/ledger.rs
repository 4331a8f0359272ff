//! Each session's running count of the tokens the gateway sent it (tool results and
//! definitions), which `guided.session_budget_tokens` is checked against and the
//! dashboard shows. A legacy session is counted under its session, a 2026-07-28 client
//! (no session) under its principal; the front chooses the key.
//!
//! Bounded: at most [`MAX_ENTRIES`] counts, the longest idle dropped first, and a count
//! idle for [`IDLE`] is forgotten.

use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How many sessions are counted at once.
pub(super) const MAX_ENTRIES: usize = 2048;
/// A count nobody has added to for this long is dropped.
pub(super) const IDLE: Duration = Duration::from_secs(3600);

/// One session's (or principal's) use, as the dashboard shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUse {
    /// What the dashboard shows for it: a redacted session id or a key's name.
    pub label: String,
    /// "legacy" (a session) or "stateless" (2026-07-28 requests of one principal).
    pub era: &'static str,
    /// guided or direct.
    pub surface: &'static str,
    /// Tokens of tool results sent.
    pub result_tokens: usize,
    /// Tokens of tool definitions sent (tools/list).
    pub definition_tokens: usize,
    /// What those tools/list answers would have cost in direct mode.
    pub direct_definition_tokens: usize,
    /// Answers made smaller because the count neared the budget.
    pub shrunk: usize,
    /// When it was last added to (Unix milliseconds).
    pub last_seen_ms: u64,
    #[serde(skip)]
    touched: Option<Instant>,
}

impl SessionUse {
    /// Everything sent: results and definitions.
    pub fn sent(&self) -> usize {
        self.result_tokens + self.definition_tokens
    }
}

/// The counts, by the front's key.
#[derive(Default)]
pub struct Ledger {
    entries: Mutex<HashMap<String, SessionUse>>,
}

/// What one addition is.
pub enum Sent {
    /// A tool result of this many tokens.
    Result(usize),
    /// Definitions sent, and what direct mode would have sent.
    Definitions {
        /// Tokens of the definitions sent.
        sent: usize,
        /// Tokens direct mode would have sent.
        direct: usize,
    },
    /// An answer was shrunk.
    Shrunk,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Ledger {
    /// Adds to the count of `key` (made on first use with `label`, `era`, `surface`) and
    /// returns the tokens sent to it so far, and whether the count was new.
    pub fn add(
        &self,
        key: &str,
        label: &str,
        era: &'static str,
        surface: &'static str,
        what: Sent,
    ) -> (usize, bool) {
        let mut entries = self.entries.lock().expect("ledger");
        let now = Instant::now();
        let new = !entries.contains_key(key);
        if new {
            entries.retain(|_, e| e.touched.is_some_and(|t| now.duration_since(t) < IDLE));
            if entries.len() >= MAX_ENTRIES {
                let oldest = entries
                    .iter()
                    .min_by_key(|(_, e)| e.touched)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    entries.remove(&k);
                }
            }
        }
        let e = entries
            .entry(key.to_string())
            .or_insert_with(|| SessionUse {
                label: label.to_string(),
                era,
                surface,
                result_tokens: 0,
                definition_tokens: 0,
                direct_definition_tokens: 0,
                shrunk: 0,
                last_seen_ms: 0,
                touched: None,
            });
        match what {
            Sent::Result(n) => e.result_tokens += n,
            Sent::Definitions { sent, direct } => {
                e.definition_tokens += sent;
                e.direct_definition_tokens += direct;
            }
            Sent::Shrunk => e.shrunk += 1,
        }
        e.touched = Some(now);
        e.last_seen_ms = now_ms();
        (e.sent(), new)
    }

    /// Tokens sent to `key` so far (0 for a key never seen).
    pub fn spent(&self, key: &str) -> usize {
        let entries = self.entries.lock().expect("ledger");
        entries.get(key).map_or(0, SessionUse::sent)
    }

    /// The `limit` most recently active counts, most recent first.
    pub fn recent(&self, limit: usize) -> Vec<SessionUse> {
        let entries = self.entries.lock().expect("ledger");
        let mut all: Vec<SessionUse> = entries.values().cloned().collect();
        all.sort_by_key(|u| std::cmp::Reverse(u.last_seen_ms));
        all.truncate(limit);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_key_and_results_and_definitions_both_count() {
        let l = Ledger::default();
        assert_eq!(
            l.add("a", "a", "legacy", "guided", Sent::Result(10)),
            (10, true)
        );
        let direct = Sent::Definitions {
            sent: 5,
            direct: 500,
        };
        assert_eq!(l.add("a", "a", "legacy", "guided", direct), (15, false));
        assert_eq!(
            l.add("b", "b", "stateless", "direct", Sent::Result(1)),
            (1, true)
        );
        assert_eq!(l.spent("a"), 15);
        assert_eq!(l.spent("nobody"), 0);
        let recent = l.recent(10);
        assert_eq!(recent.len(), 2);
        let a = recent.iter().find(|u| u.label == "a").unwrap();
        assert_eq!(a.direct_definition_tokens, 500);
    }

    #[test]
    fn the_ledger_stays_bounded() {
        let l = Ledger::default();
        for i in 0..MAX_ENTRIES + 10 {
            l.add(&i.to_string(), "x", "legacy", "guided", Sent::Result(1));
        }
        assert!(l.entries.lock().unwrap().len() <= MAX_ENTRIES);
    }
}
