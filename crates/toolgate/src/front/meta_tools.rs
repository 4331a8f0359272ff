//! The guided surface at the edge: lists the meta-tools (plus pinned and expanded tools)
//! and dispatches calls to the guided engine.

use super::convert::{tool_error, tool_from, tool_named};
use super::{direct, Session};
use crate::guided::surface::{
    session_tools, CONTINUE, DESCRIBE_TOOLS, EXECUTE, EXECUTE_CODE, PROPOSE_SKILL, ROUTE,
};
use crate::guided::{describe, execute, propose, resume, route, MetaResult};
use crate::policy::Caller;
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::sync::Mutex;
use toolgate_core::observe::trace;
use tracing::Instrument;

/// Per-session guided state.
#[derive(Default)]
pub(super) struct GuidedState {
    /// Tools route selected that this session now lists directly (`expand_selected`).
    pub expanded: Mutex<BTreeSet<String>>,
}

impl Session {
    /// The tools this session lists directly, having expanded them (`expand_selected`).
    fn expanded(&self) -> BTreeSet<String> {
        self.state.guided.expanded.lock().expect("expanded").clone()
    }

    /// Lists `exposed` directly from now on; true when it was not listed yet.
    fn expand(&self, exposed: &str) -> bool {
        let mut expanded = self.state.guided.expanded.lock().expect("expanded");
        expanded.insert(exposed.to_string())
    }
}

pub(super) fn list(session: &Session, caller: &Caller) -> Vec<Tool> {
    let gw = &session.engine.gw;
    let code = session.engine.code_for(caller);
    let skills = code && session.engine.skills().configured();
    let mut tools: Vec<Tool> = session_tools(gw.meta_prefix(), code, skills)
        .iter()
        .map(tool_from)
        .collect();
    let catalog = gw.catalog();
    let view = session.engine.view(&catalog);
    let expanded = session.expanded();
    for name in gw.guided().pinned.iter().chain(expanded.iter()) {
        if let Some(t) = catalog.resolve(name) {
            // Pinned tools follow the profile like everything listed, shown as the direct
            // profile shows them (slim, local or raw).
            if !tools.iter().any(|x| x.name == t.exposed) && caller.policy.lists(caller, t) {
                let shown = view.tool(&t.id).unwrap_or(&t.tool);
                tools.extend(tool_named(shown, &t.exposed));
            }
        }
    }
    tools
}

