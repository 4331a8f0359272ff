//! The records of a program run (`execute_code`, or a skill run from execute, the direct
//! surface or another program): a `start` before the program runs and an `end` with its
//! status. The run's tool calls carry the same id as `run`, so the trail links them.

use super::{now_rfc3339, AuditLog};
use serde_json::json;

/// One program run, as the audit log records it.
#[derive(Debug, Clone)]
pub(crate) struct RunRecord<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub profile: Option<&'a str>,
    pub surface: &'a str,
    /// Links the run's records and its calls' records (`run` on each).
    pub run: &'a str,
    /// `execute_code`, or `skill`.
    pub kind: &'a str,
    /// The skill's name, for a skill run.
    pub skill: Option<&'a str>,
    /// The run that started this one (a skill a program ran).
    pub parent: Option<&'a str>,
}

impl AuditLog {
    /// Records that a run starts (synced: a program does not run unrecorded). An error
    /// says why the record could not be written.
    pub(crate) fn run_start(&self, r: &RunRecord<'_>) -> Result<(), super::WriteError> {
        self.write(line(r, "start"), true)
    }

    /// Records how a run ended: its `status` (`ok`, `error`, `timeout`, ...), the number
    /// of tool calls it made, and the id the model was given (`runId`, for propose_skill).
    pub(crate) fn run_end(
        &self,
        r: &RunRecord<'_>,
        status: &str,
        calls: usize,
        run_id: Option<&str>,
    ) {
        let mut l = line(r, "end");
        let o = l.as_object_mut().expect("object");
        o.insert("status".into(), json!(status));
        o.insert("calls".into(), json!(calls));
        if let Some(id) = run_id {
            o.insert("runId".into(), json!(id));
        }
        // The run is over: a failed write is logged, and the next call refuses on its own.
        let _ = self.write(l, false);
    }
}

fn line(r: &RunRecord<'_>, phase: &str) -> serde_json::Value {
    json!({
        "time": now_rfc3339(),
        "type": "run",
        "session": r.session,
        "key": r.key,
        "profile": r.profile,
        "surface": r.surface,
        "run": r.run,
        "kind": r.kind,
        "skill": r.skill,
        "parent": r.parent,
        "phase": phase,
    })
}
