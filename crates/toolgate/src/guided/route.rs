//! The `route` meta-tool: from a task to one tool (with its schema and the execute call to
//! make) or to a short question with candidates.
//!
//! [`respond`] computes the answer from one catalog snapshot ([`RouteContext`]) without a
//! live gateway, so the meta-tool and `toolgate tokens --simulate` share it.

use super::schema_view::{placeholders, render, Detail};
use super::surface::EXECUTE;
use super::{opt_str, opt_uint, Engine, MetaResult};
use crate::catalog::{Catalog, ToolId, ToolRecord};
use crate::policy::{profiles::Visible, Caller};
use crate::principal::Principal;
use crate::route::{route, Retriever, RouteDecision, RouteOptions};
use crate::shape::ProfileView;
use crate::skills::SKILLS_SERVER;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// What route reads besides its arguments, all from one catalog snapshot.
pub struct RouteContext<'a> {
    pub catalog: &'a Catalog,
    /// The ranking over `catalog` (the BM25F `RouteIndex` by default).
    pub retriever: &'a dyn Retriever,
    /// The schemas `detail: "full"` shows: the configured direct profile's (`None`: the
    /// upstream's own). Execute always validates against the original.
    pub view: Option<&'a ProfileView>,
    /// Select at or above this confidence (`guided.route_threshold`).
    pub threshold: f32,
    /// Prefix of the meta-tool names (`gateway.meta_prefix`), for the nextCall.
    pub meta_prefix: &'a str,
    /// The servers the caller may name in `server` (those with a visible tool).
    pub servers: Vec<&'a str>,
}

/// Answers one route call over what `caller`'s profile shows. Also returns the selected
/// tool (for `expand_selected`).
pub fn run(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    let (catalog, index) = engine.index();
    let view = engine.view(&catalog);
    // Skills are found like tools of the server `skills`, when this caller is offered them.
    let skills = super::skill::offered(engine, caller, &catalog);
    let offered: HashSet<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    let indexed_skills = index.len().saturating_sub(catalog.len());
    // The profile decides what route can see: hidden tools are neither ranked nor named.
    let keep = |t: &ToolRecord| match t.id.server.as_str() {
        SKILLS_SERVER => offered.contains(t.id.name.as_str()),
        _ => caller.policy.shows(caller, t),
    };
    let hidden = match caller.profile {
        Some(_) => catalog.tools().iter().filter(|t| !keep(t)).count(),
        None => 0,
    } + indexed_skills.saturating_sub(offered.len());
    let visible = Visible {
        inner: index.as_ref(),
        keep: &keep,
        hidden,
    };
    let mut servers = caller.policy.servers(caller, &catalog);
    if !offered.is_empty() {
        servers.push(SKILLS_SERVER);
        servers.sort();
    }
    let cx = RouteContext {
        catalog: &catalog,
        retriever: &visible,
        view: Some(&view),
        threshold: engine.gw.config.guided.route_threshold,
        meta_prefix: &engine.gw.config.gateway.meta_prefix,
        servers,
    };
    respond(&cx, args, &mut |id| engine.remember(owner, id))
}

/// Answers route's `args` from `cx`; `remember` records a selected tool and returns its
/// selectionId. Also returns the selected tool.
pub fn respond(
    cx: &RouteContext,
    args: &Map<String, Value>,
    remember: &mut dyn FnMut(&ToolId) -> String,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    match parse(args) {
        Ok((task, server, detail, limit)) => answer(cx, remember, task, server, detail, limit),
        Err(e) => (MetaResult::error(format!("route: {e}")), None),
    }
}

type Parsed<'a> = (&'a str, Option<&'a str>, Detail, usize);

fn parse(args: &Map<String, Value>) -> Result<Parsed<'_>, String> {
    let task = opt_str(args, "task")?
        .filter(|t| !t.trim().is_empty())
        .ok_or("\"task\" is required: what to do, in a few words, or an exact tool name")?;
    let server = opt_str(args, "server")?;
    let detail = match opt_str(args, "detail")? {
        None => Detail::Signature,
        Some(d) => Detail::parse(d).ok_or_else(|| {
            format!("\"detail\" is {d:?}: use summary, signature, full or typescript")
        })?,
    };
    let limit = opt_uint(args, "limit")?.unwrap_or(5);
    if !(1..=5).contains(&limit) {
        return Err(format!("\"limit\" is {limit}: use 1 to 5"));
    }
    for key in args.keys() {
        if !["task", "server", "detail", "limit"].contains(&key.as_str()) {
            return Err(format!(
                "unknown argument {key:?}: route takes task, server, detail and limit"
            ));
        }
    }
    Ok((task, server, detail, limit as usize))
}

