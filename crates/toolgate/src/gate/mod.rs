//! The gate: the one way a tool call reaches an upstream, whatever asked for it (guided
//! `execute`, the direct surface, pinned and expanded tools, a program's `tools.*` call, a
//! skill's calls). Every path calls [`admit`], which asks, in this order:
//!
//! 1. the policy ([`Policy::check`](crate::policy::Policy::check)): the audit log works,
//!    the tool is not in shadow, the key's scopes and tier cover it (visibility never
//!    grants; a hidden tool the key covers stays callable by exact name);
//! 2. for a program: a destructive tool (the policy's one definition) only when
//!    `code.allow_destructive` names it, and the run's `[code.flows]` rules;
//! 3. PII tokens restored in the arguments (`code.pii`), flow rules asked at each token;
//! 4. the arguments validated against the tool's full upstream schema;
//! 5. approval of a destructive call, then the call's `start` record.
//!
//! A refusal is a typed [`Refusal`] whose code reaches the model and the audit record.
//! [`Admitted::run`] calls the upstream and audits the outcome; [`outbound`] tokenizes PII
//! in what goes back; [`bound`] cuts a result to the surface's budget. [`finished`] is
//! the one place where a call's outcome is known (refused or run): hang metrics there.
//! [`start_run`] audits a program run (`execute_code`, a skill) and links its calls.
//!
//! Spans (see `observe::trace`): `admit` around the checks, with `policy` and
//! `validate` inside it, then `upstream` around the call; each carries the tool id, the
//! surface and, once known, the outcome (`ok`, `tool_error`, `failed`, or the refusal's
//! code). `upstream` is a child of the span the call was admitted in, even when the
//! call runs on another task (execute's operations).

mod bound;
mod pii;
pub(crate) mod program;
pub(crate) mod resume;
mod run;

pub(crate) use bound::{bound, direct_budget};
pub(crate) use pii::{outbound, tokenize_line};
pub(crate) use run::{start_run, RunAudit};

use crate::engine::Engine;
use crate::gateway::Gateway;
use crate::policy::{Caller, Permit};
pub(crate) use crate::policy::{Refusal, RefusalKind};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolgate_core::call::{CallError, CallOptions, CallOutcome};
use toolgate_core::catalog::ToolRecord;
use toolgate_core::principal::Principal;
use tracing::{field::Empty, Instrument, Span};

/// Where a call comes from, for the checks that differ by path.
pub(crate) enum Origin {
    /// A call the client made (execute, direct, pinned, expanded): the user may approve.
    Client,
    /// A program's call. `flow` is the refusal the run's flow tracking found for these
    /// arguments (a value an earlier result of the run held, going where a rule forbids).
    Program { flow: Option<(String, String)> },
}

/// How a call ended, as [`finished`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Refused before any upstream saw it.
    Refused(RefusalKind),
    /// The upstream answered.
    Ok,
    /// The upstream answered with `isError`.
    ToolError,
    /// No answer: timeout, cancellation, a lost connection.
    Failed,
}

/// A call that passed every check: the only way to reach an upstream.
pub(crate) struct Admitted {
    permit: Permit,
    gw: Arc<Gateway>,
    tool: Arc<ToolRecord>,
    surface: &'static str,
    arguments: Map<String, Value>,
    /// When the call path began: the gateway's own time is measured from it (metrics).
    since: std::time::Instant,
    /// The span the call was admitted in: the parent of its `upstream` span.
    parent: Span,
    /// Whom the call acts for, when its upstream acts for each caller (token exchange).
    on_behalf: Option<toolgate_core::call::OnBehalf>,
}

