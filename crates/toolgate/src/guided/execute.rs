//! The `execute` meta-tool: resolve the tool, validate the arguments against its full
//! schema, call it (turning a slow call into an operation), and shape what comes back.

use super::resume::answer_status;
use super::{Engine, MetaResult};
use crate::gate::{self, Origin, Refusal, RefusalKind};
use crate::policy::Caller;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use toolgate_core::call::CallOptions;
use toolgate_core::catalog::ToolRecord;
use toolgate_core::meta::args::ExecuteArgs;
use toolgate_core::principal::Principal;

/// Runs one execute call. `cancel` is the client's cancellation of this request. The
/// caller's permission is checked (whatever the profile shows) before validation and call.
pub(crate) async fn run(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    cancel: CancellationToken,
    caller: &Caller,
) -> MetaResult {
    if let Some(skill) = crate::programs::skill::target(engine, owner, args) {
        return crate::programs::skill::execute(engine, owner, &skill, args, cancel, caller).await;
    }
    let request = match parse(engine, owner, args, caller) {
        Ok(r) => r,
        Err(e) => {
            // A call of a tool that does not exist (or whose server is down) is audited too.
            if let Some(name) = args.get("tool").and_then(Value::as_str) {
                if engine.gw.catalog().resolve(name).is_none() {
                    crate::gate::unavailable(engine, caller, caller.surface, name, &e);
                }
            }
            return MetaResult::error(format!("execute: {e}"));
        }
    };
    let tool = request.tool;
    let selection = request.selection;
    let call = match gate::admit(
        engine,
        caller,
        owner,
        &tool,
        request.arguments,
        Origin::Client,
    )
    .await
    {
        Ok(call) => call,
        Err(refusal) => return refused(&refusal, &tool),
    };
    let relay = caller.relay.clone();
    let code = engine.code_config();
    let pii = (code.pii).then(|| (engine.pii().clone(), code.pii_fields.clone(), owner.clone()));
    let server = tool.id.server.clone();
    let (engine_ref, run_caller) = (engine, caller.clone());
    let started = engine
        .store
        .start_resumable(owner, move |ct, progress, resumable| {
            // A task the upstream makes of the call is kept, so a restart does not lose it.
            let on_task = gate::resume::on_task(engine_ref, &run_caller, &call, resumable);
            async move {
                let opts = CallOptions {
                    progress: Some(progress),
                    cancel: Some(ct),
                    // The upstream's sampling and elicitation go to this session's client.
                    relay,
                    on_task,
                    ..Default::default()
                };
                let mut result = call.run(opts).await;
                // PII leaves tokenized (`code.pii`), as from every surface.
                if let (Some((vault, fields, owner)), Ok(outcome)) = (&pii, result.as_mut()) {
                    gate::outbound(vault, fields, owner, &server, outcome);
                }
                result
            }
        });
    let op = match started {
        Ok(op) => op,
        Err(e) => return MetaResult::error(format!("execute: {e}")),
    };
    let wait = engine.guided_config().wait;
    let status = tokio::select! {
        s = engine.store.wait(owner, &op, wait) => s,
        _ = cancel.cancelled() => engine.store.cancel(owner, &op),
    };
    let budget = request.max_tokens.map_or(engine.budget_for(&tool), |m| {
        m.min(engine.budget_for(&tool))
    });
    let shaping = tracing::info_span!("shape", "toolgate.tool_id" = %tool.id);
    let mut answer =
        shaping.in_scope(|| answer_status(engine, owner, &op, status, &request.fields, budget));
    answer.meta = app_meta(&tool);
    // A call a clarification offered (or of a tool the caller's browse listed), finished
    // here and not an error, teaches route.
    let finished = answer
        .structured
        .as_ref()
        .is_none_or(|s| s.get("operationId").is_none());
    if !answer.is_error && finished {
        let profile = caller.profile_name().unwrap_or_default();
        if let Some(ex) =
            engine
                .learning()
                .succeeded(selection.as_deref(), &tool.id, owner.as_str(), profile)
        {
            let id = tool.id.to_string();
            caller
                .policy
                .audit_route(caller, &ex.task, "learned", Some(&id), &[]);
            tracing::info!(tool = %id, principal = %owner, "route learned an example");
        }
    }
    answer
}

/// The `_meta` of execute's answer for a tool with an MCP App: the tool's `ui` (and the
/// older flat `ui/resourceUri`), so a host that renders apps shows the tool's UI with the
/// result, and the tool's exposed name (`toolgate/tool`), whose `tools/call` the app's own
/// calls may use. `None` for a tool without a UI.
pub(crate) fn app_meta(tool: &ToolRecord) -> Option<Value> {
    let ui = tool.ui()?;
    let mut meta = json!({ "ui": ui, "toolgate/tool": tool.exposed });
    if let Some(uri) = ui.get("resourceUri").filter(|u| u.is_string()) {
        meta["ui/resourceUri"] = uri.clone();
    }
    Some(meta)
}

/// A refusal as execute answers it: the message (invalid arguments as the validation
/// report's text, others after `execute: `), and in the structured part the refusal's code
/// (the one the audit record has), the tool and any detail; some clients show only that.
fn refused(refusal: &Refusal, tool: &ToolRecord) -> MetaResult {
    let message = match refusal.kind {
        RefusalKind::InvalidArguments => refusal.message.clone(),
        _ => format!("execute: {refusal}"),
    };
    MetaResult {
        structured: Some(gate::refusal_json(refusal, &tool.id.to_string())),
        ..MetaResult::error(message)
    }
}

struct Request {
    tool: Arc<ToolRecord>,
    /// The selectionId the tool was chosen by (a clarification's may teach route).
    selection: Option<String>,
    arguments: Map<String, Value>,
    fields: Option<Vec<String>>,
    max_tokens: Option<usize>,
}

// The error is the sentence the model is answered with (`MetaResult::error`): a string
// is the value, not a lost type.
fn parse(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Result<Request, String> {
    let given: ExecuteArgs = toolgate_core::meta::args::parse(args)?;
    let catalog = engine.gw.catalog();
    let tool = match (given.selection_id.as_deref(), given.tool.as_deref()) {
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
    let arguments = given.arguments.unwrap_or_default();
    let fields = given.fields;
    let max_tokens = given.max_tokens.map(|m| m.max(100) as usize);
    Ok(Request {
        tool,
        selection: given.selection_id.clone(),
        arguments,
        fields,
        max_tokens,
    })
}
