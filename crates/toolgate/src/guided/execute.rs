//! The `execute` meta-tool: resolve the tool, validate the arguments against its full
//! schema, call it (turning a slow call into an operation), and shape what comes back.

use super::resume::answer_status;
use super::{opt_str, opt_uint, Engine, MetaResult};
use crate::catalog::ToolRecord;
use crate::exec::{shape, Checked, Shaped};
use crate::policy::Caller;
use crate::principal::Principal;
use crate::shape::tokens::Encoding;
use crate::upstream::{CallOptions, CallOutcome};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Runs one execute call. `cancel` is the client's cancellation of this request. The
/// caller's permission is checked (whatever the profile shows) before validation and call.
pub async fn run(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    cancel: CancellationToken,
    caller: &Caller,
) -> MetaResult {
    if let Some(skill) = super::skill::target(engine, owner, args) {
        return super::skill::execute(engine, owner, &skill, args, cancel, caller).await;
    }
    let request = match parse(engine, owner, args, caller) {
        Ok(r) => r,
        Err(e) => {
            // A call of a tool that does not exist (or whose server is down) is audited too.
            if let Some(name) = args.get("tool").and_then(Value::as_str) {
                if engine.gw.catalog().resolve(name).is_none() {
                    engine.policy.audit_unavailable(caller, name, &e);
                }
            }
            return MetaResult::error(format!("execute: {e}"));
        }
    };
    let tool = request.tool;
    let mut permit = match engine.policy.check(caller, &tool, &request.arguments) {
        Ok(p) => p,
        Err(refusal) => return MetaResult::error(format!("execute: {refusal}")),
    };
    let call = match admit(engine, owner, &tool, request.arguments) {
        Ok(call) => call,
        Err(Refusal::Token(e)) => {
            permit.not_run("unknown or foreign PII token");
            let e = engine.refused(caller, "piiToken", &e.message.clone(), e);
            return MetaResult::error(format!("execute: {e}"));
        }
        Err(Refusal::Flow { rule, message }) => {
            permit.not_run(&format!("flow rule {rule}"));
            return MetaResult::error(format!("execute: {message}"));
        }
        Err(Refusal::InvalidArguments(report)) => {
            permit.not_run("invalid arguments");
            // The message in the structured part too: some clients show only that.
            let message = report.to_text(&tool.id.to_string());
            return MetaResult {
                structured: Some(
                    json!({"error": "invalid_arguments", "tool": tool.id.to_string(), "validation": report.structured()}),
                ),
                ..MetaResult::error(message)
            };
        }
    };
    // Valid arguments first, so the user is never asked to approve a call that cannot run.
    if let Err(refusal) = permit.confirm(caller).await {
        return MetaResult::error(format!("execute: {refusal}"));
    }
    let relay = caller.relay.clone();
    let started = engine.store.start(owner, move |ct, progress| async move {
        let opts = CallOptions {
            progress: Some(progress),
            cancel: Some(ct),
            // The upstream's sampling and elicitation go to this session's client.
            relay,
            ..Default::default()
        };
        let result = call.run("guided", opts).await;
        permit.finish(&result);
        result
    });
    let op = match started {
        Ok(op) => op,
        Err(e) => return MetaResult::error(format!("execute: {e}")),
    };
    let wait = engine.gw.config.guided.wait;
    let status = tokio::select! {
        s = engine.store.wait(owner, &op, wait) => s,
        _ = cancel.cancelled() => engine.store.cancel(owner, &op),
    };
    let budget = request.max_tokens.map_or(engine.budget_for(&tool), |m| {
        m.min(engine.budget_for(&tool))
    });
    answer_status(engine, owner, &op, status, &request.fields, budget)
}

/// Why a call was not admitted.
#[derive(Debug)]
pub enum Refusal {
    /// The arguments do not match the tool's input schema.
    InvalidArguments(crate::exec::ValidationReport),
    /// A PII token in the arguments is not the caller's (`code.pii`).
    Token(crate::principal::Refused),
    /// A `[code.flows]` rule keeps a token's value from this tool's server.
    Flow { rule: String, message: String },
}

/// A call that passed [`admit`]: the only way to reach an upstream from a meta-tool or a
/// program, so every call is checked the same way.
pub struct Admitted {
    gw: Arc<crate::gateway::Gateway>,
    tool: Arc<ToolRecord>,
    arguments: Map<String, Value>,
    /// When admission began (the gateway's own time before the call is measured from it).
    since: std::time::Instant,
}