/// Judges one call (see the module's list for the order). `arguments` is the one value
/// that is checked and then sent. Every refusal is audited before it is returned.
pub(crate) async fn admit(
    engine: &Engine,
    caller: &Caller,
    owner: &Principal,
    tool: &Arc<ToolRecord>,
    arguments: Map<String, Value>,
    origin: Origin,
) -> Result<Admitted, Refusal> {
    let span = tracing::info_span!(
        "admit",
        "toolgate.tool_id" = %tool.id,
        "toolgate.surface" = surface_of(caller, &origin),
        "toolgate.outcome" = Empty,
    );
    // The call's `upstream` span is a sibling of `admit`, under what admitted it.
    let parent = Span::current();
    let surface = surface_of(caller, &origin);
    let checked = checks(engine, caller, owner, tool, arguments, origin, parent);
    let admitted = checked.instrument(span.clone()).await;
    match &admitted {
        Err(refusal) => {
            span.record("toolgate.outcome", refusal.code());
            engine.metrics().refused(surface, refusal.code());
            finished(caller.surface, tool, Outcome::Refused(refusal.kind));
        }
        Ok(_) => drop(span.record("toolgate.outcome", "admitted")),
    }
    admitted
}

/// A call that reached no tool: no tool of that name is visible to `caller`, or its
/// server is down. Audited and counted as refused (`not_visible`) on `surface`, as a
/// refusal by [`admit`] is; nothing ran.
pub(crate) fn unavailable(
    engine: &Engine,
    caller: &Caller,
    surface: &'static str,
    name: &str,
    reason: &str,
) {
    engine.policy.audit_unavailable(caller, name, reason);
    let code = RefusalKind::NotVisible.code();
    engine.metrics().refused(surface, code);
}

/// The metrics' and spans' surface: a program's calls count as code mode's.
fn surface_of(caller: &Caller, origin: &Origin) -> &'static str {
    match origin {
        Origin::Program { .. } => "code",
        _ => caller.surface,
    }
}

async fn checks(
    engine: &Engine,
    caller: &Caller,
    owner: &Principal,
    tool: &Arc<ToolRecord>,
    arguments: Map<String, Value>,
    origin: Origin,
    parent: Span,
) -> Result<Admitted, Refusal> {
    let since = std::time::Instant::now();
    let surface = surface_of(caller, &origin);
    let policy = tracing::info_span!("policy");
    let mut permit = policy.in_scope(|| engine.policy.check(caller, tool, &arguments))?;
    if let Origin::Program { flow } = origin {
        let name = tool.id.to_string();
        let allowed = &engine.code_config().allow_destructive;
        if permit.destructive() && !allowed.contains(&name) {
            return Err(permit.refuse(Refusal::new(
                RefusalKind::ApprovalRequired,
                format!("{name} is destructive: make this call with execute, where the user can confirm it (or list it in code.allow_destructive)"),
            )));
        }
        if let Some((rule, message)) = flow {
            return Err(permit.refuse(flow_refusal(rule, message)));
        }
    }
    let arguments = match pii::inbound(engine, caller, owner, tool, arguments) {
        Ok(a) => a,
        Err(refusal) => return Err(permit.refuse(refusal)),
    };
    let validating = tracing::info_span!("validate");
    let arguments = match validating.in_scope(|| validate(engine, tool, arguments)) {
        Ok(a) => a,
        Err(refusal) => return Err(permit.refuse(refusal)),
    };
    // Valid arguments first, so the user is never asked to approve a call that cannot run.
    permit.confirm(caller).await?;
    Ok(Admitted {
        permit,
        gw: engine.gw.clone(),
        tool: tool.clone(),
        surface,
        arguments,
        since,
        parent,
        on_behalf: (engine.gw.upstream(&tool.id.server))
            .is_some_and(|u| u.acts_for_callers())
            .then(|| caller.on_behalf()),
    })
}

/// The refusal of a `[code.flows]` rule.
fn flow_refusal(rule: String, message: String) -> Refusal {
    Refusal {
        detail: Some(serde_json::json!({ "rule": rule })),
        ..Refusal::new(RefusalKind::Flow, message)
    }
}

