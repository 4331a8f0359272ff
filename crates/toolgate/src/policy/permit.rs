//! One judged call: refused (audited at once, synced), or permitted, then confirmed by
//! the user when destructive and approval applies, recorded as started before it runs
//! (a call whose start cannot be recorded does not run), then audited with its outcome.

use super::approval::{self, Answer};
use super::audit::{AuditLog, CallRecord, Verdict, WriteError};
use super::{Caller, Policy, Refusal, RefusalKind, Tier};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;
use toolgate_core::call::{CallError, CallOutcome};
use toolgate_core::catalog::ToolRecord;

/// A call the checks let through; `finish` records how it went.
pub(crate) struct Permit {
    audit: Option<Arc<AuditLog>>,
    /// Ask before destructive calls (the key's setting, else the global one).
    needs_approval: bool,
    session: String,
    key: String,
    /// The token's subject (`[auth.oauth]`), for the audit record.
    subject: Option<String>,
    profile: Option<String>,
    surface: &'static str,
    server: String,
    tool: String,
    /// Links the call's `start` and `end` records.
    call_id: String,
    visible: bool,
    tier: Tier,
    arguments: Map<String, Value>,
    approved: Option<bool>,
    started: Instant,
    /// The program run this call is made from (`Caller::run`), if any.
    run: Option<Arc<str>>,
    /// The `start` record is written and no `end` yet: dropped so, the call was abandoned
    /// (see `Drop`).
    open: bool,
    /// How a user-delegated upstream got its token for the call (`note_exchange`).
    upstream_token: Option<&'static str>,
}

impl Permit {
    pub(super) fn new(
        policy: &Policy,
        caller: &Caller,
        tool: &ToolRecord,
        tier: Tier,
        visible: bool,
        arguments: &Map<String, Value>,
    ) -> Self {
        let needs_approval = caller.grant.approval.unwrap_or(policy.config.approval);
        // The arguments are read only by the audit record and the approval question; a
        // call with neither does not copy them.
        let keep_arguments =
            policy.audit.is_some() || (tier == Tier::Destructive && needs_approval);
        Self {
            audit: policy.audit.clone(),
            needs_approval,
            session: caller.session.clone(),
            key: caller.grant.name.clone(),
            subject: (caller.grant.subject.as_ref()).map(|p| p.as_str().to_string()),
            profile: caller.profile_name().map(str::to_string),
            surface: caller.surface,
            server: tool.id.server.clone(),
            tool: tool.id.name.clone(),
            call_id: toolgate_core::ids::random_hex(8),
            visible,
            tier,
            arguments: if keep_arguments {
                arguments.clone()
            } else {
                Map::new()
            },
            approved: None,
            started: Instant::now(),
            run: caller.run.clone(),
            open: false,
            upstream_token: None,
        }
    }

    /// The upstream acts for the caller and exchanged (or reused) a token for this call:
    /// the `end` record says so.
    pub(crate) fn note_exchange(&mut self, how: toolgate_core::call::Exchange) {
        self.upstream_token = Some(how.as_str());
    }

    /// Audits a refusal (synced: it must be on disk before the answer) and returns it.
    /// A refusal of a permitted call (invalid arguments, a token, a flow rule) is recorded
    /// as before, `allowed` with outcome `not_run`; every record carries the refusal's code.
    pub(crate) fn refuse(&self, refusal: Refusal) -> Refusal {
        let verdict = refusal.kind.verdict();
        let code = Some(refusal.code());
        // Refused either way; a record that cannot be written is logged by the audit log.
        let _ = if verdict == Verdict::Allowed {
            let why = refusal.not_run_reason();
            self.record(Entry {
                outcome: Some("not_run"),
                error: Some(why),
                code,
                ..Entry::of(verdict)
            })
        } else {
            let reason = Some(refusal.message.clone());
            self.record(Entry {
                reason,
                code,
                ..Entry::of(verdict)
            })
        };
        refusal
    }

    /// The last step before the call runs. For a destructive call under approval, asks the
    /// user and waits; anything but an acceptance (a decline, a dismissal, a client that
    /// cannot ask) is a refusal. Then writes the call's `start` record: a call that cannot be
    /// recorded does not run.
    pub(crate) async fn confirm(&mut self, caller: &Caller) -> Result<(), Refusal> {
        self.approve(caller).await?;
        self.started = Instant::now();
        let reason = self.hidden_reason();
        let start = self.record(Entry {
            phase: Some("start"),
            reason,
            ..Entry::of(Verdict::Allowed)
        });
        self.open = start.is_ok();
        start.map_err(|e| {
                Refusal::new(RefusalKind::AuditUnwritable, format!(
                    "{}/{} was not run: the audit log cannot be written ({e}); ask the gateway's administrator",
                    self.server, self.tool
                ))
            })
    }

