//! Finished runs kept for a while, per principal (the caller's API key, else the local
//! identity), so a model can propose one as a skill by
//! its `runId` (`propose_skill`): the program as run, how it ended and the servers it
//! called. Bounded per principal and overall, forgotten after [`RUN_TTL`].
//!
//! With a durable store each run is also written there (sealed), so a proposal reaches it
//! after a restart or from another replica; one evicted to make room is removed there too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_core::principal::{Principal, Refused};
use toolgate_core::store::{Kind, Lookup, Record, Store};

/// How long a finished run can be proposed.
pub(crate) const RUN_TTL: Duration = Duration::from_secs(3600);
/// Runs kept per principal (the oldest go first).
pub(crate) const MAX_PER_OWNER: usize = 20;
/// Runs kept over all principals.
pub(crate) const MAX_RUNS: usize = 2000;

/// What is kept of one run.
#[derive(Debug, Clone)]
pub(crate) struct FinishedRun {
    pub owner: Principal,
    /// The program, fences stripped, as the worker ran it.
    pub code: String,
    /// `ok`, `error`, `timeout` or `crashed`.
    pub status: String,
    /// Upstream servers the program called successfully, sorted.
    pub servers: Vec<String>,
    /// The key that ran it (for the draft's provenance).
    pub key: String,
    at: Instant,
}

#[derive(Default)]
pub(crate) struct RunHistory {
    runs: Mutex<HashMap<String, FinishedRun>>,
    /// Where runs are also kept, if configured.
    durable: Option<Arc<dyn Store>>,
}

/// A run as stored: (code, status, servers, key).
type StoredRun = (String, String, Vec<String>, String);

impl RunHistory {
    pub(crate) fn new(durable: Option<Arc<dyn Store>>) -> Self {
        Self {
            runs: Mutex::default(),
            durable,
        }
    }

    fn forget_stored(&self, id: &str) {
        if let Some(store) = &self.durable {
            if let Err(e) = store.remove(Kind::Run, id, toolgate_core::store::now_ms()) {
                tracing::warn!("state store: an evicted run was not removed: {e}");
            }
        }
    }

    fn keep_stored(&self, id: &str, run: &FinishedRun) {
        let Some(store) = &self.durable else { return };
        let value: StoredRun = (
            run.code.clone(),
            run.status.clone(),
            run.servers.clone(),
            run.key.clone(),
        );
        let record = Record {
            owner: run.owner.as_str().to_string(),
            expires_ms: toolgate_core::store::expiry_after(RUN_TTL),
            value: serde_json::to_vec(&value).expect("strings serialize"),
        };
        if let Err(e) = store.put(Kind::Run, id, &record) {
            tracing::warn!("a finished run was kept in this process only (propose it here): {e}");
        }
    }

    /// A run this process does not hold, from the durable store.
    fn stored(&self, owner: &Principal, id: &str) -> Option<Result<FinishedRun, Refused>> {
        let store = self.durable.as_ref()?;
        let now = toolgate_core::store::now_ms();
        Some(match store.lookup(Kind::Run, id, owner.as_str(), now) {
            Ok(Lookup::Found(r)) => {
                let (code, status, servers, key): StoredRun =
                    serde_json::from_slice(&r.value).ok()?;
                let left = Duration::from_millis(r.expires_ms.saturating_sub(now));
                Ok(FinishedRun {
                    owner: owner.clone(),
                    code,
                    status,
                    servers,
                    key,
                    at: Instant::now()
                        .checked_sub(RUN_TTL.saturating_sub(left))
                        .unwrap_or_else(Instant::now),
                })
            }
            Ok(Lookup::Unknown) => return None,
            Ok(Lookup::Foreign) => Err(Refused::foreign(format!(
                "run {id:?} was made by another caller (a different API key or user): pass the runId of one of your own execute_code runs"
            ))),
            Ok(Lookup::Expired) => Err(Refused::stale(format!(
                "run {id:?} has expired (runs are kept {} minutes): run the program again",
                RUN_TTL.as_secs() / 60
            ))),
            Err(e) => Err(Refused::stale(format!(
                "run {id:?} could not be looked up: {e}"
            ))),
        })
    }

