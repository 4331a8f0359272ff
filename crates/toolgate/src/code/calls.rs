//! A program's tool call, through the same gate as execute ([`admit`]): only tools the
//! caller may use, `[code.flows]` rules on values earlier results of the run held,
//! destructive ones refused (`approval_required`) unless configured,
//! arguments validated against the full schema, the upstream's timeout capped by the
//! run's deadline, and a result too large for the program refused (`limit`).

use super::worker::ToolCall;
use crate::catalog::ToolRecord;
use crate::guided::execute::{admit, Refusal};
use crate::guided::Engine;
use crate::policy::Caller;
use crate::principal::Principal;
use crate::upstream::{CallError, CallOptions, CallOutcome};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate_sandbox::protocol::CallFailure;

/// The tools one run may call and the state every call checks.
pub struct Gate<'a> {
    pub engine: &'a Engine,
    pub owner: &'a Principal,
    /// Who runs the program: every call is authorized for this caller's key, as execute's are.
    pub caller: &'a Caller,
    /// (server, original name) -> record: exactly what the run's `tools` object holds.
    pub allowed: HashMap<(String, String), Arc<ToolRecord>>,
    /// When the run's own deadline passes (calls get no more time than the run has).
    pub deadline: Instant,
    /// PII the run's results held, for `[code.flows]` (tracked only when rules exist).
    pub flows: super::flows::RunFlows,
}

fn fail(code: &str, message: impl Into<String>) -> CallFailure {
    CallFailure {
        code: code.into(),
        message: message.into(),
    }
}

/// True for a tool whose annotations say it may destroy data.
pub fn destructive(tool: &ToolRecord) -> bool {
    let a = tool.tool.get("annotations");
    let hint = |k: &str| a.and_then(|a| a.get(k)).and_then(Value::as_bool);
    hint("readOnlyHint") != Some(true) && hint("destructiveHint") == Some(true)
}

impl Gate<'_> {
    pub async fn call(&self, call: ToolCall) -> Result<Value, CallFailure> {
        let key = (call.server, call.tool);
        let Some(tool) = self.allowed.get(&key) else {
            let name = format!("{}/{}", key.0, key.1);
            let reason = "not a tool this program's caller may use";
            self.engine
                .policy
                .audit_unavailable(self.caller, &name, reason);
            return Err(fail(
                "denied",
                format!(
                    "there is no tool {:?} on server {:?} that this caller may use",
                    key.1, key.0
                ),
            ));
        };
        let config = &self.engine.gw.config.code;
        let name = tool.id.to_string();
        if destructive(tool) && !config.allow_destructive.contains(&name) {
            return Err(fail(
                "approval_required",
                format!("{name} is marked destructive: make this call with execute, where the user can confirm it"),
            ));
        }
        // A value an earlier result of this run held, going where a flow rule forbids
        // (refused after the permit below, so it is audited like any refusal).
        let flow_refusal = if config.flows.is_empty() {
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
        // The key's scopes and tier, exactly as for execute (and audited the same way).
        let mut permit = match self.engine.policy.check(self.caller, tool, &arguments) {
            Ok(p) => p,
            Err(refusal) => return Err(fail("denied", refusal)),
        };
        if let Some((rule, message)) = flow_refusal {
            permit.not_run(&format!("flow rule {rule}"));
            return Err(fail("denied", message));
        }
        let admitted = match admit(self.engine, self.owner, tool, arguments) {
            Ok(a) => a,
            Err(Refusal::InvalidArguments(report)) => {
                permit.not_run("invalid arguments");
                return Err(fail("invalid_arguments", report.to_text(&name)));
            }
            Err(Refusal::Token(e)) => {
                permit.not_run("unknown or foreign PII token");
                let e = (self.engine).refused(self.caller, "piiToken", &e.message.clone(), e);
                return Err(fail("invalid_arguments", e));
            }
            Err(Refusal::Flow { rule, message }) => {
                permit.not_run(&format!("flow rule {rule}"));
                return Err(fail("denied", message));
            }
        };
        if let Err(refusal) = permit.confirm(self.caller).await {
            return Err(fail("approval_required", refusal));
        }
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
        let result = admitted.run("code", opts).await;
        permit.finish(&result);
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
pub fn value_of(outcome: CallOutcome) -> Value {
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
        super::clip(&t, 2000)
    }
}
