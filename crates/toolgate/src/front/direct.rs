//! The direct surface: every visible tool under its exposed name, its calls through the
//! gate (`gate::admit`) and bounded on the way back; and, for callers with code mode, the
//! skills they are offered, as `skills_<name>`.

use super::convert::{result_from, tool_error, tool_named};
use crate::engine::Engine;
use crate::gate::{self, Origin};
use crate::policy::Caller;
use crate::skills::Skill;
use rmcp::model::{CallToolResult, ProgressNotificationParam, Tool};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::mpsc;
use toolgate_core::call::{CallOptions, CallOutcome, Progress};
use toolgate_core::catalog::Catalog;
use toolgate_core::exec::Resumable;

/// The tools/list of the direct surface: the catalog under the configured profile (raw,
/// slim or local), shaped once per snapshot. Calls still go out with the original.
pub(super) fn list(engine: &Engine) -> Vec<Tool> {
    let view = engine.view(&engine.gw.catalog());
    view.tools
        .iter()
        .filter_map(|t| {
            let name = t.tool.get("name").and_then(Value::as_str)?;
            tool_named(&t.tool, name)
        })
        .collect()
}

/// The tool `name` as this surface lists it (the profile's shape, under its exposed name),
/// whoever asks: what rmcp checks a 2026-07-28 call's `Mcp-Param-*` headers against
/// (`Session::get_tool`). Skills are left out: their schemas mark no header.
pub(super) fn exposed_tool(engine: &Engine, name: &str) -> Option<Tool> {
    let catalog = engine.gw.catalog();
    let record = catalog.by_exposed(name)?;
    let view = engine.view(&catalog);
    tool_named(view.tool(&record.id).unwrap_or(&record.tool), name)
}

/// Whether the tool `name`, as this surface lists it, marks an argument with
/// `x-mcp-header` (SEP-2243), so a call of it has `Mcp-Param-*` headers to check.
pub(super) fn marks_param_headers(engine: &Engine, name: &str) -> bool {
    let catalog = engine.gw.catalog();
    let Some(record) = catalog.by_exposed(name) else {
        return false;
    };
    let view = engine.view(&catalog);
    let tool = view.tool(&record.id).unwrap_or(&record.tool);
    tool.get("inputSchema").is_some_and(has_header_marking)
}

/// Whether `schema` has an `x-mcp-header` key anywhere (rmcp reads only those on a
/// `properties` chain; any other is the upstream's mistake, and counting it only leaves
/// more calls to rmcp).
fn has_header_marking(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| k == "x-mcp-header" || has_header_marking(v)),
        Value::Array(a) => a.iter().any(has_header_marking),
        _ => false,
    }
}

/// The skills this caller is offered (see `programs::skill::offered`), as tools under their
/// exposed names (`skills_<name>`) with their input schemas. A name an upstream tool
/// already has stays the tool's.
pub(super) fn skill_tools(engine: &Engine, caller: &Caller) -> Vec<Tool> {
    let catalog = engine.gw.catalog();
    crate::programs::skill::offered(engine, caller, &catalog)
        .iter()
        .filter(|s| catalog.by_exposed(&s.record.exposed).is_none())
        .filter_map(|s| tool_named(&s.record.tool, &s.record.exposed))
        .collect()
}

/// The skill a direct tools/call names, when this caller is offered it and no upstream
/// tool has that name.
pub(super) fn skill_named(engine: &Engine, caller: &Caller, name: &str) -> Option<Arc<Skill>> {
    if !engine.skills().configured() || !name.starts_with(crate::skills::SKILLS_SERVER) {
        return None;
    }
    let catalog = engine.gw.catalog();
    if catalog.by_exposed(name).is_some() {
        return None;
    }
    crate::programs::skill::offered(engine, caller, &catalog)
        .into_iter()
        .find(|s| s.record.exposed == name)
}

/// Forwards a tools/call through the gate (`gate::admit`: permission, PII restored,
/// validation, approval, audit), passing the client's progress token and cancellation
/// through; the result comes back with PII tokenized and within the direct budget.
pub(super) async fn call(
    engine: &Engine,
    name: &str,
    arguments: Map<String, Value>,
    context: &RequestContext<RoleServer>,
    caller: &Caller,
) -> CallToolResult {
    call_checked(engine, name, arguments, context, caller, None)
        .await
        .unwrap_or_else(tool_error)
}