/// The arguments against the tool's full input schema: a model-fixable refusal that
/// says what is wrong, on every path alike. The map is handed back as it came (the
/// validators take a value: it is wrapped and unwrapped, not copied).
fn validate(
    engine: &Engine,
    tool: &ToolRecord,
    arguments: Map<String, Value>,
) -> Result<Map<String, Value>, Refusal> {
    let value = Value::Object(arguments);
    let checked = engine.validators().validate(tool, &value);
    let Value::Object(arguments) = value else {
        unreachable!("wrapped from a map above")
    };
    match checked {
        Ok(toolgate_core::exec::Checked::Valid) => Ok(arguments),
        Ok(toolgate_core::exec::Checked::Skipped { reason }) => {
            tracing::debug!(tool = %tool.id, "arguments not validated: {reason}");
            Ok(arguments)
        }
        Err(report) => Err(Refusal {
            detail: Some(report.structured()),
            ..Refusal::new(
                RefusalKind::InvalidArguments,
                report.to_text(&tool.id.to_string()),
            )
        }),
    }
}

impl Admitted {
    /// Calls the upstream with the admitted arguments, and audits how it went.
    pub(crate) async fn run(mut self, mut opts: CallOptions) -> Result<CallOutcome, CallError> {
        let exchanged = (self.on_behalf.as_ref()).map(|o| o.exchange.clone());
        opts.on_behalf = self.on_behalf.take();
        let (gw, since) = (&self.gw, self.since);
        let span = tracing::info_span!(
            parent: &self.parent,
            "upstream",
            "toolgate.tool_id" = %self.tool.id,
            "toolgate.surface" = self.surface,
            "toolgate.outcome" = Empty,
        );
        let call = gw.call_as(self.surface, since, &self.tool, self.arguments, opts);
        let result = call.instrument(span.clone()).await;
        if let Some(how) = exchanged.as_ref().and_then(|e| e.get()) {
            self.permit.note_exchange(*how);
        }
        self.permit.finish(&result);
        let (outcome, word) = match &result {
            Ok(o) if o.is_error => (Outcome::ToolError, "tool_error"),
            Ok(_) => (Outcome::Ok, "ok"),
            Err(_) => (Outcome::Failed, "failed"),
        };
        span.record("toolgate.outcome", word);
        finished(self.surface, &self.tool, outcome);
        result
    }
}

/// A call finished with `outcome`: refused by [`admit`], or run by [`Admitted::run`].
/// Every call of every path ends here exactly once (the audit record is written by the
/// permit before); metrics belong here.
pub(crate) fn finished(surface: &str, tool: &ToolRecord, outcome: Outcome) {
    tracing::debug!(surface, tool = %tool.id, ?outcome, "call finished");
}

/// Whether `caller`'s key may call `tool` (scopes and tier): what a program's `tools`
/// object holds. The gate asks the same again at each call.
pub(crate) fn permitted(caller: &Caller, tool: &ToolRecord) -> bool {
    let tier = caller.policy.facts(tool).tier;
    (caller.grant)
        .missing_permission(&tool.id.to_string(), tier)
        .is_none()
}

/// Whether `describe_tools`, a program's `./servers` tree or route may show `tool` to
/// `caller`: the key may call it and the profile shows it. A hidden tool is never
/// described, whatever the key allows.
pub(crate) fn describable(caller: &Caller, tool: &ToolRecord) -> bool {
    permitted(caller, tool) && caller.policy.shows(caller, tool)
}

/// The structured part of a refusal's answer: its code (the same as in the audit
/// record), the tool, and any detail (the validation report).
pub(crate) fn refusal_json(refusal: &Refusal, tool: &str) -> Value {
    let mut v = serde_json::json!({"error": refusal.code(), "tool": tool});
    if let Some(detail) = &refusal.detail {
        let key = match refusal.kind {
            RefusalKind::InvalidArguments => "validation",
            _ => "detail",
        };
        v[key] = detail.clone();
    }
    v
}
