//! A program's tool call, through the same gate as execute ([`gate::admit`]): the key's
//! scopes and tier, `[code.flows]` rules on values earlier results of the run held,
//! destructive ones (the policy's tier) refused (`approval_required`) unless configured,
//! arguments validated against the full schema, the upstream's timeout capped by the
//! run's deadline, and a result too large for the program refused (`limit`).

use crate::code::worker::ToolCall;
use crate::engine::Engine;
use crate::gate::{self, Origin, Refusal, RefusalKind};
use crate::policy::Caller;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate_core::call::{CallError, CallOptions, CallOutcome};
use toolgate_core::catalog::ToolRecord;
use toolgate_core::principal::Principal;
use toolgate_sandbox::protocol::CallFailure;

/// The tools one run may call and the state every call checks.
pub(crate) struct Gate<'a> {
    pub engine: &'a Engine,
    pub owner: &'a Principal,
    /// Who runs the program: every call is authorized for this caller's key, as execute's are.
    pub caller: &'a Caller,
    /// (server, original name) -> record: exactly what the run's `tools` object holds.
    pub allowed: HashMap<(String, String), Arc<ToolRecord>>,
    /// When the run's own deadline passes (calls get no more time than the run has).
    pub deadline: Instant,
    /// PII the run's results held, for `[code.flows]` (tracked only when rules exist).
    pub flows: crate::code::flows::RunFlows,
}

fn fail(code: &str, message: impl Into<String>) -> CallFailure {
    CallFailure {
        code: code.into(),
        message: message.into(),
    }
}

/// A refusal as a program sees it: a `ToolError` whose `code` is one of the sandbox's
/// categories (`denied`, `invalid_arguments`, `approval_required`) and whose message ends
/// with the refusal's own code, the one the audit record has.
fn refused(refusal: Refusal) -> CallFailure {
    let category = match refusal.kind {
        RefusalKind::InvalidArguments | RefusalKind::PiiToken => "invalid_arguments",
        RefusalKind::ApprovalRequired
        | RefusalKind::ApprovalDeclined
        | RefusalKind::ApprovalUnavailable
        | RefusalKind::ApprovalRequested => "approval_required",
        _ => "denied",
    };
    fail(
        category,
        format!("{} (refused: {})", refusal.message, refusal.code()),
    )
}

impl Gate<'_> {
    /// One of the program's `tools.*` calls, in its own `program.call` span.
    pub(crate) async fn call(&self, call: ToolCall) -> Result<Value, CallFailure> {
        let span = tracing::info_span!(
            "program.call",
            "toolgate.surface" = "code",
            "toolgate.outcome" = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(self.call_traced(call), span.clone()).await;
        span.record(
            "toolgate.outcome",
            result.as_ref().map_or("error", |_| "ok"),
        );
        result
    }

    async fn call_traced(&self, call: ToolCall) -> Result<Value, CallFailure> {
        let key = (call.server, call.tool);
        let name = format!("{}/{}", key.0, key.1);
        // A tool outside the run's set because the key may not call it goes to the gate
        // all the same, so the caller hears (and the audit log records) the refusal
        // execute would give. One outside it for another reason (a skill's servers) is not
        // a tool of this run.
        let catalog = self.engine.gw.catalog();
        let forbidden = || {
            catalog
                .resolve(&name)
                .filter(|t| !gate::permitted(self.caller, t))
        };
        let Some(tool) = self.allowed.get(&key).or_else(forbidden) else {
            let reason = "not a tool this program's caller may use";
            super::unavailable(self.engine, self.caller, "code", &name, reason);
            return Err(fail(
                "denied",
                format!(
                    "there is no tool {:?} on server {:?} that this caller may use (refused: {})",
                    key.1,
                    key.0,
                    RefusalKind::NotVisible.code()
                ),
            ));
        };
        let config = self.engine.code_config();
        let name = tool.id.to_string();
        // A value an earlier result of this run held, going where a flow rule forbids
        // (refused by the gate after the policy, so it is audited like any refusal).
        let flow = if config.flows.is_empty() {
            None
        } else {
            let (rules, fields) = (&config.flows, &config.pii_fields);
            self.flows
                .check(rules, &tool.id.server, &call.arguments, fields)
        };
        let Value::Object(arguments) = call.arguments else {
            return Err(fail(
                "invalid_arguments",
                format!("{name} takes an object of arguments"),
            ));
        };
        let origin = Origin::Program { flow };
        let admitted = gate::admit(
            self.engine,
            self.caller,
            self.owner,
            tool,
            arguments,
            origin,
        )
        .await
        .map_err(refused)?;
        let left = self.deadline.saturating_duration_since(Instant::now());
        let upstream = self
            .engine
            .gw
            .upstream(&tool.id.server)
            .map_or(left, |u| u.config.call_timeout);
        let opts = CallOptions {
            timeout: Some(upstream.min(left).max(Duration::from_millis(1))),
            relay: self.caller.relay.clone(),
            ..Default::default()
        };
        let result = admitted.run(opts).await;
        match result {
            Ok(outcome) if outcome.is_error => Err(fail("upstream", text_of(&outcome))),
            Ok(outcome) => {
                let value = value_of(outcome);
                if !config.flows.is_empty() {
                    self.flows.saw(&tool.id.server, &value, &config.pii_fields);
                }
                let size = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
                if size > config.max_tool_result_bytes {
                    return Err(fail(
                        "limit",
                        format!(
                            "{name} returned {size} bytes, more than a program may take in ({}); ask for less (a filter, a page)",
                            config.max_tool_result_bytes
                        ),
                    ));
                }
                Ok(value)
            }
            Err(e @ CallError::Timeout { .. }) => Err(fail("timeout", e.to_string())),
            Err(CallError::Cancelled) => Err(fail("timeout", "the call was cancelled")),
            Err(e) => Err(fail("upstream", e.to_string())),
        }
    }
}

/// What a program receives: `structuredContent`, else the JSON of a lone text block,
/// else the text; content with no text at all comes as the content blocks.
pub(crate) fn value_of(outcome: CallOutcome) -> Value {
    if let Some(sc) = outcome.structured_content {
        return sc;
    }
    let texts: Vec<&str> = outcome
        .content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    match texts.as_slice() {
        [] => Value::Array(outcome.content),
        [one] => serde_json::from_str(one).unwrap_or_else(|_| Value::String(one.to_string())),
        many => Value::String(many.join("\n")),
    }
}

fn text_of(outcome: &CallOutcome) -> String {
    let text: Vec<&str> = outcome
        .content
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let t = text.join("\n");
    if t.is_empty() {
        "the tool reported an error".into()
    } else {
        crate::code::clip(&t, 2000)
    }
}