/// The gate every tool call passes, from execute and from code mode alike: validation
/// against the tool's full schema (and the caller's authorization, where configured).
/// `arguments` is the one value that is checked and then sent.
pub fn admit(
    engine: &Engine,
    owner: &Principal,
    tool: &Arc<ToolRecord>,
    arguments: Map<String, Value>,
) -> Result<Admitted, Refusal> {
    let since = std::time::Instant::now();
    let mut value = Value::Object(arguments);
    let code = &engine.gw.config.code;
    if code.pii {
        let server = tool.id.server.as_str();
        let mut rule = None;
        let mut decide =
            |token: &str, class: &str, origins: &std::collections::BTreeSet<String>| {
                match crate::code::flows::forbidden(&code.flows, class, origins, server, token) {
                    Some((name, message)) => {
                        rule = Some(name);
                        crate::code::pii::Decision::Refuse(message)
                    }
                    None => crate::code::pii::Decision::Restore,
                }
            };
        let restored = engine.pii.restore_with(owner, &mut value, &mut decide);
        match restored {
            Ok(()) => {}
            Err(crate::code::pii::RestoreError::Token(e)) => return Err(Refusal::Token(e)),
            Err(crate::code::pii::RestoreError::Flow(message)) => {
                return Err(Refusal::Flow {
                    rule: rule.unwrap_or_default(),
                    message,
                })
            }
        }
    }
    match engine.validators.validate(tool, &value) {
        Ok(Checked::Valid) => {}
        Ok(Checked::Skipped { reason }) => {
            tracing::debug!(tool = %tool.id, "arguments not validated: {reason}")
        }
        Err(report) => return Err(Refusal::InvalidArguments(report)),
    }
    let Value::Object(arguments) = value else {
        unreachable!("built from a map above")
    };
    Ok(Admitted {
        gw: engine.gw.clone(),
        tool: tool.clone(),
        arguments,
        since,
    })
}

impl Admitted {
    /// Calls the upstream with the admitted arguments (`surface`: guided or code, for
    /// the metrics).
    pub async fn run(
        self,
        surface: &'static str,
        opts: CallOptions,
    ) -> Result<CallOutcome, crate::upstream::CallError> {
        let (gw, since) = (&self.gw, self.since);
        gw.call_as(surface, since, &self.tool, self.arguments, opts)
            .await
    }
}

struct Request {
    tool: Arc<ToolRecord>,
    arguments: Map<String, Value>,
    fields: Option<Vec<String>>,
    max_tokens: Option<usize>,
}

fn parse(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Result<Request, String> {
    for key in args.keys() {
        if !["selectionId", "tool", "arguments", "fields", "max_tokens"].contains(&key.as_str()) {
            return Err(format!(
                "unknown argument {key:?}: execute takes selectionId (or tool), arguments, fields and max_tokens; the tool's own arguments go inside \"arguments\""
            ));
        }
    }
    let catalog = engine.gw.catalog();
    let tool = match (opt_str(args, "selectionId")?, opt_str(args, "tool")?) {
        (Some(sel), _) => {
            let id = (engine.recall(owner, sel))
                .map_err(|r| engine.refused(caller, "selectionId", sel, r))?;
            catalog
                .by_id(&id)
                .cloned()
                .ok_or_else(|| format!("{id} is no longer available (its server may be down); call route again"))?
        }
        (None, Some(name)) => catalog.resolve(name).cloned().ok_or_else(|| match engine.gw.unavailable_for(name) {
            Some(down) => down.to_string(),
            None => format!("no tool named {name:?}: pass an exact name (server/name) or call route with the task"),
        })?,
        (None, None) => return Err("pass \"selectionId\" from route, or \"tool\" with an exact tool name".into()),
    };
    let arguments = match args.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(other) => {
            return Err(format!(
                "\"arguments\" must be an object of the tool's arguments, got {other}"
            ))
        }
    };
    let fields = match args.get("fields") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|f| {
                    f.as_str()
                        .map(str::to_string)
                        .ok_or("\"fields\" must be a list of strings")
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(
                "\"fields\" must be a list of strings (JSON pointers or dotted paths)".into(),
            )
        }
    };
    let max_tokens = opt_uint(args, "max_tokens")?.map(|m| m.max(100) as usize);
    Ok(Request {
        tool,
        arguments,
        fields,
        max_tokens,
    })
}

/// Runs CPU-bound `f` where it does not stall the async runtime: on a multi-threaded
/// runtime the worker hands its other tasks to another thread first (`block_in_place`);
/// a current-thread runtime (tests) runs it as is.
fn off_async_worker<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Shapes a finished call for the model: fields, budget, and a cursor for the rest.
pub fn shaped_answer(
    engine: &Engine,
    owner: &Principal,
    outcome: CallOutcome,
    fields: &Option<Vec<String>>,
    budget: usize,
) -> MetaResult {
    let count = |s: &str| Encoding::O200k.count(s);
    // Counting and cutting a large result takes real CPU time: off the async worker, so
    // other sessions' calls are not held up behind it.
    let Shaped {
        page,
        remaining,
        total_pages,
        original_tokens,
        field_note,
        ..
    } = off_async_worker(|| shape(outcome, fields.as_deref(), budget, &count));
    let mut content = page.content;
    let mut structured = page.structured_content;
    if let Some(note) = field_note {
        content.push(crate::exec::shape::text_block(format!("[toolgate] {note}")));
    }
    if !remaining.is_empty() {
        match engine.store.put_pages(owner, remaining) {
            Ok(cursor) => {
                content.push(crate::exec::shape::text_block(format!(
                    "[toolgate] page 1 of {total_pages} ({original_tokens} tokens in all); call continue with {{\"cursor\": \"{cursor}\"}} for the next page"
                )));
                // The page's text joins the structured part at the front (`to_result`).
                structured = Some(
                    json!({"nextCursor": cursor, "page": 1, "pages": total_pages, "tokens": original_tokens}),
                );
            }
            Err(e) => content.push(crate::exec::shape::text_block(format!(
                "[toolgate] the result was cut to its first page: {e}"
            ))),
        }
    }
    MetaResult {
        content,
        structured,
        is_error: page.is_error,
    }
}
