//! Finished runs kept for a while, per principal (the caller's API key, else the local
//! identity), so a model can propose one as a skill by
//! its `runId` (`propose_skill`): the program as run, how it ended and the servers it
//! called. Bounded per principal and overall, forgotten after [`RUN_TTL`].

use crate::principal::{Principal, Refused};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a finished run can be proposed.
pub const RUN_TTL: Duration = Duration::from_secs(3600);
/// Runs kept per principal (the oldest go first).
pub const MAX_PER_OWNER: usize = 20;
/// Runs kept over all principals.
pub const MAX_RUNS: usize = 2000;

/// What is kept of one run.
#[derive(Debug, Clone)]
pub struct FinishedRun {
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
pub struct RunHistory {
    runs: Mutex<HashMap<String, FinishedRun>>,
}

impl RunHistory {
    /// Keeps a finished run; returns its id.
    pub fn record(
        &self,
        owner: &Principal,
        key: &str,
        code: &str,
        status: &str,
        servers: Vec<String>,
    ) -> String {
        let id = format!("run-{}", crate::ids::random_hex(16));
        let mut runs = self.runs.lock().expect("runs");
        runs.retain(|_, r| r.at.elapsed() < RUN_TTL);
        let oldest = |runs: &HashMap<String, FinishedRun>, only: Option<&Principal>| {
            runs.iter()
                .filter(|(_, r)| only.is_none_or(|o| r.owner == *o))
                .min_by_key(|(_, r)| r.at)
                .map(|(k, _)| k.clone())
        };
        while runs.values().filter(|r| r.owner == *owner).count() >= MAX_PER_OWNER {
            let Some(k) = oldest(&runs, Some(owner)) else {
                break;
            };
            runs.remove(&k);
        }
        while runs.len() >= MAX_RUNS {
            let Some(k) = oldest(&runs, None) else { break };
            runs.remove(&k);
        }
        runs.insert(
            id.clone(),
            FinishedRun {
                owner: owner.clone(),
                code: code.to_string(),
                status: status.to_string(),
                servers,
                key: key.to_string(),
                at: Instant::now(),
            },
        );
        id
    }

    /// The run `id` if `owner` made it and it has not expired; else what to do.
    pub fn get(&self, owner: &Principal, id: &str) -> Result<FinishedRun, Refused> {
        let runs = self.runs.lock().expect("runs");
        match runs.get(id) {
            Some(r) if r.owner == *owner && r.at.elapsed() < RUN_TTL => Ok(r.clone()),
            Some(r) if r.owner == *owner => Err(Refused::stale(format!(
                "run {id:?} has expired (runs are kept {} minutes): run the program again",
                RUN_TTL.as_secs() / 60
            ))),
            Some(_) => Err(Refused::foreign(format!(
                "run {id:?} was made by another caller (a different API key): pass the runId of one of your own execute_code runs"
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