/// [`call`], with the upstream's failure to answer (a protocol error, a timeout, a lost
/// connection) kept apart as `Err(message)`: a task reports it as `failed`, not as a tool's
/// error result. The message is the task's status text: a string is the value. A call
/// run as an operation passes its `resumable`, so a task its upstream makes of it
/// survives a restart (`gate::resume`).
pub(super) async fn call_checked(
    engine: &Engine,
    name: &str,
    arguments: Map<String, Value>,
    context: &RequestContext<RoleServer>,
    caller: &Caller,
    resumable: Option<Resumable<CallOutcome>>,
) -> Result<CallToolResult, String> {
    let gw = &engine.gw;
    let catalog = gw.catalog();
    let Some(tool) = catalog.by_exposed(name).or_else(|| catalog.resolve(name)) else {
        if let Some(down) = gw.unavailable_for(name) {
            gate::unavailable(engine, caller, caller.surface, name, &down.to_string());
            return Ok(tool_error(format!("{name} failed: {down}")));
        }
        gate::unavailable(engine, caller, caller.surface, name, "no such tool");
        // Suggest only what this caller is shown: a hidden name is not a hint to give away.
        let listed = |t: &toolgate_core::catalog::ToolRecord| caller.policy.lists(caller, t);
        return Ok(tool_error(unknown_tool_message(&catalog, name, &listed)));
    };
    let owner = caller.principal();
    let admitted = gate::admit(engine, caller, &owner, tool, arguments, Origin::Client).await;
    let admitted = match admitted {
        Ok(a) => a,
        Err(refusal) => return Ok(refused(&refusal, tool)),
    };
    let mut opts = CallOptions {
        cancel: Some(context.ct.clone()),
        // The caller's relay (for a 2026-07-28 request, one that asks the client nothing).
        relay: caller
            .relay
            .clone()
            .or_else(|| Some(super::relay::relay_for(context, caller.principal()))),
        on_task: resumable.and_then(|r| gate::resume::on_task(engine, caller, &admitted, r)),
        ..Default::default()
    };
    // Progress is forwarded from this same task (not a spawned one), so rmcp sends it on
    // the stream of the request it belongs to.
    let mut progress = None;
    if let Some(token) = context.meta.get_progress_token() {
        let (tx, rx) = mpsc::unbounded_channel::<Progress>();
        opts.progress = Some(tx);
        progress = Some((token, rx));
    }
    let forward = async {
        let Some((token, mut rx)) = progress else {
            return;
        };
        while let Some(p) = rx.recv().await {
            let mut n = ProgressNotificationParam::new(token.clone(), p.progress);
            n.total = p.total;
            n.message = p.message;
            if context.peer.notify_progress(n).await.is_err() {
                break;
            }
        }
    };
    let call = async {
        match admitted.run(opts).await {
            Ok(mut outcome) => {
                let code = &gw.config.code;
                if code.pii {
                    let fields = &code.pii_fields;
                    gate::outbound(engine.pii(), fields, &owner, &tool.id.server, &mut outcome);
                }
                let budget = gate::direct_budget(engine, tool);
                Ok(result_from(gate::bound(outcome, budget, tool)))
            }
            Err(e) => Err(format!("{} failed: {e}", tool.exposed)),
        }
    };
    // The progress sender is dropped when the call returns, which ends `forward`.
    let (result, ()) = tokio::join!(call, forward);
    result
}

/// A refusal as the direct surface answers it: the message, and in the structured part
/// the refusal's code (the one the audit record has), the tool, any detail, and the
/// message again (some clients show only the structured part).
fn refused(refusal: &gate::Refusal, tool: &toolgate_core::catalog::ToolRecord) -> CallToolResult {
    let mut r = tool_error(refusal.message.clone());
    let mut structured = gate::refusal_json(refusal, &tool.id.to_string());
    structured["text"] = Value::String(refusal.message.clone());
    r.structured_content = Some(structured);
    r
}

/// "Unknown tool" with the closest names, so the model can correct itself.
pub(super) fn unknown_tool_message(
    catalog: &Catalog,
    name: &str,
    shown: &dyn Fn(&toolgate_core::catalog::ToolRecord) -> bool,
) -> String {
    let lower = name.to_ascii_lowercase();
    let mut near: Vec<&str> = catalog
        .tools()
        .iter()
        .filter(|t| shown(t))
        .filter(|t| {
            let e = t.exposed.to_ascii_lowercase();
            e.contains(&lower) || lower.contains(&t.id.name.to_ascii_lowercase())
        })
        .map(|t| t.exposed.as_str())
        .take(5)
        .collect();
    near.sort_unstable();
    if near.is_empty() {
        format!("Unknown tool {name:?}. Call tools/list to see the tools available.")
    } else {
        format!("Unknown tool {name:?}. Did you mean: {}?", near.join(", "))
    }
}
