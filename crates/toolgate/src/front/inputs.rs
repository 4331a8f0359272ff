//! MRTR pass-through at the front: a 2026-07-28 client's `inputResponses` and
//! `requestState` on the way to its upstream call, and an upstream's `input_required` on
//! the way back, its `requestState` replaced by a handle the caller's principal owns
//! (`upstream::mrtr` has the whole picture).

use crate::gateway::Gateway;
use crate::policy::approval::STATE_PREFIX as APPROVAL_STATE;
use crate::policy::Caller;
use crate::upstream::mrtr::{MrtrRequest, Resumed};
use rmcp::model::{CallToolRequestParams, InputRequiredResult};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};

/// What this request carries for its upstream call. A `requestState` that is not one of
/// the gateway's live handles for this caller is refused (-32602) before anything runs;
/// approval's own states are left to approval (`approve.rs`), and their answers are not
/// the upstream's.
pub(super) fn request_for(
    gw: &Gateway,
    caller: &Caller,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<MrtrRequest, McpError> {
    let mut out = MrtrRequest {
        client_capabilities: context
            .client_capabilities()
            .and_then(|c| serde_json::to_value(c).ok()),
        ..Default::default()
    };
    match request.request_state.as_deref() {
        Some(s) if s.starts_with(APPROVAL_STATE) => return Ok(out),
        Some(s) => out.resumes = Some(resume(gw, caller, s)?),
        None => {}
    }
    out.input_responses = request.input_responses.clone();
    Ok(out)
}

/// The upstream call the handle `state` names, taken for `caller`: -32602 for a handle
/// that is unknown, altered, used, expired or another principal's (that one audited).
pub(super) fn resume(gw: &Gateway, caller: &Caller, state: &str) -> Result<Resumed, McpError> {
    gw.inputs.take(&caller.principal(), state).map_err(|e| {
        if e.contains("another caller") {
            caller.policy.audit_foreign(caller, "requestState", state);
        }
        McpError::invalid_params(e, None)
    })
}

/// The client's `input_required` for the upstream's (`server`, `tool`, `result`): the same
/// input requests, and a fresh handle as `requestState`.
pub(super) fn answer(
    gw: &Gateway,
    caller: &Caller,
    (server, tool, mut result): (String, String, Value),
) -> Result<InputRequiredResult, McpError> {
    let state = result
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_string);
    let handle = gw.inputs.remember(
        &caller.principal(),
        Resumed {
            server,
            tool,
            state,
        },
    );
    result["requestState"] = json!(handle);
    serde_json::from_value(result).map_err(|e| {
        McpError::internal_error(
            format!("the upstream's input_required is malformed: {e}"),
            None,
        )
    })
}
