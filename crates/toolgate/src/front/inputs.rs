//! MRTR pass-through at the front: a 2026-07-28 client's `inputResponses` and
//! `requestState` on the way to its upstream call, and an upstream's `input_required` on
//! the way back, its `requestState` replaced by a handle the caller's principal owns
//! (`upstream::mrtr` has the whole picture).
//!
//! And parked calls: when an older upstream sends its own request (elicitation, sampling,
//! roots) during a 2026-07-28 client's one-tool call, the call keeps running in its own
//! task while the client is answered `input_required` with that request, under a handle
//! (`pk-…`) naming the parked call. The retry's answer goes to the waiting upstream
//! request, and the same call goes on: to its result, or to the next question.

use super::relay::{Asked, SessionRelay};
use crate::gateway::Gateway;
use crate::policy::approval::STATE_PREFIX as APPROVAL_STATE;
use crate::policy::Caller;
use crate::upstream::mrtr::{input_key, MrtrRequest, Resumed, StateRefused};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
    InputRequiredResult,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolgate_core::call::RelayKind;

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
        Some(s) if s.starts_with(APPROVAL_STATE) => {
            // Another principal's approval: refused and audited like the other handles,
            // and left to its owner. The owner's own is approval's to take.
            let approvals = &caller.policy.approvals;
            if let Err(e) = approvals.check_owner(&caller.principal(), s) {
                caller.policy.audit_foreign(caller, "requestState", s);
                return Err(McpError::invalid_params(e.to_string(), None));
            }
            return Ok(out);
        }
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
        if e == StateRefused::Foreign {
            caller.policy.audit_foreign(caller, "requestState", state);
        }
        McpError::invalid_params(e.to_string(), None)
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

/// How a one-tool call of a 2026-07-28 client ended this round.
pub(super) enum Outcome {
    /// Its result, and the relay it ran with (what its upstream asked is read from it).
    Done(CallToolResult, Option<Arc<SessionRelay>>),
    /// Its upstream asked something: the call is parked, the client asked.
    Asked(InputRequiredResult),
}

/// A one-tool call that may be parked.
pub(super) enum Running {
    /// Polled by the request that started it, until it must be parked: one task and one
    /// wake-up fewer than a task of its own, for the calls that are never parked.
    Here(Pin<Box<dyn Future<Output = CallToolResult> + Send>>),
    /// On a task of its own: once parked, it outlives the request that started it.
    Task(JoinHandle<CallToolResult>),
}

impl Running {
    /// The call as a task of its own (spawned now, if it ran here).
    fn into_task(self) -> JoinHandle<CallToolResult> {
        match self {
            Self::Here(call) => tokio::spawn(call),
            Self::Task(task) => task,
        }
    }
}

impl Future for Running {
    type Output = CallToolResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CallToolResult> {
        match &mut *self {
            Self::Here(call) => call.as_mut().poll(cx),
            Self::Task(task) => Pin::new(task).poll(cx).map(|done| {
                done.unwrap_or_else(|e| {
                    super::convert::tool_error(format!("the call failed inside the gateway: {e}"))
                })
            }),
        }
    }
}

/// A call held open while its upstream waits for the client's answer.
struct ParkedCall {
    task: JoinHandle<CallToolResult>,
    /// Where the call's next upstream request arrives.
    questions: mpsc::Receiver<Asked>,
    /// The question asked: its key, the input request, and where its answer goes.
    // `Err` is the client's own error text, relayed to the upstream as it came: a string is
    // the value.
    asking: (String, Value, oneshot::Sender<Result<Value, String>>),
    relay: Arc<SessionRelay>,
    /// Cancels the call: the request serving it no longer carries its own token, which
    /// rmcp cancels once that request is answered.
    cancel: CancellationToken,
}

/// Waits for the call to finish, or for its upstream to ask something (then the call is
/// parked, on a task of its own, and the client is asked).
/// A client cancelling the request being served (`serving`) cancels the call (`cancel`).
pub(super) async fn run(
    gw: &Gateway,
    caller: &Caller,
    mut call: Running,
    mut questions: mpsc::Receiver<Asked>,
    relay: Arc<SessionRelay>,
    (cancel, serving): (CancellationToken, &CancellationToken),
) -> Outcome {
    let cancelled = async {
        serving.cancelled().await;
        cancel.cancel();
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = cancelled => unreachable!("pending"),
        result = &mut call => Outcome::Done(result, Some(relay)),
        Some(asked) = questions.recv() => {
            let key = input_key(asked.kind).to_string();
            let asking = (key, asked.request, asked.reply);
            let task = call.into_task();
            park(gw, caller, ParkedCall { task, questions, asking, relay, cancel })
        }
    }
}