    async fn approve(&mut self, caller: &Caller) -> Result<(), Refusal> {
        if self.tier != Tier::Destructive || !self.needs_approval {
            return Ok(());
        }
        let id = format!("{}/{}", self.server, self.tool);
        let answer = match &caller.approver {
            None => Answer::Unsupported,
            Some(a) => {
                a.ask(approval::question(&id, &self.key, &self.arguments))
                    .await
            }
        };
        if answer == Answer::Accepted {
            self.approved = Some(true);
            return Ok(());
        }
        self.approved = Some(false);
        let kind = match answer {
            Answer::Unsupported => RefusalKind::ApprovalUnavailable,
            Answer::InputRequired => RefusalKind::ApprovalRequested,
            _ => RefusalKind::ApprovalDeclined,
        };
        Err(self.refuse(Refusal::new(kind, approval::refusal(&id, &answer))))
    }

    /// Audits the finished call: outcome, latency and result tokens (o200k). Destructive
    /// calls are synced to disk before the caller answers.
    pub(crate) fn finish(mut self, result: &Result<CallOutcome, CallError>) {
        self.open = false;
        // Without an audit log nothing reads the figures: the token count (a BPE pass over
        // the whole result) is not made on the request path for nothing.
        if self.audit.is_none() {
            return;
        }
        let (outcome, error, tokens) = match result {
            Ok(o) => {
                let text = serde_json::to_string(&o.content).unwrap_or_default();
                let tokens = toolgate_route::shape::Encoding::O200k.count(&text);
                let outcome = if o.is_error { "isError" } else { "ok" };
                (outcome, None, Some(tokens))
            }
            Err(e) => ("error", Some(e.to_string()), None),
        };
        let reason = self.hidden_reason();
        let _ = self.record(Entry {
            phase: Some("end"),
            reason,
            outcome: Some(outcome),
            error,
            result_tokens: tokens,
            ..Entry::of(Verdict::Allowed)
        });
    }

    fn hidden_reason(&self) -> Option<String> {
        (!self.visible).then(|| "hidden by the profile; called by exact name".into())
    }

    /// Whether the call is destructive (its tier), as approval judges it.
    pub(crate) fn destructive(&self) -> bool {
        self.tier == Tier::Destructive
    }

    /// Writes one record of this call; an error says why it could not be written.
    fn record(&self, e: Entry<'_>) -> Result<(), WriteError> {
        let Entry {
            phase,
            verdict,
            reason,
            outcome,
            error,
            result_tokens,
            code,
        } = e;
        let Some(log) = &self.audit else {
            return Ok(());
        };
        let ran = outcome.is_some_and(|o| o != "not_run");
        log.call(
            &CallRecord {
                session: &self.session,
                key: &self.key,
                subject: self.subject.as_deref(),
                profile: self.profile.as_deref(),
                surface: self.surface,
                server: &self.server,
                tool: &self.tool,
                call_id: &self.call_id,
                phase,
                visible: self.visible,
                tier: self.tier.as_str(),
                arguments: &self.arguments,
                verdict,
                reason,
                approved: self.approved,
                outcome,
                error,
                latency: ran.then(|| self.started.elapsed()),
                result_tokens,
                code,
                run: self.run.as_deref(),
                upstream_token: phase.filter(|p| *p == "end").and(self.upstream_token),
            },
            verdict != Verdict::Allowed || self.tier == Tier::Destructive,
        )
    }
}

/// What one record of a call says beyond the call itself (its [`CallRecord`] fields that
/// change from record to record); the rest are `None` unless named.
struct Entry<'a> {
    /// `start`, `end`, or `None` for a call refused or never run (one record).
    phase: Option<&'a str>,
    verdict: Verdict,
    reason: Option<String>,
    /// `ok`, `isError`, `error` or `not_run`; `None` before the call ran.
    outcome: Option<&'a str>,
    error: Option<String>,
    result_tokens: Option<usize>,
    /// The refusal's code, when the call was refused or not run.
    code: Option<&'a str>,
}

impl Entry<'_> {
    fn of(verdict: Verdict) -> Self {
        Self {
            phase: None,
            verdict,
            reason: None,
            outcome: None,
            error: None,
            result_tokens: None,
            code: None,
        }
    }
}

/// A call whose `start` is recorded ends in the log even when nothing finishes it: its
/// future was dropped before the answer (a program that ended or ran out of time with the
/// call in flight, an operation cancelled that did not stop in time). The upstream is told
/// to stop (`upstream::InFlight`); the record says the call was abandoned.
impl Drop for Permit {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let reason = self.hidden_reason();
        let why = "abandoned: nothing waited for its answer any more (its program ended, was \
                   cancelled or ran out of time, or it was cancelled and did not stop)";
        let _ = self.record(Entry {
            phase: Some("end"),
            reason,
            outcome: Some("error"),
            error: Some(why.to_string()),
            ..Entry::of(Verdict::Allowed)
        });
    }
}
