//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) at the front.
//!
//! A direct-surface `tools/call` from a client that declared the extension (at `initialize`,
//! or in the request's `_meta` client capabilities) runs as an operation of the caller's
//! principal in the state store: the same operations guided `execute` hands out and
//! `continue` follows, so one mechanism serves both. A call that finishes within
//! [`IMMEDIATE`] is answered plainly (the spec's immediate-result shortcut); a longer one
//! answers a `CreateTaskResult` whose `taskId` names the operation (and when it was made).
//! `tasks/get`, `tasks/update` and `tasks/cancel` find it by the caller's principal, so a
//! task belongs to its caller like every other handle, and a finished one's result is read
//! from the shared store by any replica. An upstream's failure to answer (a protocol error,
//! a timeout, a lost connection) is a `failed` task; a tool's own error a `completed` one
//! whose result has `isError`.
//!
//! Guided `execute` makes the same operations: one that outlives `guided.wait` is answered,
//! to a client that declared tasks, as a task (its id marked `g.`), whose result
//! `tasks/get` shapes as `continue` does (the token budget, a cursor for the rest).
//!
//! An upstream that asks the client something during a task (elicitation, sampling, roots,
//! as requests of an older upstream or as a 2026-07-28 upstream's `input_required`) parks
//! the task in `input_required`: its questions, keyed by ids of the gateway's, are in
//! `tasks/get`'s `inputRequests` until `tasks/update` answers them (some or all at once),
//! and the call goes on. Those questions are kept by the replica running the task.

use super::direct;
use super::Session;
use crate::policy::Caller;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult,
    DetailedTask, GetTaskResult, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{oneshot, Notify};
use toolgate_core::call::{CallOutcome, ClientRelay, MrtrRequest, RelayKind};
use toolgate_core::exec::{OperationStatus, StoreError};
use toolgate_core::principal::Principal;

/// How long a call may take and still be answered plainly rather than as a task.
pub(super) const IMMEDIATE: Duration = Duration::from_millis(250);

/// The poll interval a task suggests.
pub(super) const POLL_MS: u64 = 500;

/// Whether this request's client declared the tasks extension.
pub(super) fn declared(context: &RequestContext<RoleServer>) -> bool {
    (context.client_capabilities()).is_some_and(|c| c.supports_tasks())
}

