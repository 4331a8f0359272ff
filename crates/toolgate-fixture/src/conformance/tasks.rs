//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) served natively, as a
//! 2026-07-28 server with tasks of its own does: what the gateway is tested against when its
//! upstream makes the tasks (the suite's `tasks-required-task-error` and
//! `tasks-mrtr-composition` want exactly that).
//!
//! Only 2026-07-28 requests see it; an older session runs every tool as before. A request
//! whose client declared the extension gets a task for `slow_compute` (unless `seconds` is
//! 0: answered at once), `failing_job`, `protocol_error_job`, `confirm_delete` and
//! `multi_input` (their questions wait in the task as `inputRequests` until `tasks/update`),
//! and for `test_tool_with_task` once its `input_required` round is answered. `failing_job`
//! and `test_tool_with_task` are registered as needing a task: a client that did not
//! declare the extension gets -32021 naming it.
//!
//! Tasks live in this process (shared by every session), keyed by ids it makes, and are
//! forgotten [`KEEP`] after they were made once they ended.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, CreateTaskResult,
    DetailedTask, GetTaskResult, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Map, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::mrtr::{self, Step};
use super::{parse, text};

/// How long a task is kept once it ended (its `ttlMs`).
const KEEP: Duration = Duration::from_secs(600);

/// How long `test_tool_with_task`'s task works before it answers: long enough that no
/// gateway mistakes it for an immediate answer.
const TASK_WORK: Duration = Duration::from_millis(600);

/// The tasks of this process.
#[derive(Debug, Default)]
pub(super) struct Tasks {
    table: Mutex<HashMap<String, Arc<Entry>>>,
    made: AtomicU64,
}

#[derive(Debug)]
struct Entry {
    id: String,
    created: String,
    /// When it was made, for forgetting it [`KEEP`] after.
    made: std::time::Instant,
    state: Mutex<EntryState>,
    /// `tasks/update` answered something.
    answered: Notify,
    cancel: CancellationToken,
}

#[derive(Debug, Default)]
struct EntryState {
    status: TaskStatus,
    /// Questions not answered yet, by key.
    pending: Map<String, Value>,
    /// Answers received, by key.
    answers: BTreeMap<String, Value>,
    result: Option<JsonObject>,
    error: Option<JsonObject>,
    updated: String,
}

impl Entry {
    fn lock(&self) -> std::sync::MutexGuard<'_, EntryState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, status: TaskStatus) {
        let mut s = self.lock();
        if !s.status.is_terminal() {
            s.status = status;
            s.updated = now();
        }
    }

    fn finish(&self, outcome: Result<CallToolResult, ErrorData>) {
        let mut s = self.lock();
        if s.status.is_terminal() {
            return;
        }
        s.pending.clear();
        s.updated = now();
        match outcome {
            Ok(result) => {
                s.status = TaskStatus::Completed;
                s.result = match serde_json::to_value(result) {
                    Ok(Value::Object(m)) => Some(m),
                    _ => Some(JsonObject::new()),
                };
            }
            Err(e) => {
                s.status = TaskStatus::Failed;
                let mut error = JsonObject::new();
                error.insert("code".into(), json!(e.code.0));
                error.insert("message".into(), json!(e.message));
                s.error = Some(error);
            }
        }
    }
}

/// Whether the request's client declared the extension.
fn declared(cx: &RequestContext<RoleServer>) -> bool {
    cx.client_capabilities().is_some_and(|c| c.supports_tasks())
}

fn modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

impl Tasks {
    /// A tools/call this module answers (a task, or -32021), or `None` to run it as usual.
    pub(super) async fn call(
        self: &Arc<Self>,
        server: &super::ConformanceServer,
        request: &CallToolRequestParams,
        cx: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        if !modern(cx) {
            return None;
        }
        let name = request.name.as_ref();
        let required = matches!(name, "failing_job" | "test_tool_with_task");
        if !declared(cx) {
            if !required {
                return None;
            }
            let needed: ClientCapabilities =
                parse(json!({"extensions": {rmcp::model::TASKS_EXTENSION_ID: {}}}));
            return Some(Err(ErrorData::missing_required_client_capability(needed)));
        }
        let arguments = request.arguments.clone().unwrap_or_default();
        match name {
            "slow_compute" if arguments.get("seconds").and_then(Value::as_f64) == Some(0.0) => None,
            "slow_compute" | "failing_job" | "protocol_error_job" => {
                let (server, request, mut cx) = (server.clone(), request.clone(), cx.clone());
                Some(Ok(self.start(move |entry| async move {
                    cx.ct = entry.cancel.clone();
                    entry.finish(server.call(request, cx).await);
                })))
            }
            "confirm_delete" | "multi_input" => {
                let caps = cx.client_capabilities().unwrap_or_default();
                let name = name.to_string();
                Some(Ok(self.start(move |entry| async move {
                    let outcome = asking(&entry, &name, &caps, &arguments).await;
                    entry.finish(outcome);
                })))
            }
            "test_tool_with_task" => {
                let responses = request.input_responses.clone().unwrap_or_default();
                let caps = cx.client_capabilities().unwrap_or_default();
                match mrtr::step(name, &responses, None, &caps, &arguments)? {
                    // Round one is MRTR: the question, and no task yet.
                    Ok(Step::Need(..)) => mrtr::call(request, cx).await,
                    Ok(Step::Done(answer)) => Some(Ok(self.start(move |entry| async move {
                        tokio::select! {
                            _ = entry.cancel.cancelled() => {}
                            _ = tokio::time::sleep(TASK_WORK) => {
                                // Says whose task answered, for the gateway's tests.
                                entry.finish(Ok(text(format!("{answer} [{}]", entry.id))));
                            }
                        }
                    }))),
                    Err(e) => Some(Err(e)),
                }
            }
            _ => None,
        }
    }

