//! Tasks in their 2025-11-25 form ("task-augmented requests") at the front: a `tools/call`
//! whose params carry `task: {ttl}` is answered at once with `{task}` (a `CreateTaskResult`),
//! and the client follows it with `tasks/get`, `tasks/result` (which waits for the end and
//! answers the call's own result) and `tasks/cancel`.
//!
//! The task is the same operation of the caller's principal that the 2026-07-28 form
//! (`tasks.rs`) and guided `continue` use, so its id belongs to the caller and a finished
//! task's result is read from the state store by any replica, after a restart too.
//!
//! rmcp reads only the 2026-07-28 form of tasks, so the frame layer does two things around it,
//! on both fronts:
//! - in a session that agreed on 2025-11-25 (over HTTP its `MCP-Protocol-Version` header;
//!   on stdio its `initialize` answer), it renames a request of that form (a task-augmented
//!   `tools/call`, `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`) to a method
//!   under [`PREFIX`], which rmcp hands to `on_custom_request`, which calls [`handle`];
//! - to rmcp's answers it adds what a 2025-11-25 client reads before it asks for a task
//!   ([`amend`]): the server's `tasks` capability in `initialize`'s result, and each tool's
//!   `execution.taskSupport` (`"optional"`) in `tools/list`'s.
//!
//! While the client waits in `tasks/result`, the upstream's questions (elicitation,
//! sampling, roots) go to it as requests marked with the task (`_meta` related-task), and
//! their answers go back to the upstream; meanwhile `tasks/get` says `input_required`.
//! `tasks/list` lists the caller's tasks: every operation its principal has kept in the
//! state store (so on any replica, and after a restart), guided `execute`'s included.

use super::tasks;
use super::Session;
use crate::policy::Caller;
use rmcp::model::{CallToolRequestParams, ErrorCode, GetExtensions, TaskStatus};
use rmcp::service::{OriginatingRequestId, RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use std::time::Duration;
use toolgate_core::exec::{OperationState, OperationStatus, StoreError};

/// Where the frame layer renames the methods of the 2025-11-25 form.
pub(super) const PREFIX: &str = "toolgate/2025-11-25/";

/// The one protocol revision whose tasks have this form.
pub(super) const VERSION: &str = "2025-11-25";

/// The `_meta` key that ties a message to its task.
const RELATED: &str = "io.modelcontextprotocol/related-task";

/// How long `tasks/result` waits between looks at the upstream's questions.
const LOOK: Duration = Duration::from_millis(200);

/// The server's `tasks` capability (2025-11-25): list, cancel, and task-augmented
/// `tools/call`.
fn capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// How many tasks one `tasks/list` page holds.
const PAGE: usize = 50;

/// `text` with its method renamed when it is a request of the 2025-11-25 task form; `None`
/// for every other message (left as it is). Called only for a session that agreed on
/// 2025-11-25 (a 2026-07-28 client's `tasks/result` must stay unknown to rmcp).
pub(super) fn renamed(text: &[u8]) -> Option<Vec<u8>> {
    // Every such request names a `task` key or a `tasks/` method; most messages name neither.
    if !text.windows(5).any(|w| w == b"\"task") {
        return None;
    }
    let mut message: Value = serde_json::from_slice(text).ok()?;
    // A 2026-07-28 request names its revision in `_meta`: rmcp serves that era as it says
    // (`tasks/result` and `tasks/list` unknown, `task` ignored).
    let modern =
        (message.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")).is_some();
    let method = message.get("method")?.as_str()?;
    let ours = match method {
        "tools/call" => message
            .pointer("/params/task")
            .is_some_and(Value::is_object),
        "tasks/result" | "tasks/list" | "tasks/get" | "tasks/cancel" => true,
        _ => false,
    };
    if modern || !ours || message.get("id").is_none() {
        return None;
    }
    message["method"] = json!(format!("{PREFIX}{method}"));
    serde_json::to_vec(&message).ok()
}

/// Adds to rmcp's answer `message` to a `method` request what a 2025-11-25 client reads
/// about tasks: the `tasks` capability to an `initialize` result that agreed on 2025-11-25,
/// and `execution.taskSupport` to each tool of a `tools/list` result (call it for that only
/// when the session agreed on 2025-11-25). Whether it changed anything.
pub(super) fn amend(method: &str, message: &mut Value) -> bool {
    let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
        return false;
    };
    match method {
        "initialize" => {
            if result.get("protocolVersion").and_then(Value::as_str) != Some(VERSION) {
                return false;
            }
            match result
                .get_mut("capabilities")
                .and_then(Value::as_object_mut)
            {
                Some(capabilities) => {
                    capabilities.insert("tasks".into(), capability());
                    true
                }
                None => false,
            }
        }
        "tools/list" => {
            let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
                return false;
            };
            for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                tool.entry("execution")
                    .or_insert_with(|| json!({"taskSupport": "optional"}));
            }
            true
        }
        _ => false,
    }
}