    /// Keeps a finished run; returns its id.
    pub(crate) fn record(
        &self,
        owner: &Principal,
        key: &str,
        code: &str,
        status: &str,
        servers: Vec<String>,
    ) -> String {
        let id = format!("run-{}", toolgate_core::ids::random_hex(16));
        let mut runs = self.runs.lock().expect("runs");
        runs.retain(|_, r| r.at.elapsed() < RUN_TTL);
        let oldest = |runs: &HashMap<String, FinishedRun>, only: Option<&Principal>| {
            runs.iter()
                .filter(|(_, r)| only.is_none_or(|o| r.owner == *o))
                .min_by_key(|(_, r)| r.at)
                .map(|(k, _)| k.clone())
        };
        let mut evicted = Vec::new();
        while runs.values().filter(|r| r.owner == *owner).count() >= MAX_PER_OWNER {
            let Some(k) = oldest(&runs, Some(owner)) else {
                break;
            };
            runs.remove(&k);
            evicted.push(k);
        }
        while runs.len() >= MAX_RUNS {
            let Some(k) = oldest(&runs, None) else { break };
            runs.remove(&k);
            evicted.push(k);
        }
        let run = FinishedRun {
            owner: owner.clone(),
            code: code.to_string(),
            status: status.to_string(),
            servers,
            key: key.to_string(),
            at: Instant::now(),
        };
        runs.insert(id.clone(), run.clone());
        drop(runs);
        for k in evicted {
            self.forget_stored(&k);
        }
        self.keep_stored(&id, &run);
        id
    }

    /// The run `id` if `owner` made it and it has not expired; else what to do.
    pub(crate) fn get(&self, owner: &Principal, id: &str) -> Result<FinishedRun, Refused> {
        let runs = self.runs.lock().expect("runs");
        if !runs.contains_key(id) {
            drop(runs);
            if let Some(found) = self.stored(owner, id) {
                return found;
            }
            return Err(Refused::stale(format!(
                "no run {id:?}: pass the runId an execute_code answer returned"
            )));
        }
        match runs.get(id) {
            Some(r) if r.owner == *owner && r.at.elapsed() < RUN_TTL => Ok(r.clone()),
            Some(r) if r.owner == *owner => Err(Refused::stale(format!(
                "run {id:?} has expired (runs are kept {} minutes): run the program again",
                RUN_TTL.as_secs() / 60
            ))),
            Some(_) => Err(Refused::foreign(format!(
                "run {id:?} was made by another caller (a different API key or user): pass the runId of one of your own execute_code runs"
            ))),
            None => Err(Refused::stale(format!(
                "no run {id:?}: pass the runId an execute_code answer returned"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_a_durable_store_a_run_outlives_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let open = || -> Arc<dyn Store> {
            Arc::new(
                toolgate_core::store::EmbeddedStore::open(
                    &dir.path().join("s.redb"),
                    toolgate_core::store::Sealer::new([6; 32]),
                )
                .unwrap(),
            )
        };
        let me = Principal::key("me");
        let id =
            RunHistory::new(Some(open())).record(&me, "me", "return 2", "ok", vec!["a".into()]);
        let h = RunHistory::new(Some(open()));
        let run = h.get(&me, &id).unwrap();
        assert_eq!((run.code.as_str(), run.servers.len()), ("return 2", 1));
        assert!(h.get(&Principal::key("other"), &id).unwrap_err().foreign);
        assert!(!h.get(&me, "run-nope").unwrap_err().foreign);
    }

    #[test]
    fn runs_belong_to_their_principal_and_are_bounded() {
        let h = RunHistory::default();
        let (k1, k2) = (Principal::key("s1"), Principal::key("s2"));
        let id = h.record(&k1, "k", "return 1", "ok", vec!["a".into()]);
        assert_eq!(h.get(&k1, &id).unwrap().code, "return 1");
        assert!(h.get(&k2, &id).unwrap_err().foreign);
        assert!(!h.get(&k1, "run-nope").unwrap_err().foreign);
        let ids: Vec<String> = (0..MAX_PER_OWNER)
            .map(|i| h.record(&k1, "k", &format!("return {i}"), "ok", vec![]))
            .collect();
        assert!(h.get(&k1, &id).is_err(), "the oldest went first");
        assert!(h.get(&k1, &ids[0]).is_ok());
    }
}