    /// Makes a task running `work`, and its `CreateTaskResult`.
    fn start<F, Fut>(self: &Arc<Self>, work: F) -> CallToolResponse
    where
        F: FnOnce(Arc<Entry>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let id = format!("fx-task-{}", self.made.fetch_add(1, Ordering::Relaxed) + 1);
        let created = now();
        let entry = Arc::new(Entry {
            id: id.clone(),
            created: created.clone(),
            made: std::time::Instant::now(),
            state: Mutex::new(EntryState {
                updated: created,
                ..EntryState::default()
            }),
            answered: Notify::new(),
            cancel: CancellationToken::new(),
        });
        let table = &mut self.table.lock().unwrap_or_else(PoisonError::into_inner);
        // Ended tasks past their time to live leave as new ones come.
        table.retain(|_, e| e.made.elapsed() < KEEP || !e.lock().status.is_terminal());
        table.insert(id.clone(), entry.clone());
        tokio::spawn(work(entry.clone()));
        CallToolResponse::Task(CreateTaskResult::new(task_of(&id, &entry)))
    }

    fn entry(&self, id: &str) -> Result<Arc<Entry>, ErrorData> {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .get(id)
            .cloned()
            .ok_or_else(|| ErrorData::invalid_params(format!("unknown task {id:?}"), None))
    }

    /// `tasks/get`.
    pub(super) fn get(&self, id: &str) -> Result<GetTaskResult, ErrorData> {
        let entry = self.entry(id)?;
        let s = entry.lock();
        let payload = match s.status {
            TaskStatus::InputRequired => TaskPayload::InputRequired {
                input_requests: parse(Value::Object(s.pending.clone())),
            },
            TaskStatus::Completed => TaskPayload::Completed {
                result: s.result.clone().unwrap_or_default(),
            },
            TaskStatus::Failed => TaskPayload::Failed {
                error: s.error.clone().unwrap_or_default(),
            },
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            _ => TaskPayload::Working,
        };
        drop(s);
        Ok(GetTaskResult::new(DetailedTask::new(
            task_of(id, &entry),
            payload,
        )))
    }

    /// `tasks/update`: answers by key; keys not pending are ignored.
    pub(super) fn update(
        &self,
        id: &str,
        responses: BTreeMap<String, Value>,
    ) -> Result<(), ErrorData> {
        let entry = self.entry(id)?;
        let mut s = entry.lock();
        for (key, answer) in responses {
            if s.pending.remove(&key).is_some() {
                s.answers.insert(key, answer);
            }
        }
        drop(s);
        entry.answered.notify_one();
        Ok(())
    }

    /// `tasks/cancel`.
    pub(super) fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let entry = self.entry(id)?;
        entry.cancel.cancel();
        entry.set(TaskStatus::Cancelled);
        Ok(())
    }
}

/// Runs an asking tool's steps inside its task: each need parks the task in
/// `input_required` until every question of the round is answered.
async fn asking(
    entry: &Entry,
    name: &str,
    caps: &ClientCapabilities,
    arguments: &Map<String, Value>,
) -> Result<CallToolResult, ErrorData> {
    for _ in 0..5 {
        let answers = entry.lock().answers.clone();
        let step = mrtr::step(name, &answers, None, caps, arguments)
            .unwrap_or_else(|| Err(ErrorData::internal_error("not an asking tool", None)))?;
        let requests = match step {
            Step::Done(answer) => return Ok(text(answer)),
            Step::Need(requests, _) => requests,
        };
        {
            let mut s = entry.lock();
            s.pending = requests;
            s.status = TaskStatus::InputRequired;
            s.updated = now();
        }
        loop {
            let waiting = entry.answered.notified();
            if entry.lock().pending.is_empty() {
                break;
            }
            tokio::select! {
                _ = entry.cancel.cancelled() => {
                    return Err(ErrorData::internal_error("cancelled", None));
                }
                _ = waiting => {}
            }
        }
        entry.set(TaskStatus::Working);
    }
    Err(ErrorData::internal_error("too many rounds", None))
}

fn task_of(id: &str, entry: &Entry) -> Task {
    let s = entry.lock();
    Task::new(id, s.status, entry.created.clone(), s.updated.clone())
        .with_ttl_ms(KEEP.as_millis() as u64)
        .with_poll_interval_ms(100)
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
