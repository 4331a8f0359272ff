//! A 2025-11-25 upstream's own tasks: a tool it lists with `execution.taskSupport:
//! "required"` must be called as a task (`params.task`), or it answers -32601. The gateway
//! calls such a tool in that form and waits for the task's result with `tasks/result`, so
//! the call's outcome (and everything the gate does with it) is the task's result, as for
//! a 2026-07-28 upstream's tasks (`tasks.rs`).
//!
//! These requests are not rmcp's (its model is 2026-07-28's), so they go as raw requests:
//! rmcp reads the `{task}` answer as a `CustomResult`, kept whole. The tool's
//! `taskSupport` is read from the listing as the server wrote it (stdio and streamed HTTP
//! answers keep every key, `listing.rs`); a tool whose listing lost it (an HTTP server that
//! answers `tools/list` with plain JSON) is found by its -32601 and called again as a task.
//!
//! While `tasks/result` waits, the server's questions for the task (elicitations) come as
//! requests on it and go to the call's client (`requests::Relay`, bound to that request).
//! A call that ends before the task's result is read (cancelled by its client, timed out,
//! abandoned) cancels the task upstream (`tasks/cancel`). A connection lost while it waits
//! is waited out (`tasks::reconnected`) and the result asked for again.

use super::outcome::{map_err, outcome_from};
use super::{requests::CallerGuard, InFlight, Upstream};
use rmcp::model::{
    CallToolResult, ClientRequest, CustomRequest, CustomResult, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient};
use rmcp::Peer;
use serde_json::{json, Map, Value};
use std::time::Duration;
use tokio::time::Instant;
use toolgate_core::call::{CallError, CallOptions, CallOutcome};

/// The revision whose tasks this is.
pub(super) const REVISION: &str = "2025-11-25";

/// How long after the call's own timeout the upstream is asked to keep the task (its
/// `ttl`): the result must outlive the wait for it.
const TTL_MARGIN: Duration = Duration::from_secs(60);

/// Whether `tool` (an object as the upstream listed it) must be called as a task.
pub(super) fn required(tool: &Map<String, Value>) -> bool {
    let support = tool.get("execution").and_then(|e| e.get("taskSupport"));
    support.and_then(Value::as_str) == Some("required")
}

/// Whether `upstream` speaks this revision, and listed `tool` as requiring a task.
pub(super) fn listed_as_required(upstream: &Upstream, tool: &str) -> bool {
    let state = upstream.state.read().expect("state");
    state.protocol.as_deref() == Some(REVISION)
        && (state.tools.iter())
            .find(|t| t.get("name").and_then(Value::as_str) == Some(tool))
            .is_some_and(required)
}

/// Whether `upstream` speaks this revision (a -32601 to a call may then mean "call it as a
/// task").
pub(super) fn speaks(upstream: &Upstream) -> bool {
    upstream.state.read().expect("state").protocol.as_deref() == Some(REVISION)
}