pub(super) async fn call(
    session: &Session,
    name: &str,
    args: Map<String, Value>,
    context: &RequestContext<RoleServer>,
    caller: &Caller,
) -> CallToolResult {
    let engine = &session.engine;
    let prefix = engine.meta_prefix();
    let bare = name.strip_prefix(prefix).unwrap_or(name);
    // Handles belong to the caller's principal, not to this session (see `principal`).
    let id = &caller.principal();
    // Route, execute and continue answer in prose beside their structured content; a
    // program's answer (execute_code, or execute of a skill) has it all structured.
    let prose = match bare {
        ROUTE | CONTINUE => true,
        EXECUTE => crate::programs::skill::target(engine, id, &args).is_none(),
        _ => false,
    };
    let result = match bare {
        ROUTE => {
            let span = trace::meta_span(ROUTE);
            let (result, selected) = span.in_scope(|| route::run(engine, id, &args, caller));
            trace::record_meta(&span, result.is_error, result.structured.as_ref());
            audit_route(caller, &args, &result);
            if let (Some(tool), true) = (selected, engine.guided_config().expand_selected) {
                if session.expand(&tool.exposed) {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
            }
            result
        }
        EXECUTE => {
            let span = trace::meta_span(EXECUTE);
            let run = execute::run(engine, id, &args, context.ct.clone(), caller);
            let result = run.instrument(span.clone()).await;
            trace::record_meta(&span, result.is_error, result.structured.as_ref());
            result
        }
        CONTINUE => resume::run(engine, id, &args, caller).await,
        EXECUTE_CODE if engine.code_for(caller) => {
            let span = trace::meta_span(EXECUTE_CODE);
            let run = crate::programs::run::run(engine, id, &args, context.ct.clone(), caller);
            let result = run.instrument(span.clone()).await;
            trace::record_meta(&span, result.is_error, result.structured.as_ref());
            result
        }
        DESCRIBE_TOOLS if engine.code_for(caller) => describe::run(engine, &args, caller),
        PROPOSE_SKILL if engine.code_for(caller) && engine.skills().configured() => {
            propose::run(engine, id, &args, caller)
        }
        _ => {
            // Pinned and expanded tools are called directly, through the same gate as in
            // direct mode. A pinned or expanded name the profile does not list still goes
            // to the gate, which answers it as execute would (the operator named it, so
            // the name reveals nothing); any other name is not a tool here.
            let listed = list(session, caller).iter().any(|t| t.name == name);
            if listed || pinned_or_expanded(session, name) || app_tool(session, name) {
                return direct::call(engine, name, args, context, caller).await;
            }
            return tool_error(format!(
                "Unknown tool {name:?}. This gateway is in guided mode: call {prefix}{ROUTE} with the task to find the right tool, then {prefix}{EXECUTE}."
            ));
        }
    };
    to_result(result, prose)
}

/// Whether `name` is a configured pinned tool or one this session expanded, by its
/// exposed name.
pub(super) fn pinned_or_expanded(session: &Session, name: &str) -> bool {
    let gw = &session.engine.gw;
    let catalog = gw.catalog();
    let expanded = session.expanded();
    let exposed = |n: &String| catalog.resolve(n).is_some_and(|t| t.exposed == name);
    gw.guided().pinned.iter().any(exposed) || expanded.iter().any(exposed)
}

/// Whether `name` is a tool of a server that offers MCP Apps (a tool with `_meta.ui`): an
/// app a host shows calls its server's tools by name (`tools/call`, the upstream's name or
/// the exposed one), so on the guided surface too those calls are served, through the same
/// gate as `execute` (permission, validation, approval, audit). Other names stay unknown.
fn app_tool(session: &Session, name: &str) -> bool {
    let catalog = session.engine.gw.catalog();
    let Some(tool) = catalog.resolve(name) else {
        return false;
    };
    let server = &tool.id.server;
    (catalog.tools().iter()).any(|t| &t.id.server == server && t.ui().is_some())
}

/// Audits what route decided, from its structured answer.
fn audit_route(caller: &Caller, args: &Map<String, Value>, r: &MetaResult) {
    let (Some(task), Some(s)) = (args.get("task").and_then(Value::as_str), &r.structured) else {
        return;
    };
    let decision = s["decision"].as_str().unwrap_or("error");
    let name = |v: &Value| {
        format!(
            "{}/{}",
            v["server"].as_str().unwrap_or(""),
            v["name"].as_str().unwrap_or("")
        )
    };
    let tool = (decision == "select").then(|| name(s));
    let candidates: Vec<String> = s["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(name)
        .collect();
    caller
        .policy
        .audit_route(caller, task, decision, tool.as_deref(), &candidates);
}

/// A skill called by name on the direct surface: the same run as `execute` of
/// `skills/<name>`, with the call's arguments as the skill's input.
pub(super) async fn run_skill(
    session: &Session,
    skill: &crate::skills::Skill,
    arguments: Map<String, Value>,
    context: &RequestContext<RoleServer>,
    caller: &Caller,
) -> CallToolResult {
    let mut args = Map::new();
    args.insert("tool".into(), Value::String(skill.record.id.to_string()));
    args.insert("arguments".into(), Value::Object(arguments));
    let (engine, id, ct) = (&session.engine, &caller.principal(), context.ct.clone());
    let result = crate::programs::skill::execute(engine, id, &skill.name, &args, ct, caller).await;
    to_result(result, false)
}

/// The one place a meta-tool's answer becomes an MCP result. Clients that find
/// `structuredContent` show the model only that (Claude Code, Codex), others show the
/// text: so when an answer says things in `prose` that its structured content does not,
/// the text goes in the structured content too (as `text`, unless the text is only the
/// structured content as JSON).
pub(super) fn to_result(r: MetaResult, prose: bool) -> CallToolResult {
    // A result an MCP App shows keeps its structured content as the tool gave it: the app
    // reads it against the tool's output schema.
    let prose = prose && r.meta.is_none();
    let structured = match prose {
        true => r.structured.map(|s| with_text(s, &r.content)),
        false => r.structured,
    };
    let content: Vec<ContentBlock> = r
        .content
        .into_iter()
        .filter_map(|c| serde_json::from_value(c).ok())
        .collect();
    let mut out = if r.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    out.structured_content = structured;
    out.meta = r.meta.and_then(|m| serde_json::from_value(m).ok());
    out
}

/// `structured` with the text of `content` added under `text` (`toolgateText` when the
/// object already has a `text`), leaving out a block that is `structured` itself as JSON.
pub(crate) fn with_text(structured: Value, content: &[Value]) -> Value {
    let Value::Object(mut map) = structured else {
        return structured;
    };
    let whole = Value::Object(map.clone());
    let text: Vec<&str> = content
        .iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .filter(|t| serde_json::from_str::<Value>(t).ok().as_ref() != Some(&whole))
        .collect();
    if !text.is_empty() {
        let key = if map.contains_key("text") {
            "toolgateText"
        } else {
            "text"
        };
        map.insert(key.to_string(), Value::String(text.join("\n")));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::with_text;
    use serde_json::json;

    fn text(t: &str) -> serde_json::Value {
        json!({"type": "text", "text": t})
    }

    #[test]
    fn structured_content_carries_the_text_the_model_needs() {
        let page = with_text(
            json!({"nextCursor": "pg-1"}),
            &[text("rows 1-10"), text("[toolgate] page 1 of 3")],
        );
        assert_eq!(
            page,
            json!({"nextCursor": "pg-1", "text": "rows 1-10\n[toolgate] page 1 of 3"})
        );
        // The JSON mirror of the structured content is not repeated.
        let mirror = with_text(
            json!({"a": 1}),
            &[text("{\"a\": 1}"), text("[toolgate] note")],
        );
        assert_eq!(mirror, json!({"a": 1, "text": "[toolgate] note"}));
        assert_eq!(
            with_text(json!({"a": 1}), &[text("{\"a\":1}")]),
            json!({"a": 1})
        );
        let taken = with_text(json!({"text": "x"}), &[text("y")]);
        assert_eq!(taken, json!({"text": "x", "toolgateText": "y"}));
    }
}