/// Which of rmcp's answers on stdio are amended for a 2025-11-25 client
/// (`frames::checked_stdio` tells it what went in and hands it what comes out).
#[derive(Default)]
pub(super) struct Amending {
    /// Ids (as JSON text) of `initialize` and `tools/list` requests not answered yet.
    ids: std::sync::Mutex<Vec<(String, &'static str)>>,
    /// The session agreed on 2025-11-25 (its `initialize` answer said so).
    agreed: std::sync::atomic::AtomicBool,
}

impl Amending {
    /// Whether the session agreed on 2025-11-25.
    pub(super) fn agreed(&self) -> bool {
        self.agreed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A request went to rmcp: its id is watched if its answer may be amended.
    pub(super) fn asked(&self, method: &str, id: &Value) {
        let method = match method {
            "initialize" => "initialize",
            "tools/list" => "tools/list",
            _ => return,
        };
        let mut ids = self
            .ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.push((id.to_string(), method));
    }

    /// `line` (one of rmcp's, with its newline) amended, when it answers a watched request.
    pub(super) fn answered(&self, line: &[u8]) -> Option<Vec<u8>> {
        let amended = {
            let mut ids = self
                .ids
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if ids.is_empty() {
                return None;
            }
            let mut message: Value = serde_json::from_slice(line).ok()?;
            // A request of the server's own may carry the same id: only answers count.
            if message.get("method").is_some() {
                return None;
            }
            let id = message.get("id")?.to_string();
            let at = ids.iter().position(|(watched, _)| *watched == id)?;
            let (_, method) = ids.remove(at);
            let agreed = std::sync::atomic::Ordering::Relaxed;
            if method == "tools/list" && !self.agreed.load(agreed) {
                return None;
            }
            if !amend(method, &mut message) {
                return None;
            }
            if method == "initialize" {
                self.agreed.store(true, agreed);
            }
            message
        };
        let mut text = serde_json::to_vec(&amended).ok()?;
        text.push(b'\n');
        Some(text)
    }
}

/// Answers a renamed request (`method` without [`PREFIX`]).
pub(super) async fn handle(
    session: &Session,
    method: &str,
    params: Option<Value>,
    context: RequestContext<RoleServer>,
) -> Result<Value, McpError> {
    let caller = session.bound_caller(&context)?;
    let params = params.unwrap_or_else(|| json!({}));
    match method {
        "tools/call" => call(session, &caller, params, &context),
        "tasks/get" => get(session, &caller, task_of(&params)?),
        "tasks/result" => result(session, &caller, task_of(&params)?, &context).await,
        "tasks/cancel" => cancel(session, &caller, task_of(&params)?),
        "tasks/list" => list(session, &caller, &params),
        other => Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("{PREFIX}{other}"),
            None,
        )),
    }
}

/// A task-augmented `tools/call`: started as an operation, answered `{task}` at once.
fn call(
    session: &Session,
    caller: &Caller,
    params: Value,
    context: &RequestContext<RoleServer>,
) -> Result<Value, McpError> {
    let request: CallToolRequestParams = serde_json::from_value(params)
        .map_err(|e| McpError::invalid_params(format!("tools/call: {e}"), None))?;
    let (op, _relay) = match tasks::start(session, caller, request, context, None) {
        Ok(started) => started,
        // Too many running: no task was made.
        Err(e) => return Err(McpError::internal_error(e.to_string(), None)),
    };
    let created = tasks::created(session, caller, &op);
    let id = tasks::task_id(&op, created);
    Ok(json!({"task": task(session, &id, TaskStatus::Working, created, None)}))
}

/// `tasks/get`: where the task stands.
fn get(session: &Session, caller: &Caller, id: &str) -> Result<Value, McpError> {
    let (op, created) = tasks::parse(id)?;
    let status = session.engine.store.status(&caller.principal(), op);
    let (status, message) = match status {
        Ok(OperationStatus::Running { progress, .. }) => match tasks::asking(op) {
            true => (TaskStatus::InputRequired, None),
            false => (TaskStatus::Working, progress.and_then(|p| p.message)),
        },
        Err(StoreError::Elsewhere { .. }) => (TaskStatus::Working, None),
        Ok(OperationStatus::Done(_)) => (TaskStatus::Completed, None),
        Ok(OperationStatus::Failed(message)) => (TaskStatus::Failed, Some(message)),
        Err(lost @ StoreError::Lost { .. }) => (TaskStatus::Failed, Some(lost.to_string())),
        Ok(OperationStatus::Cancelled) => (TaskStatus::Cancelled, None),
        Err(e) => return Err(tasks::unknown(id, &e)),
    };
    Ok(task(session, id, status, created, message))
}