/// Calls `tool` as a task on `peer` and waits for the task's result.
pub(super) async fn call(
    upstream: &Upstream,
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Map<String, Value>,
    opts: &CallOptions,
    meta: Option<RequestMetaObject>,
    caller: Option<&CallerGuard>,
) -> Result<CallOutcome, CallError> {
    let server = upstream.name().to_string();
    let config = &upstream.config;
    let timeout = opts.timeout.unwrap_or(config.call_timeout);
    let deadline = Instant::now() + timeout;
    let cancel = opts.cancel.clone().unwrap_or_default();
    let ttl = (timeout + TTL_MARGIN).as_millis() as u64;
    let params = json!({"name": tool, "arguments": arguments, "task": {"ttl": ttl}});
    // One raw request, with what is left of the call's time.
    let send = |peer: &Peer<RoleClient>, method: &'static str, params: Value| {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut options = PeerRequestOptions::with_timeout(left.max(Duration::from_millis(1)));
        options.meta = meta.clone();
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let peer = peer.clone();
        async move {
            (peer.send_request_with_option(request, options).await)
                .map_err(|e| map_err(e, config, tool, timeout))
        }
    };
    let created = send(peer, "tools/call", params).await?;
    if let Some(c) = caller {
        c.bind(&created.id);
    }
    let mut in_flight = InFlight(Some((peer, created.id.clone())));
    let created = tokio::select! {
        r = created.await_response() => r.map_err(|e| map_err(e, config, tool, timeout))?,
        _ = cancel.cancelled() => {
            in_flight.cancel("cancelled by the client").await;
            return Err(CallError::Cancelled);
        }
    };
    in_flight.0 = None;
    let id = match created {
        ServerResult::CustomResult(CustomResult(v)) => match task_id(&v) {
            Some(id) => id,
            // A plain result: the server ran the call without a task.
            None => return outcome(v, &server),
        },
        other => return outcome_from(other, &server),
    };
    if let Some(relay) = &opts.relay {
        relay.task_made();
    }
    // From here until its result is read, however the call ends, the task is cancelled.
    let mut task = Unfinished(Some((peer.clone(), id.clone())));
    let mut peer = peer.clone();
    // Since when the connection has been lost, while the result is asked for again.
    let mut lost: Option<Instant> = None;
    let answer = loop {
        let waiting = send(&peer, "tasks/result", json!({ "taskId": id })).await?;
        // The task's questions arrive on this request (HTTP) or name it: its caller answers.
        if let Some(c) = caller {
            c.bind(&waiting.id);
        }
        let answer = tokio::select! {
            r = waiting.await_response() => r,
            _ = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        // The connection was lost: asked again once it is back (a server that kept the task
        // answers; one that scoped it to the lost session says it does not know it).
        let lost_now = matches!(
            answer,
            Err(rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_))
        );
        if lost_now && !upstream.acts_for_callers() {
            let since = *lost.get_or_insert_with(Instant::now);
            let back = tokio::select! {
                back = super::tasks::reconnected(upstream, since + timeout) => back,
                _ = cancel.cancelled() => return Err(CallError::Cancelled),
            };
            if let Ok(back) = back {
                peer = back;
                task.0 = Some((peer.clone(), id.clone()));
                continue;
            }
        }
        break answer;
    };
    match answer {
        Ok(answer) => {
            task.0 = None;
            match answer {
                ServerResult::CustomResult(CustomResult(v)) => outcome(v, &server),
                other => outcome_from(other, &server),
            }
        }
        // The task's own failure ends it; a timeout or a lost answer leaves it to cancel.
        Err(e @ rmcp::ServiceError::McpError(_)) => {
            task.0 = None;
            Err(map_err(e, config, tool, timeout))
        }
        Err(e) => Err(map_err(e, config, tool, timeout)),
    }
}

/// A task made upstream whose result was not read: dropped armed, it asks the upstream to
/// cancel the task (in the background, as the call has ended), so no work goes on that
/// nobody waits for.
struct Unfinished(Option<(Peer<RoleClient>, String)>);

/// How long the upstream is given to acknowledge `tasks/cancel`.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

impl Drop for Unfinished {
    fn drop(&mut self) {
        let (Some((peer, id)), Ok(runtime)) =
            (self.0.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        runtime.spawn(async move {
            let params = json!({ "taskId": id });
            let request =
                ClientRequest::CustomRequest(CustomRequest::new("tasks/cancel", Some(params)));
            let options = PeerRequestOptions::with_timeout(CANCEL_WAIT);
            if let Ok(handle) = peer.send_request_with_option(request, options).await {
                let _ = handle.await_response().await;
            }
        });
    }
}

/// The task id of a 2025-11-25 `CreateTaskResult` (`{"task": {"taskId": ...}}`).
fn task_id(answer: &Value) -> Option<String> {
    let id = answer.get("task")?.get("taskId")?.as_str()?;
    Some(id.to_string())
}

/// A raw answer read as the tool's result.
fn outcome(answer: Value, server: &str) -> Result<CallOutcome, CallError> {
    match serde_json::from_value::<CallToolResult>(answer) {
        Ok(r) => outcome_from(ServerResult::CallToolResult(r), server),
        Err(e) => Err(CallError::Other {
            server: server.into(),
            message: format!(
                "answered a task's tools/call with something that is not a tool result: {e}"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_requires_a_task_only_when_it_says_required() {
        let tool = |v: Value| v.as_object().cloned().unwrap();
        assert!(required(&tool(
            json!({"name": "a", "execution": {"taskSupport": "required"}})
        )));
        assert!(!required(&tool(
            json!({"name": "a", "execution": {"taskSupport": "optional"}})
        )));
        assert!(!required(&tool(json!({"name": "a", "execution": {}}))));
        assert!(!required(&tool(json!({"name": "a"}))));
    }

    #[test]
    fn a_created_task_is_read_by_its_id_and_a_plain_answer_is_not_a_task() {
        let made = json!({"task": {"taskId": "t-1", "status": "working", "ttl": 60000}});
        assert_eq!(task_id(&made).as_deref(), Some("t-1"));
        assert_eq!(task_id(&json!({"content": []})), None);
        let plain = json!({"content": [{"type": "text", "text": "hi"}]});
        let out = outcome(plain, "s").unwrap();
        assert_eq!(out.content[0]["text"], "hi");
        assert!(outcome(json!({"content": 5}), "s").is_err());
    }
}
