//! Finished runs kept for a while, per session, so a model can propose one as a skill by
//! its `runId` (`propose_skill`): the program as run, how it ended and the servers it
//! called. Bounded per session and overall, forgotten after [`RUN_TTL`] or with the session.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a finished run can be proposed.
pub const RUN_TTL: Duration = Duration::from_secs(3600);
/// Runs kept per session (the oldest go first).
pub const MAX_PER_SESSION: usize = 20;
/// Runs kept over all sessions.
pub const MAX_RUNS: usize = 2000;

/// What is kept of one run.
#[derive(Debug, Clone)]
pub struct FinishedRun {
    pub session: String,
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
        session: &str,
        key: &str,
        code: &str,
        status: &str,
        servers: Vec<String>,
    ) -> String {
        let id = format!("run-{}", crate::guided::random_hex(8));
        let mut runs = self.runs.lock().expect("runs");
        runs.retain(|_, r| r.at.elapsed() < RUN_TTL);
        let oldest = |runs: &HashMap<String, FinishedRun>, only: Option<&str>| {
            runs.iter()
                .filter(|(_, r)| only.is_none_or(|s| r.session == s))
                .min_by_key(|(_, r)| r.at)
                .map(|(k, _)| k.clone())
        };
        while runs.values().filter(|r| r.session == session).count() >= MAX_PER_SESSION {
            let Some(k) = oldest(&runs, Some(session)) else {
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
                session: session.to_string(),
                code: code.to_string(),
                status: status.to_string(),
                servers,
                key: key.to_string(),
                at: Instant::now(),
            },
        );
        id
    }

    /// The run `id` if it is this session's and not expired; else what to do.
    pub fn get(&self, session: &str, id: &str) -> Result<FinishedRun, String> {
        let runs = self.runs.lock().expect("runs");
        match runs.get(id) {
            Some(r) if r.session == session && r.at.elapsed() < RUN_TTL => Ok(r.clone()),
            Some(r) if r.session == session => Err(format!(
                "run {id:?} has expired (runs are kept {} minutes): run the program again",
                RUN_TTL.as_secs() / 60
            )),
            _ => Err(format!(
                "no run {id:?} in this session: pass the runId an execute_code answer of this session returned"
            )),
        }
    }

    pub fn end_session(&self, session: &str) {
        self.runs
            .lock()
            .expect("runs")
            .retain(|_, r| r.session != session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_belong_to_their_session_and_are_bounded() {
        let h = RunHistory::default();
        let id = h.record("s1", "k", "return 1", "ok", vec!["a".into()]);
        assert_eq!(h.get("s1", &id).unwrap().code, "return 1");
        assert!(h.get("s2", &id).unwrap_err().contains("no run"));
        let ids: Vec<String> = (0..MAX_PER_SESSION)
            .map(|i| h.record("s1", "k", &format!("return {i}"), "ok", vec![]))
            .collect();
        assert!(h.get("s1", &id).is_err(), "the oldest went first");
        assert!(h.get("s1", &ids[0]).is_ok());
        h.end_session("s1");
        assert!(h.get("s1", &ids[0]).is_err());
    }
}