/// Runs a direct-surface call as an operation; a plain answer if it ends within
/// [`IMMEDIATE`], else a task. While the client has no answer yet, the upstream's own
/// answer decides: its task (the extension passed on in a 2026-07-28 request's
/// capabilities) is answered as a task at once, and its `input_required` goes back to the
/// client as it is (MRTR), as a native server with tasks answers both.
pub(super) async fn call(
    session: &Session,
    caller: &Caller,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let mrtr = super::request::modern(context)
        .then(|| super::inputs::request_for(session.gw(), caller, &request, context))
        .transpose()?;
    let (op, relay) = match start(session, caller, request, context, mrtr) {
        Ok(started) => started,
        // Too many running for this caller, or for the gateway: said as a tool error, as
        // execute says it.
        Err(e) => return Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into()),
    };
    let created = created(session, caller, &op);
    let owner = caller.principal();
    let store = &session.engine.store;
    let waited = tokio::select! {
        waited = store.wait(&owner, &op, IMMEDIATE) => Some(waited),
        () = relay.made.notified() => None,
    };
    if let Some(asked) = relay.settle() {
        inboxes().remove(&op);
        return super::inputs::answer(session.gw(), caller, asked).map(Into::into);
    }
    let as_task = || {
        let task = task(
            &task_id(&op, created),
            TaskStatus::Working,
            created,
            session,
        );
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    };
    match waited {
        None | Some(Ok(OperationStatus::Running { .. }) | Err(StoreError::Elsewhere { .. })) => {
            as_task()
        }
        Some(Ok(OperationStatus::Done(outcome))) => Ok(super::convert::result_from(outcome).into()),
        Some(Ok(OperationStatus::Failed(message))) => {
            Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
        }
        Some(Ok(OperationStatus::Cancelled)) => {
            Ok(CallToolResult::error(vec![ContentBlock::text("the call was cancelled")]).into())
        }
        Some(Err(e)) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

/// Starts `request` as an operation of the caller's principal: its upstream's questions
/// wait in the task's inbox (for `tasks/update`, or for the 2025-11-25 form's
/// `tasks/result`), and `mrtr` is a 2026-07-28 request's input for its upstream. Refused
/// (as the tool error `execute` would give) when the caller or the gateway runs too many.
pub(super) fn start(
    session: &Session,
    caller: &Caller,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    mrtr: Option<MrtrRequest>,
) -> Result<(String, Arc<TaskRelay>), StoreError> {
    let owner = caller.principal();
    // The upstream's questions wait in the task's inbox.
    let inbox = Arc::new(Inbox::default());
    let relay = Arc::new(TaskRelay {
        inbox: inbox.clone(),
        declared: context.client_capabilities().unwrap_or_default(),
        owner: owner.clone(),
        mrtr,
        phase: Mutex::new(Phase::Waiting),
        made: Notify::new(),
    });
    let mut run_caller = caller.clone();
    run_caller.relay = Some(relay.clone());
    let (run_session, mut cx) = (session.clone(), context.clone());
    let (name, args) = (
        request.name.into_owned(),
        request.arguments.unwrap_or_default(),
    );
    let closing = inbox.clone();
    let guided = session.surface() == super::Surface::Guided;
    let started = session
        .engine
        .store
        .start_resumable(&owner, move |ct, _progress, resumable| {
            // The operation's own token: the call outlives this request, and `tasks/cancel`
            // (or the store's limits) cancels it, the upstream included.
            cx.ct = ct;
            async move {
                let result = if guided {
                    Ok(run_session
                        .call_surface(&name, args, &cx, &run_caller)
                        .await)
                } else {
                    let engine = &run_session.engine;
                    direct::call_checked(engine, &name, args, &cx, &run_caller, Some(resumable))
                        .await
                };
                closing.close();
                Ok::<_, String>(outcome_of(result?))
            }
        });
    let op = started?;
    inboxes().insert(op.clone(), inbox);
    Ok((op, relay))
}

/// Guided `execute`'s answer to a client that declared tasks: an operation still running
/// becomes a task; any other answer is left as it is.
pub(super) fn from_operation(session: &Session, answer: CallToolResponse) -> CallToolResponse {
    let CallToolResponse::Complete(result) = &answer else {
        return answer;
    };
    let running = result.structured_content.as_ref().and_then(|s| {
        let op = s.get("operationId")?.as_str()?;
        (s.get("status")?.as_str()? == "running").then_some(op)
    });
    let Some(op) = running else {
        return answer;
    };
    let elapsed = result
        .structured_content
        .as_ref()
        .and_then(|s| s["elapsedSecs"].as_u64());
    let created = now().saturating_sub(elapsed.unwrap_or(0) * 1000);
    let id = format!("{GUIDED}{}", task_id(op, created));
    CallToolResponse::Task(CreateTaskResult::new(task(
        &id,
        TaskStatus::Working,
        created,
        session,
    )))
}

/// `tasks/get`: the task's state, its result or error inlined once it ended.
pub(super) fn get(session: &Session, caller: &Caller, id: &str) -> Result<GetTaskResult, McpError> {
    let (op, created) = parse(id)?;
    let owner = caller.principal();
    let status = session.engine.store.status(&owner, op);
    // A guided task's result is shaped as `continue` shapes it.
    let status = match status {
        Ok(OperationStatus::Done(outcome)) if id.starts_with(GUIDED) => {
            let engine = &session.engine;
            let budget = engine.gw.config.guided.budget_tokens;
            let done = Ok(OperationStatus::Done(outcome));
            let shaped =
                crate::guided::resume::answer_status(engine, &owner, op, done, &None, budget);
            let result = match serde_json::to_value(super::meta_tools::to_result(shaped, true)) {
                Ok(Value::Object(result)) => result,
                _ => JsonObject::new(),
            };
            inboxes().remove(op);
            let payload = TaskPayload::Completed { result };
            let task = task(id, payload.status(), created, session);
            return Ok(GetTaskResult::new(DetailedTask::new(task, payload)));
        }
        other => other,
    };
    if status.as_ref().is_ok_and(|s| !s.is_running()) {
        inboxes().remove(op);
    }
    let (payload, message) = match status {
        Ok(OperationStatus::Running { progress, .. }) => match asked(op) {
            Some(input_requests) => (TaskPayload::InputRequired { input_requests }, None),
            None => (TaskPayload::Working, progress.and_then(|p| p.message)),
        },
        Err(StoreError::Elsewhere { .. }) => (TaskPayload::Working, None),
        Ok(OperationStatus::Done(outcome)) => {
            let result = match serde_json::to_value(super::convert::result_from(outcome)) {
                Ok(Value::Object(map)) => map,
                _ => JsonObject::new(),
            };
            (TaskPayload::Completed { result }, None)
        }
        Ok(OperationStatus::Failed(message)) => (failed(&message), None),
        Err(lost @ StoreError::Lost { .. }) => (failed(&lost.to_string()), None),
        Ok(OperationStatus::Cancelled) => (TaskPayload::Cancelled, None),
        Err(e) => return Err(unknown(id, &e)),
    };
    let mut task = task(id, payload.status(), created, session);
    task.status_message = message;
    Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
}

/// `tasks/cancel`: cancels a running task (its upstream call too); a task that already
/// ended is acknowledged as it is.
pub(super) fn cancel(session: &Session, caller: &Caller, id: &str) -> Result<(), McpError> {
    let (op, _) = parse(id)?;
    match session.engine.store.cancel(&caller.principal(), op) {
        Ok(_) => Ok(()),
        Err(e @ StoreError::Elsewhere { .. }) => Err(McpError::internal_error(e.to_string(), None)),
        Err(e) => Err(unknown(id, &e)),
    }
}

/// `tasks/update`: answers to the task's pending questions, by their keys; a key that is
/// not pending (answered already, or never asked) is left alone, as the spec says. The
/// task goes on once every question of its round is answered.
pub(super) fn update(
    session: &Session,
    caller: &Caller,
    id: &str,
    responses: BTreeMap<String, Value>,
) -> Result<(), McpError> {
    let (op, _) = parse(id)?;
    match session.engine.store.status(&caller.principal(), op) {
        Ok(_) | Err(StoreError::Elsewhere { .. } | StoreError::Lost { .. }) => {}
        Err(e) => return Err(unknown(id, &e)),
    }
    let inbox = inboxes().get(op);
    if let Some(inbox) = inbox {
        for (key, answer) in responses {
            inbox.answer(&key, answer);
        }
    }
    Ok(())
}

/// The questions an upstream asked during one task, each waiting for its answer.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
}