fn answer(
    cx: &RouteContext,
    remember: &mut dyn FnMut(&ToolId) -> String,
    task: &str,
    server: Option<&str>,
    detail: Detail,
    limit: usize,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    let catalog = cx.catalog;
    if let Some(s) = server {
        if !cx.servers.contains(&s) {
            let known = cx.servers.join(", ");
            return (
                MetaResult::error(format!("route: no server {s:?}; the servers are: {known}")),
                None,
            );
        }
    }
    let opts = RouteOptions {
        server,
        limit,
        threshold: cx.threshold,
        ..RouteOptions::default()
    };
    match route(cx.retriever, task, &opts) {
        RouteDecision::Select {
            tool, confidence, ..
        } => {
            let selection = remember(&tool.id);
            (
                select(cx, &selection, &tool, detail, confidence),
                Some(tool),
            )
        }
        RouteDecision::Clarify {
            question,
            candidates,
            confidence,
            ..
        } => (
            clarify(&question, &candidates, confidence, catalog.is_empty()),
            None,
        ),
    }
}

fn select(
    cx: &RouteContext,
    selection: &str,
    tool: &ToolRecord,
    detail: Detail,
    confidence: f32,
) -> MetaResult {
    let execute = format!("{}{EXECUTE}", cx.meta_prefix);
    let shown = match detail {
        Detail::Full => cx.view.and_then(|v| v.input_schema(&tool.id)),
        _ => None,
    };
    let skill = tool.id.server == SKILLS_SERVER;
    let schema = match detail {
        Detail::TypeScript if skill => json!({"typescript": super::skill::declare(tool)}),
        Detail::TypeScript => {
            json!({"typescript": crate::code::typescript::declare_tool(cx.catalog, tool)})
        }
        _ => render(&tool.id.name, shown.unwrap_or(tool.input_schema()), detail),
    };
    let next_args =
        json!({"selectionId": selection, "arguments": placeholders(tool.input_schema())});
    let summary = tool.summary(160);
    let mut structured = json!({
        "decision": "select",
        "selectionId": selection,
        "server": tool.id.server,
        "name": tool.id.name,
        "summary": summary,
        "confidence": (confidence * 1000.0).round() / 1000.0,
        "detail": match detail { Detail::Summary => "summary", Detail::Signature => "signature", Detail::Full => "full", Detail::TypeScript => "typescript" },
        "inputSchema": schema,
        "nextCall": {"tool": execute, "arguments": next_args},
    });
    let schema_text = match schema.get("signature") {
        None if detail == Detail::TypeScript => schema["typescript"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        Some(sig) => {
            let mut t = sig.as_str().unwrap_or_default().to_string();
            for p in schema
                .get("parameters")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                t.push_str("\n  ");
                t.push_str(p.as_str().unwrap_or_default());
            }
            t
        }
        None => schema.to_string(),
    };
    let mut text = format!(
        "Selected {}/{}: {summary}\n{schema_text}\nNext: call {execute} with {}",
        tool.id.server, tool.id.name, next_args
    );
    if skill {
        structured["kind"] = json!("skill");
        text.push_str(&format!(
            "\nThis is a skill (a reviewed program): execute runs it with the arguments as its input; inside a program, await skills.run({:?}, input).",
            tool.id.name
        ));
    }
    MetaResult::text(text, Some(structured))
}

fn clarify(
    question: &str,
    candidates: &[Arc<ToolRecord>],
    confidence: f32,
    empty: bool,
) -> MetaResult {
    let list: Vec<Value> = candidates
        .iter()
        .map(|t| json!({"server": t.id.server, "name": t.id.name, "summary": t.summary(120)}))
        .collect();
    let question = if candidates.is_empty() {
        if empty {
            "No tools are available yet: the upstream servers are not connected.".to_string()
        } else {
            "No tool matches that task. Describe it differently, or name a server.".to_string()
        }
    } else {
        question.to_string()
    };
    let mut text = question.clone();
    for t in candidates {
        text.push_str(&format!(
            "\n- {}/{}: {}",
            t.id.server,
            t.id.name,
            t.summary(120)
        ));
    }
    if !candidates.is_empty() {
        text.push_str("\nRoute again with the chosen name as the task (e.g. \"server/name\").");
    }
    MetaResult::text(
        text,
        Some(json!({
            "decision": "clarify",
            "question": question,
            "candidates": list,
            "confidence": (confidence * 1000.0).round() / 1000.0,
        })),
    )
}
