//! A program run at the gate: `execute_code` and every skill run (from execute, the
//! direct surface, or a program's `skills.run`) is audited as a `run` record when it
//! starts and when it ends, and its tool calls carry the run's id (`Caller::run`), so the
//! trail links each call to its run (and a nested skill run to its parent).

use super::{Refusal, RefusalKind};
use crate::policy::audit::RunRecord;
use crate::policy::Caller;
use std::sync::Arc;

/// A started run; [`RunAudit::end`] records how it ended (dropped unended: `abandoned`,
/// e.g. the client cancelled it).
pub(crate) struct RunAudit {
    caller: Caller,
    kind: &'static str,
    skill: Option<String>,
    parent: Option<Arc<str>>,
    ended: bool,
}

/// Starts the audit of a run of `kind` (`execute_code` or `skill`) for `caller`, and
/// returns the caller its calls are made as (the same, with the run's id). A run whose
/// start cannot be recorded does not run.
pub(crate) fn start_run(
    caller: &Caller,
    kind: &'static str,
    skill: Option<&str>,
) -> Result<(RunAudit, Caller), Refusal> {
    let id: Arc<str> = format!("run-{}", toolgate_core::ids::random_hex(12)).into();
    let mut inner = caller.clone();
    let parent = inner.run.replace(id);
    let audit = RunAudit {
        caller: inner.clone(),
        kind,
        skill: skill.map(str::to_string),
        parent,
        ended: false,
    };
    if let Some(log) = &caller.policy.audit {
        log.run_start(&audit.record()).map_err(|e| {
            Refusal::new(
                RefusalKind::AuditUnwritable,
                format!("the program was not run: the audit log cannot be written ({e}); ask the gateway's administrator"),
            )
        })?;
    }
    Ok((audit, inner))
}

impl RunAudit {
    fn record(&self) -> RunRecord<'_> {
        let c = &self.caller;
        RunRecord {
            session: &c.session,
            key: &c.grant.name,
            profile: c.profile_name(),
            surface: c.surface,
            run: c.run.as_deref().unwrap_or_default(),
            kind: self.kind,
            skill: self.skill.as_deref(),
            parent: self.parent.as_deref(),
        }
    }

    /// Records the end: `status` (`ok`, `error`, `timeout`, `crashed`, or why it could not
    /// start), how many tool calls it made, and the `runId` the model was given, if any.
    pub(crate) fn end(mut self, status: &str, calls: usize, run_id: Option<&str>) {
        self.ended = true;
        if let Some(log) = &self.caller.policy.audit {
            log.run_end(&self.record(), status, calls, run_id);
        }
    }
}

impl Drop for RunAudit {
    fn drop(&mut self) {
        if !self.ended {
            if let Some(log) = &self.caller.policy.audit {
                log.run_end(&self.record(), "abandoned", 0, None);
            }
        }
    }
}