#[derive(Default)]
struct InboxState {
    /// Pending questions by key: the request (`{"method", "params"}`) and its waiter.
    pending: BTreeMap<String, (Value, oneshot::Sender<Value>)>,
    /// Keys made so far (`elicitation-1`, ...).
    made: u64,
    /// Keys of pending questions already handed to a client (2025-11-25's `tasks/result`).
    sent: std::collections::BTreeSet<String>,
    /// The call ended: nothing more is asked.
    closed: bool,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Parks `request` under a new key; the receiver gets its answer.
    fn ask(&self, kind: RelayKind, request: Value) -> Option<oneshot::Receiver<Value>> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        state.made += 1;
        let prefix = kind.method().split('/').next().unwrap_or("input");
        let key = format!("{prefix}-{}", state.made);
        let (tx, rx) = oneshot::channel();
        state.pending.insert(key, (request, tx));
        Some(rx)
    }

    fn answer(&self, key: &str, answer: Value) {
        let mut state = self.lock();
        state.sent.remove(key);
        if let Some((_, waiter)) = state.pending.remove(key) {
            let _ = waiter.send(answer);
        }
    }

    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.pending.clear();
    }
}

/// The inboxes of this replica's tasks, by operation id (unguessable, and read only after
/// the store said the caller owns the operation).
struct Inboxes(Mutex<HashMap<String, Arc<Inbox>>>);