/// `tasks/list`: the caller's tasks, oldest first, a page at a time; the cursor is the last
/// task of the page before. Listing delivers nothing: every result stays to be read.
fn list(session: &Session, caller: &Caller, params: &Value) -> Result<Value, McpError> {
    let after = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => {
            let (op, ms) = tasks::parse(cursor).map_err(|_| {
                McpError::invalid_params(
                    format!("cursor {cursor:?} is not one this gateway gave: call tasks/list without a cursor to start again"),
                    None,
                )
            })?;
            Some((ms, op.to_string()))
        }
        Some(_) => {
            return Err(McpError::invalid_params(
                "cursor: a string is required",
                None,
            ))
        }
    };
    let listed = session
        .engine
        .store
        .list(&caller.principal())
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let from = after.map_or(0, |after| {
        listed.partition_point(|l| (l.started_ms, &l.id) <= (after.0, &after.1))
    });
    let page = &listed[from..listed.len().min(from + PAGE)];
    let mut tasks_out = Vec::with_capacity(page.len());
    for op in page {
        let (status, message) = match &op.state {
            OperationState::Running if tasks::asking(&op.id) => (TaskStatus::InputRequired, None),
            OperationState::Running => (TaskStatus::Working, None),
            OperationState::Done => (TaskStatus::Completed, None),
            OperationState::Failed(m) | OperationState::Lost(m) => {
                (TaskStatus::Failed, Some(m.clone()))
            }
            OperationState::Cancelled => (TaskStatus::Cancelled, None),
        };
        let id = tasks::task_id(&op.id, op.started_ms);
        tasks_out.push(task(session, &id, status, op.started_ms, message));
    }
    let mut answer = json!({"tasks": tasks_out});
    if from + PAGE < listed.len() {
        if let Some(last) = page.last() {
            answer["nextCursor"] = json!(tasks::task_id(&last.id, last.started_ms));
        }
    }
    Ok(answer)
}

/// `tasks/result`: waits for the task's end and answers what the call would have answered
/// (a failed task, the error it would have returned). The upstream's questions meanwhile go
/// to the client, marked with the task.
async fn result(
    session: &Session,
    caller: &Caller,
    id: &str,
    context: &RequestContext<RoleServer>,
) -> Result<Value, McpError> {
    let (op, _) = tasks::parse(id)?;
    let (owner, store) = (caller.principal(), &session.engine.store);
    let status = loop {
        for (key, request) in tasks::unsent_questions(op) {
            let answer = ask(context, id, request).await;
            tasks::answer_question(op, &key, answer);
        }
        tokio::select! {
            status = store.wait(&owner, op, LOOK) => match status {
                Ok(OperationStatus::Running { .. }) | Err(StoreError::Elsewhere { .. }) => {}
                ended => break ended,
            },
            () = context.ct.cancelled() => {
                return Err(McpError::internal_error("tasks/result was cancelled", None));
            }
        }
    };
    tasks::forget(op);
    match status {
        Ok(OperationStatus::Done(outcome)) => {
            let mut result = to_value(super::convert::result_from(outcome))?;
            if let Some(object) = result.as_object_mut() {
                let meta = object.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(RELATED.into(), json!({"taskId": id}));
                }
            }
            Ok(result)
        }
        Ok(OperationStatus::Failed(message)) => Err(McpError::internal_error(message, None)),
        Err(lost @ StoreError::Lost { .. }) => {
            Err(McpError::internal_error(lost.to_string(), None))
        }
        Ok(OperationStatus::Cancelled) => Err(McpError::internal_error(
            format!("task {id} was cancelled: it has no result"),
            None,
        )),
        Ok(OperationStatus::Running { .. }) | Err(StoreError::Elsewhere { .. }) => {
            Err(McpError::internal_error("the task is still running", None))
        }
        Err(e) => Err(tasks::unknown(id, &e)),
    }
}

