//! An upstream's own tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663):
//! a `tools/call` it answers with a `CreateTaskResult` is followed here to its end, so the
//! call's outcome (and everything the gate does with it) is the task's result.
//!
//! The task is polled with `tasks/get` at the interval it suggests; its questions
//! (`input_required`) go to the call's client as any upstream question does
//! (`mrtr::fulfil`: a task's client sees them in its own task, an interactive one is
//! asked) and their answers go back by `tasks/update`; cancelling the call cancels the
//! upstream's task (`tasks/cancel`). A `failed` task is the upstream's error, its code
//! kept. A connection lost while the task runs is waited out (`reconnected`): the task is
//! asked after again on the new connection, so a network fault heals without failing the
//! call, as far as the upstream kept the task.

use super::outcome::{map_err, outcome_from};
use super::{mrtr, Upstream};
use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
    RequestMetaObject, ServerResult, Task, TaskPayload, UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::{PeerRequestOptions, RoleClient};
use rmcp::Peer;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;
use toolgate_core::call::{CallError, CallOptions, CallOutcome};

/// The poll interval used when the task suggests none, and the bounds on what it suggests.
const POLL_DEFAULT: Duration = Duration::from_millis(500);
const POLL_MIN: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_secs(5);
/// The pause before a request that failed as a lost connection is tried again.
const RETRY: Duration = Duration::from_millis(250);

/// Follows the upstream's task `task` (made for a call of `tool`) until it ends.
pub(super) async fn follow(
    upstream: &Upstream,
    peer: &Peer<RoleClient>,
    task: Task,
    opts: &CallOptions,
    tool: &str,
    meta: Option<RequestMetaObject>,
) -> Result<CallOutcome, CallError> {
    let server = upstream.name().to_string();
    let id = task.task_id;
    let poll = task
        .poll_interval_ms
        .map_or(POLL_DEFAULT, Duration::from_millis)
        .clamp(POLL_MIN, POLL_MAX);
    let cancel = opts.cancel.clone().unwrap_or_default();
    let mut peer = peer.clone();
    // Since when the connection has been lost (`None` while the task is being answered).
    let mut lost: Option<Instant> = None;
    let ask = |peer: Peer<RoleClient>, request: ClientRequest| {
        let mut options = PeerRequestOptions::with_timeout(upstream.config.call_timeout);
        options.meta = meta.clone();
        async move {
            let handle = peer
                .send_request_with_option(request, options)
                .await
                .map_err(|e| map_err(e, &upstream.config, tool, upstream.config.call_timeout))?;
            (handle.await_response().await)
                .map_err(|e| map_err(e, &upstream.config, tool, upstream.config.call_timeout))
        }
    };
    let cancelled = |peer: Peer<RoleClient>| async {
        let request = CancelTaskRequest::new(CancelTaskParams::new(id.clone()));
        let _ = ask(peer, ClientRequest::CancelTaskRequest(request)).await;
        CallError::Cancelled
    };
    loop {
        let request = GetTaskRequest::new(GetTaskParams::new(id.clone()));
        let got = tokio::select! {
            got = ask(peer.clone(), ClientRequest::GetTaskRequest(request)) => got,
            _ = cancel.cancelled() => return Err(cancelled(peer).await),
        };
        let got = match got {
            // The connection was lost: the task lives on upstream, asked again once the
            // gateway is connected again (an upstream that forgot it says so).
            Err(e @ CallError::Closed { .. }) if !upstream.acts_for_callers() => {
                let since = *lost.get_or_insert_with(Instant::now);
                let back = tokio::select! {
                    back = reconnected(upstream, since + upstream.config.call_timeout) => back,
                    _ = cancel.cancelled() => return Err(CallError::Cancelled),
                };
                peer = back.map_err(|()| e)?;
                continue;
            }
            other => {
                lost = None;
                other?
            }
        };
        let ServerResult::GetTaskResult(got) = got else {
            return Err(CallError::Other {
                server,
                message: format!("answered tasks/get for its task {id:?} with something else"),
            });
        };
        match got.task.payload {
            TaskPayload::Working => {
                tokio::select! {
                    _ = tokio::time::sleep(poll) => {}
                    _ = cancel.cancelled() => return Err(cancelled(peer).await),
                }
            }
            TaskPayload::InputRequired { input_requests } => {
                let Some(relay) = &opts.relay else {
                    let _ = cancelled(peer.clone()).await;
                    let why =
                        "its task needs input from the user, and no client stands behind this call";
                    return Err(CallError::Other {
                        server,
                        message: why.into(),
                    });
                };
                let requests = match serde_json::to_value(&input_requests) {
                    Ok(Value::Object(m)) => m,
                    _ => serde_json::Map::new(),
                };
                let answers = tokio::select! {
                    a = mrtr::fulfil(relay, &requests) => a,
                    _ = cancel.cancelled() => return Err(cancelled(peer).await),
                };
                let answers = match answers {
                    Ok(a) => a,
                    Err(e) => {
                        let _ = cancelled(peer.clone()).await;
                        let message = e.to_string();
                        return Err(CallError::Other { server, message });
                    }
                };
                let update = UpdateTaskRequest::new(UpdateTaskParams::new(id.clone(), answers));
                ask(peer.clone(), ClientRequest::UpdateTaskRequest(update)).await?;
            }
            TaskPayload::Completed { result } => {
                let result = serde_json::from_value(Value::Object(result)).map_err(|e| {
                    CallError::Other {
                        server: server.clone(),
                        message: format!(
                            "its task {id:?} ended with a result that is not a tool result: {e}"
                        ),
                    }
                })?;
                return outcome_from(ServerResult::CallToolResult(result), &server);
            }
            TaskPayload::Failed { error } => {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                let message = error.get("message").and_then(Value::as_str);
                return Err(CallError::Rejected {
                    server,
                    code: code as i32,
                    message: message.unwrap_or("its task failed").to_string(),
                });
            }
            TaskPayload::Cancelled => return Err(CallError::Cancelled),
            _ => {
                let why = format!("its task {id:?} is in a state this gateway does not know");
                return Err(CallError::Other {
                    server,
                    message: why,
                });
            }
        }
    }
}

/// The upstream's connection after a request on it failed as lost: after a short pause,
/// the current one once it is usable (the supervisor reconnects with backoff), or `Err`
/// at `deadline`.
pub(super) async fn reconnected(
    upstream: &Upstream,
    deadline: Instant,
) -> Result<Peer<RoleClient>, ()> {
    let mut changed = upstream.watch();
    tokio::time::sleep_until(deadline.min(Instant::now() + RETRY)).await;
    loop {
        match upstream.shared_peer() {
            Ok(peer) if !peer.is_transport_closed() => return Ok(peer),
            _ => {}
        }
        match tokio::time::timeout_at(deadline, changed.changed()).await {
            Ok(Ok(())) => {}
            _ => return Err(()),
        }
    }
}