impl Inboxes {
    fn insert(&self, op: String, inbox: Arc<Inbox>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Ended tasks nobody polled to the end leave with the next one.
        map.retain(|_, i| !i.lock().closed);
        map.insert(op, inbox);
    }

    fn get(&self, op: &str) -> Option<Arc<Inbox>> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(op).cloned()
    }

    fn remove(&self, op: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(op);
    }
}

fn inboxes() -> &'static Inboxes {
    static INBOXES: LazyLock<Inboxes> = LazyLock::new(|| Inboxes(Mutex::default()));
    &INBOXES
}

/// Whether task operation `op` waits for answers to its upstream's questions.
pub(super) fn asking(op: &str) -> bool {
    inboxes()
        .get(op)
        .is_some_and(|inbox| !inbox.lock().pending.is_empty())
}

/// The questions of task operation `op` not handed out before (each `{"method", "params"}`,
/// by key), now handed out: the 2025-11-25 form asks them while `tasks/result` waits.
pub(super) fn unsent_questions(op: &str) -> Vec<(String, Value)> {
    let Some(inbox) = inboxes().get(op) else {
        return Vec::new();
    };
    let mut state = inbox.lock();
    let state = &mut *state;
    let unsent: Vec<(String, Value)> = (state.pending.iter())
        .filter(|(key, _)| !state.sent.contains(*key))
        .map(|(key, (request, _))| (key.clone(), request.clone()))
        .collect();
    state.sent.extend(unsent.iter().map(|(key, _)| key.clone()));
    unsent
}

/// The answer to question `key` of task operation `op`, for its upstream; `None`: the
/// client could not answer it (the upstream is told so).
pub(super) fn answer_question(op: &str, key: &str, answer: Option<Value>) {
    let Some(inbox) = inboxes().get(op) else {
        return;
    };
    match answer {
        Some(answer) => inbox.answer(key, answer),
        None => {
            inbox.lock().pending.remove(key);
        }
    }
}

/// Task operation `op` was followed to its end: its inbox goes.
pub(super) fn forget(op: &str) {
    inboxes().remove(op);
}

/// The pending questions of task operation `op`, if it waits for any.
fn asked(op: &str) -> Option<rmcp::model::InputRequests> {
    let inbox = inboxes().get(op)?;
    let state = inbox.lock();
    if state.pending.is_empty() {
        return None;
    }
    let requests: Map<String, Value> = (state.pending.iter())
        .map(|(k, (request, _))| (k.clone(), request.clone()))
        .collect();
    serde_json::from_value(Value::Object(requests)).ok()
}

/// A task's client as its upstream call sees it: what the upstream asks goes to the task's
/// inbox, all of a round at once, and is answered by `tasks/update`; before the client has
/// its answer, an upstream's `input_required` is the client's to answer (MRTR).
pub(super) struct TaskRelay {
    inbox: Arc<Inbox>,
    /// The capabilities the task's client declared: only those are asked for.
    declared: rmcp::model::ClientCapabilities,
    owner: Principal,
    /// A 2026-07-28 request's input for its upstream (capabilities, answers, state).
    mrtr: Option<MrtrRequest>,
    phase: Mutex<Phase>,
    /// Told when the upstream made the call a task of its own.
    made: Notify,
}

/// Where the client's answer stands.
enum Phase {
    /// Not answered yet.
    Waiting,
    /// The upstream asked (`input_required`) before it was: (upstream, tool, result).
    Asked(String, String, Value),
    /// Answered (a task, or a plain result).
    Answered,
}

impl TaskRelay {
    /// The client is answered now: what the upstream asked before, if it did.
    fn settle(&self) -> Option<(String, String, Value)> {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *phase, Phase::Answered) {
            Phase::Asked(server, tool, result) => Some((server, tool, result)),
            _ => None,
        }
    }
}

impl ClientRelay for TaskRelay {
    fn supports(&self, kind: RelayKind) -> bool {
        super::relay::declares(&self.declared, kind)
    }