fn park(gw: &Gateway, caller: &Caller, call: ParkedCall) -> Outcome {
    let (key, request) = (call.asking.0.clone(), call.asking.1.clone());
    let handle = gw.parked.park(&caller.principal(), Box::new(call));
    let result = json!({"resultType": "input_required", "inputRequests": {key: request}, "requestState": handle});
    match serde_json::from_value(result) {
        Ok(r) => Outcome::Asked(r),
        Err(e) => Outcome::Done(
            super::convert::tool_error(format!("cannot pass the upstream's request on: {e}")),
            None,
        ),
    }
}

/// The retry of a parked call: its answer goes to the upstream's waiting request and the
/// call goes on. A retry without the answer is asked again (the call stays parked).
pub(super) async fn resume_parked(
    gw: &Gateway,
    caller: &Caller,
    state: &str,
    responses: Option<&BTreeMap<String, Value>>,
    serving: &CancellationToken,
) -> Result<Outcome, McpError> {
    let parked = gw.parked.take(&caller.principal(), state).map_err(|e| {
        if e == StateRefused::Foreign {
            caller.policy.audit_foreign(caller, "requestState", state);
        }
        McpError::invalid_params(e.to_string(), None)
    })?;
    let call = parked
        .downcast::<ParkedCall>()
        .map_err(|_| McpError::internal_error("a parked call of another kind", None))?;
    let ParkedCall {
        task,
        questions,
        asking: (key, request, reply),
        relay,
        cancel,
    } = *call;
    let answer = responses
        .and_then(|r| r.get(&key))
        .filter(|v| v.is_object());
    let Some(answer) = answer else {
        let asking = (key, request, reply);
        let call = ParkedCall {
            task,
            questions,
            asking,
            relay,
            cancel,
        };
        return Ok(park(gw, caller, call));
    };
    // The upstream may have given up waiting; the call's own result says so then.
    let _ = reply.send(Ok(answer.clone()));
    let call = Running::Task(task);
    Ok(run(gw, caller, call, questions, relay, (cancel, serving)).await)
}

/// The answer to the client: the question asked of it (a parked call's, the approval's,
/// or the upstream's own `input_required`), the missing capability (-32021, when the call
/// failed after its upstream was refused it), or the result.
pub(super) fn finish(
    gw: &Gateway,
    caller: &Caller,
    context: &RequestContext<RoleServer>,
    outcome: Outcome,
    approver: Option<Arc<super::approve::MrtrApprover>>,
) -> Result<CallToolResponse, McpError> {
    let (result, relay) = match outcome {
        Outcome::Asked(asked) => return Ok(asked.into()),
        Outcome::Done(result, relay) => (result, relay),
    };
    // Asked for approval the 2026-07-28 way: nothing ran; the client retries with it.
    if let Some(asked) = approver.and_then(|m| m.input_required()) {
        return Ok(asked.into());
    }
    if let Some(relay) = relay {
        // The upstream asked for input: the client answers it and retries (MRTR).
        if let Some(asked) = relay.take_asked() {
            return answer(gw, caller, asked).map(Into::into);
        }
        // Only a call that failed without it: a call that succeeded although its upstream
        // was refused (server-everything asks for roots on a timer, whatever call is in
        // flight then) keeps its result.
        // A call the gateway's own timeout ended did not fail for want of the capability,
        // even if a timer-driven ask was refused while it ran.
        let failed = result.is_error == Some(true) && !relay.ended_by_timeout();
        if let Some(missing) = failed.then(|| undeclared(&relay, context)).flatten() {
            return Err(missing);
        }
    }
    Ok(result.into())
}

/// The error for a call that failed after its upstream asked for a capability (sampling,
/// elicitation, roots) the 2026-07-28 client did not declare in its `_meta`: -32021, naming
/// it. A client that declared it, or a call that succeeded anyway, gets the call's own
/// result (the upstream was told it cannot be asked).
#[expect(
    deprecated,
    reason = "sampling and roots: deprecated by SEP-2577, still what servers ask"
)]
fn undeclared(relay: &SessionRelay, context: &RequestContext<RoleServer>) -> Option<McpError> {
    let Some(kind) = relay.refused_kind() else {
        // The upstream refused the call itself for what the client did not declare (an
        // extension, such as tasks for a tool that needs one): the same error, its data kept.
        let data = relay.missing_data()?;
        let message = "the tool's server needs a capability the client did not declare: declare the one in this error's data.requiredCapabilities and call again";
        let code = rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY;
        return Some(McpError::new(code, message, data));
    };
    let declared = context.client_capabilities().unwrap_or_default();
    let (has, needed) = match kind {
        RelayKind::Sampling => (
            declared.sampling.is_some(),
            ClientCapabilities::builder().enable_sampling().build(),
        ),
        RelayKind::Elicitation => (
            declared.elicitation.is_some(),
            ClientCapabilities::builder().enable_elicitation().build(),
        ),
        RelayKind::Roots => (
            declared.roots.is_some(),
            ClientCapabilities::builder().enable_roots().build(),
        ),
    };
    (!has).then(|| McpError::missing_required_client_capability(needed))
}