/// Asks the client one of the upstream's questions (`{"method", "params"}`), marked with
/// task `id`, over the stream of its `tasks/result`; the answer as the upstream reads it
/// (`None` when the client could not answer).
async fn ask(context: &RequestContext<RoleServer>, id: &str, mut request: Value) -> Option<Value> {
    if let Some(params) = request.get_mut("params").and_then(Value::as_object_mut) {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED.into(), json!({"taskId": id}));
        }
    }
    let sent = async {
        let mut request: rmcp::model::ServerRequest =
            serde_json::from_value(request).map_err(|e| e.to_string())?;
        request
            .extensions_mut()
            .insert(OriginatingRequestId(context.id.clone()));
        let peer = context.peer.clone();
        // A task of its own, as the session relay sends them (see relay.rs).
        let answer = tokio::spawn(async move { peer.send_request(request).await })
            .await
            .map_err(|e| e.to_string())?;
        match answer {
            Ok(rmcp::model::ClientResult::EmptyResult(_)) => Ok(json!({})),
            Ok(answer) => serde_json::to_value(answer).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    let answer: Result<Value, String> = sent.await;
    answer
        .inspect_err(|e| tracing::warn!("a task's question could not be asked of its client: {e}"))
        .ok()
}

/// `tasks/cancel`: cancels a running task and answers it; one that already ended is
/// refused (-32602), as the spec says.
fn cancel(session: &Session, caller: &Caller, id: &str) -> Result<Value, McpError> {
    let (op, created) = tasks::parse(id)?;
    let owner = caller.principal();
    match session.engine.store.status(&owner, op) {
        Ok(OperationStatus::Running { .. }) => {}
        Err(e @ StoreError::Elsewhere { .. }) => {
            return Err(McpError::internal_error(e.to_string(), None))
        }
        Ok(_) | Err(StoreError::Lost { .. }) => {
            return Err(McpError::invalid_params(
                format!("cannot cancel task {id}: it has already ended (tasks/get says how)"),
                None,
            ))
        }
        Err(e) => return Err(tasks::unknown(id, &e)),
    }
    match session.engine.store.cancel(&owner, op) {
        Ok(_) => Ok(task(session, id, TaskStatus::Cancelled, created, None)),
        Err(e @ StoreError::Elsewhere { .. }) => Err(McpError::internal_error(e.to_string(), None)),
        Err(e) => Err(tasks::unknown(id, &e)),
    }
}

/// A task as the 2025-11-25 form writes it.
fn task(
    session: &Session,
    id: &str,
    status: TaskStatus,
    created_ms: u64,
    message: Option<String>,
) -> Value {
    let ttl = session.engine.store.limits().operation_ttl.as_millis() as u64;
    let mut task = json!({
        "taskId": id,
        "status": status,
        "createdAt": tasks::rfc3339(created_ms),
        "lastUpdatedAt": tasks::rfc3339(tasks::now()),
        "ttl": ttl,
        "pollInterval": tasks::POLL_MS,
    });
    if let Some(message) = message {
        task["statusMessage"] = json!(message);
    }
    task
}

fn task_of(params: &Value) -> Result<&str, McpError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::invalid_params("taskId: a string is required", None))
}

fn to_value(value: impl serde::Serialize) -> Result<Value, McpError> {
    serde_json::to_value(value).map_err(|e| McpError::internal_error(e.to_string(), None))
}

#[cfg(test)]
mod tests {
    use super::{amend, renamed, PREFIX};
    use serde_json::{json, Value};

    fn method(text: &str) -> Option<String> {
        let renamed = renamed(text.as_bytes())?;
        let v: Value = serde_json::from_slice(&renamed).unwrap();
        Some(v["method"].as_str().unwrap().to_string())
    }

    #[test]
    fn only_requests_of_the_2025_form_are_renamed() {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","task":{"ttl":60000}}}"#;
        assert_eq!(method(call), Some(format!("{PREFIX}tools/call")));
        let plain = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"task"}}"#;
        assert_eq!(method(plain), None);
        let get = r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"op-1.2"}}"#;
        assert_eq!(method(get), Some(format!("{PREFIX}tasks/get")));
        let modern = r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"op-1.2","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(method(modern), None);
        let modern_call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","task":{"ttl":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(method(modern_call), None, "2026-07-28 ignores `task`");
        let result = r#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"x"}}"#;
        assert_eq!(method(result), Some(format!("{PREFIX}tasks/result")));
        let note = r#"{"jsonrpc":"2.0","method":"tasks/result","params":{"taskId":"x"}}"#;
        assert_eq!(method(note), None, "a notification is not a request");
        assert_eq!(
            method(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#),
            None
        );
    }

    #[test]
    fn a_2025_session_reads_the_capability_and_each_tools_task_support() {
        let mut init = json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}});
        assert!(amend("initialize", &mut init));
        assert_eq!(
            init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        let mut older = json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{}}});
        assert!(!amend("initialize", &mut older));
        assert_eq!(older["result"]["capabilities"], json!({}));
        let mut list = json!({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b","execution":{"taskSupport":"forbidden"}}]}});
        assert!(amend("tools/list", &mut list));
        assert_eq!(
            list["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        assert_eq!(
            list["result"]["tools"][1]["execution"]["taskSupport"],
            "forbidden"
        );
        let mut error = json!({"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}});
        assert!(!amend("tools/list", &mut error));
    }
}
