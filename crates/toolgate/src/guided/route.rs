//! The `route` meta-tool: from a task to one tool (with its schema and the execute call to
//! make) or to a short question with candidates.

use super::schema_view::{placeholders, render, Detail};
use super::surface::EXECUTE;
use super::{opt_str, opt_uint, Engine, MetaResult};
use crate::catalog::ToolRecord;
use crate::route::{route, RouteDecision, RouteOptions};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Answers one route call. Also returns the selected tool (for `expand_selected`).
pub fn run(
    engine: &Engine,
    session: &str,
    args: &Map<String, Value>,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    match parse(args) {
        Ok((task, server, detail, limit)) => answer(engine, session, task, server, detail, limit),
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
    engine: &Engine,
    session: &str,
    task: &str,
    server: Option<&str>,
    detail: Detail,
    limit: usize,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    let (catalog, index) = engine.index();
    if let Some(s) = server {
        if !catalog.servers().contains(&s) {
            let known = catalog.servers().join(", ");
            return (
                MetaResult::error(format!("route: no server {s:?}; the servers are: {known}")),
                None,
            );
        }
    }
    let opts = RouteOptions {
        server,
        limit,
        threshold: engine.gw.config.guided.route_threshold,
        ..RouteOptions::default()
    };
    match route(index.as_ref(), task, &opts) {
        RouteDecision::Select {
            tool, confidence, ..
        } => (
            select(engine, session, &tool, detail, confidence),
            Some(tool),
        ),
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
    engine: &Engine,
    session: &str,
    tool: &ToolRecord,
    detail: Detail,
    confidence: f32,
) -> MetaResult {
    let selection = engine.remember(session, &tool.id);
    let execute = format!("{}{EXECUTE}", engine.gw.config.gateway.meta_prefix);
    let schema = match detail {
        Detail::TypeScript => {
            json!({"typescript": crate::code::typescript::declare_tool(&engine.gw.catalog(), tool)})
        }
        _ => render(&tool.id.name, tool.input_schema(), detail),
    };
    let next_args =
        json!({"selectionId": selection, "arguments": placeholders(tool.input_schema())});
    let summary = tool.summary(160);
    let structured = json!({
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
    let text = format!(
        "Selected {}/{}: {summary}\n{schema_text}\nNext: call {execute} with {}",
        tool.id.server, tool.id.name, next_args
    );
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
