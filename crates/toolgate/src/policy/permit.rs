//! One judged call: refused (audited at once, synced), or permitted, then confirmed by
//! the user when destructive and approval applies, then audited with its outcome.

use super::approval::{self, Answer};
use super::audit::{AuditLog, CallRecord, Verdict};
use super::{Caller, Policy, Tier};
use crate::catalog::ToolRecord;
use crate::upstream::{CallError, CallOutcome};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// A call the checks let through; `finish` records how it went.
pub struct Permit {
    audit: Option<Arc<AuditLog>>,
    /// Ask before destructive calls (the key's setting, else the global one).
    needs_approval: bool,
    session: String,
    key: String,
    profile: Option<String>,
    surface: &'static str,
    server: String,
    tool: String,
    visible: bool,
    tier: Tier,
    arguments: Map<String, Value>,
    approved: Option<bool>,
    started: Instant,
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
        Self {
            audit: policy.audit.clone(),
            needs_approval: caller.grant.approval.unwrap_or(policy.config.approval),
            session: caller.session.clone(),
            key: caller.grant.name.clone(),
            profile: caller.profile_name().map(str::to_string),
            surface: caller.surface,
            server: tool.id.server.clone(),
            tool: tool.id.name.clone(),
            visible,
            tier,
            arguments: arguments.clone(),
            approved: None,
            started: Instant::now(),
        }
    }

    /// Audits a refusal (synced: it must be on disk before the answer) and returns its message.
    pub(super) fn refuse(&self, verdict: Verdict, reason: String) -> String {
        self.record(verdict, Some(reason.clone()), None, None, None);
        reason
    }

    /// For a destructive call under approval, asks the user and waits; anything but an
    /// acceptance (a decline, a dismissal, a client that cannot ask) is a refusal.
    pub async fn confirm(&mut self, caller: &Caller) -> Result<(), String> {
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
            self.started = Instant::now();
            return Ok(());
        }
        self.approved = Some(false);
        let verdict = match answer {
            Answer::Unsupported => Verdict::ApprovalUnavailable,
            Answer::InputRequired => Verdict::ApprovalRequested,
            _ => Verdict::ApprovalDeclined,
        };
        Err(self.refuse(verdict, approval::refusal(&id, &answer)))
    }

    /// Audits the finished call: outcome, latency and result tokens (o200k). Destructive
    /// calls are synced to disk before the caller answers.
    pub fn finish(self, result: &Result<CallOutcome, CallError>) {
        let (outcome, error, tokens) = match result {
            Ok(o) => {
                let text = Value::Array(o.content.clone()).to_string();
                let tokens = crate::shape::tokens::Encoding::O200k.count(&text);
                let outcome = if o.is_error { "isError" } else { "ok" };
                (outcome, None, Some(tokens))
            }
            Err(e) => ("error", Some(e.to_string()), None),
        };
        let reason = (!self.visible).then(|| "hidden by the profile; called by exact name".into());
        self.record(Verdict::Allowed, reason, Some(outcome), error, tokens);
    }

    /// Audits a permitted call that never reached the upstream (e.g. invalid arguments).
    pub fn not_run(self, why: &str) {
        self.record(
            Verdict::Allowed,
            None,
            Some("not_run"),
            Some(why.into()),
            None,
        );
    }

    fn record(
        &self,
        verdict: Verdict,
        reason: Option<String>,
        outcome: Option<&str>,
        error: Option<String>,
        result_tokens: Option<usize>,
    ) {
        let Some(log) = &self.audit else { return };
        let ran = outcome.is_some_and(|o| o != "not_run");
        log.call(
            &CallRecord {
                session: &self.session,
                key: &self.key,
                profile: self.profile.as_deref(),
                surface: self.surface,
                server: &self.server,
                tool: &self.tool,
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
            },
            verdict != Verdict::Allowed || self.tier == Tier::Destructive,
        );
    }
}