    fn request(
        &self,
        method: &'static str,
        params: Value,
    ) -> futures::future::BoxFuture<'static, Result<Value, String>> {
        let kind = crate::upstream::mrtr::kind_of(method);
        let waiting = kind.and_then(|k| {
            let request = json!({"method": method, "params": params});
            self.inbox.ask(k, request)
        });
        Box::pin(async move {
            let Some(answer) = waiting else {
                return Err(format!("the task's client cannot be asked {method}"));
            };
            answer
                .await
                .map_err(|_| "the task ended before its question was answered".to_string())
        })
    }

    fn notify(
        &self,
        _method: &'static str,
        _params: Value,
    ) -> futures::future::BoxFuture<'static, ()> {
        // A task has no stream to send a call's notifications on.
        Box::pin(std::future::ready(()))
    }

    fn owner(&self) -> Option<Principal> {
        Some(self.owner.clone())
    }

    fn asks_at_once(&self) -> bool {
        true
    }

    fn mrtr(&self) -> Option<MrtrRequest> {
        self.mrtr.clone()
    }

    fn input_required(&self, server: &str, tool: &str, result: Value) -> bool {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        if self.mrtr.is_none() || !matches!(*phase, Phase::Waiting) {
            return false;
        }
        *phase = Phase::Asked(server.into(), tool.into(), result);
        true
    }

    fn task_made(&self) {
        self.made.notify_one();
    }
}

/// When task `op` was made: its operation's start, as the store keeps it (so `tasks/list`
/// gives the same id); now, if the operation already went.
pub(super) fn created(session: &Session, caller: &Caller, op: &str) -> u64 {
    (session.engine.store)
        .started_ms(&caller.principal(), op)
        .unwrap_or_else(now)
}

/// A task id: the operation's id and its creation time in milliseconds, so any replica can
/// say when the task was made.
pub(super) fn task_id(op: &str, created_ms: u64) -> String {
    format!("{op}.{created_ms}")
}

/// The mark of a guided task's id.
const GUIDED: &str = "g.";

pub(super) fn parse(id: &str) -> Result<(&str, u64), McpError> {
    let plain = id.strip_prefix(GUIDED).unwrap_or(id);
    plain
        .rsplit_once('.')
        .and_then(|(op, ms)| Some((op, ms.parse().ok()?)))
        .filter(|(op, _)| op.starts_with("op-"))
        .ok_or_else(|| {
            McpError::invalid_params(
                format!("unknown task {id:?}: it was not issued by this gateway"),
                None,
            )
        })
}

/// An unknown, expired or another caller's task: all `-32602`, none saying which.
pub(super) fn unknown(id: &str, e: &StoreError) -> McpError {
    let why = match e {
        StoreError::Expired { .. } => "it expired",
        _ => "it was not issued to this caller by this gateway, or was cleaned up",
    };
    McpError::invalid_params(format!("unknown task {id:?}: {why}"), None)
}

fn failed(message: &str) -> TaskPayload {
    let mut error = JsonObject::new();
    error.insert(
        "code".into(),
        json!(rmcp::model::ErrorCode::INTERNAL_ERROR.0),
    );
    error.insert("message".into(), json!(message));
    TaskPayload::Failed { error }
}

fn task(id: &str, status: TaskStatus, created_ms: u64, session: &Session) -> Task {
    let ttl = session.engine.store.limits().operation_ttl.as_millis() as u64;
    Task::new(id, status, rfc3339(created_ms), rfc3339(now()))
        .with_ttl_ms(ttl)
        .with_poll_interval_ms(POLL_MS)
}

pub(super) fn now() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as u64)
}

pub(super) fn rfc3339(ms: u64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(ms as i64).unwrap_or_default();
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A call's answer as the store keeps it.
fn outcome_of(result: CallToolResult) -> CallOutcome {
    CallOutcome {
        content: (result.content.iter())
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect(),
        structured_content: result.structured_content,
        is_error: result.is_error.unwrap_or(false),
        meta: result.meta.and_then(|m| serde_json::to_value(m).ok()),
    }
}
