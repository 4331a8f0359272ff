//! The `route` meta-tool: from a task to one tool (with its schema and the execute call to
//! make) or to a short question with candidates.
//!
//! [`respond`] computes the answer from one catalog snapshot ([`RouteContext`]) without a
//! live gateway, so the meta-tool and `toolgate tokens --simulate` share it.

use super::schema_view::{placeholders, render, Detail};
use super::surface::{EXECUTE, ROUTE};
use super::{Engine, MetaResult};
use crate::policy::{profiles::Visible, Caller};
use crate::skills::SKILLS_SERVER;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use toolgate_core::catalog::{Catalog, ToolId, ToolRecord};
use toolgate_core::meta::args::{self, RouteArgs};
use toolgate_core::principal::Principal;
use toolgate_route::route_with;
use toolgate_route::shape::{ProfileView, SlimOptions};
use toolgate_route::{
    route, step_tools, Evidence, LearningSettings, Retriever, RouteDecision, RouteOptions,
    StepTool, DEFAULT_LIMIT, MAX_BROWSE,
};

/// What route reads besides its arguments, all from one catalog snapshot.
pub struct RouteContext<'a> {
    /// The catalog snapshot route reads.
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
    /// What the caller's profile shows (`None`: every tool); browsing by server lists only
    /// these.
    pub shows: Option<&'a (dyn Fn(&ToolRecord) -> bool + Send + Sync)>,
    /// The operator's per-tool description overrides (`direct.slim.tools`): an override is
    /// the summary route shows.
    pub summaries: Option<&'a SlimOptions>,
    /// What was learned from the models' choices for this caller (`[guided.learning]`);
    /// `None`: route as configured alone.
    pub learned: Option<LearnedRoute<'a>>,
    /// A question about a task of several steps also lists each step's best tool
    /// (`guided.route_steps`).
    pub steps: bool,
}

/// The learned evidence for one route call and what it may do.
pub struct LearnedRoute<'a> {
    pub evidence: Evidence,
    pub settings: &'a LearningSettings,
    /// A destructive tool is never selected on learned evidence alone.
    pub destructive: &'a (dyn Fn(&ToolRecord) -> bool + Send + Sync),
}

impl RouteContext<'_> {
    /// The one-line summary route shows for `tool`: the operator's override when set.
    pub fn summary(&self, tool: &ToolRecord, max: usize) -> String {
        let written = self
            .summaries
            .and_then(|s| s.override_for(&tool.id))
            .and_then(|o| o.description.as_deref());
        match written {
            Some(d) => toolgate_core::catalog::one_line(d, max),
            None => tool.summary(max),
        }
    }

    fn visible(&self, tool: &ToolRecord) -> bool {
        self.shows.is_none_or(|f| f(tool))
    }
}

/// Answers one route call over what `caller`'s profile shows. Also returns the selected
/// tool (for `expand_selected`).
pub(crate) fn run(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    let (catalog, index) = engine.index();
    let view = engine.view(&catalog);
    // Skills are found like tools of the server `skills`, when this caller is offered them.
    let skills = crate::programs::skill::offered(engine, caller, &catalog);
    let offered: HashSet<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    let indexed_skills = index.len().saturating_sub(catalog.len());
    // The profile decides what route can see: hidden tools are neither ranked nor named;
    // nor are tools only an MCP App may call (`_meta.ui.visibility` without "model").
    let keep = |t: &ToolRecord| match t.id.server.as_str() {
        SKILLS_SERVER => offered.contains(t.id.name.as_str()),
        _ => caller.policy.shows(caller, t) && !t.app_only(),
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
    let task = args.get("task").and_then(Value::as_str).unwrap_or_default();
    let destructive = |t: &ToolRecord| caller.policy.destructive(t);
    let cx = RouteContext {
        catalog: &catalog,
        retriever: &visible,
        view: Some(&view),
        threshold: engine.guided_config().route_threshold,
        meta_prefix: engine.meta_prefix(),
        servers,
        shows: Some(&keep),
        summaries: Some(&engine.direct_config().slim),
        learned: Some(LearnedRoute {
            evidence: engine.learning().evidence(
                task,
                owner.as_str(),
                caller.profile_name().unwrap_or_default(),
            ),
            settings: engine.learning().settings(),
            destructive: &destructive,
        }),
        steps: engine.guided_config().route_steps,
    };
    let (answer, selected) = respond(&cx, args, &mut |id| engine.remember(owner, id));
    // Each candidate of a question may teach: executed and succeeded, its task is learned.
    // So may a tool a browse by task listed, called next.
    if let Some(s) = answer.structured.as_ref() {
        match s["decision"].as_str() {
            Some("clarify") => {
                for c in s["candidates"].as_array().into_iter().flatten() {
                    if let Some(sel) = c["selectionId"].as_str() {
                        engine.learning().offered(sel, task, owner.as_str());
                    }
                }
                // A step's tool teaches its step, not the whole task.
                for c in s["steps"].as_array().into_iter().flatten() {
                    if let (Some(sel), Some(step)) = (c["selectionId"].as_str(), c["step"].as_str())
                    {
                        engine.learning().offered(sel, step, owner.as_str());
                    }
                }
            }
            Some(kind @ ("list" | "none")) if !task.trim().is_empty() => {
                let listed = if kind == "list" {
                    &s["tools"]
                } else {
                    &s["nearest"]
                };
                let tools = (listed.as_array().into_iter().flatten())
                    .filter_map(|t| {
                        Some(format!("{}/{}", t["server"].as_str()?, t["name"].as_str()?))
                    })
                    .collect();
                engine.learning().browsed(owner.as_str(), task, tools);
            }
            _ => {}
        }
    }
    (answer, selected)
}

/// Answers route's `args` from `cx`; `remember` records a tool the answer offers (the
/// selected one, or each candidate of a question) and returns its selectionId. Also
/// returns the selected tool.
pub fn respond(
    cx: &RouteContext,
    args: &Map<String, Value>,
    remember: &mut dyn FnMut(&ToolId) -> String,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => return (MetaResult::error(format!("route: {e}")), None),
    };
    if let Some(s) = a.server.as_deref() {
        if !cx.servers.contains(&s) {
            let known = cx.servers.join(", ");
            return (
                MetaResult::error(format!("route: no server {s:?}; the servers are: {known}")),
                None,
            );
        }
    }
    match (a.task.as_deref(), a.server.as_deref()) {
        (None, Some(server)) => (browse_server(cx, server, a.limit, a.cursor), None),
        (Some(task), server) if a.names => (browse_task(cx, task, server, a.limit), None),
        (Some(task), server) => answer(cx, remember, task, server, a.detail, a.limit),
        (None, None) => unreachable!("parse requires a task or a server"),
    }
}

/// Route's arguments, checked.
struct Checked {
    task: Option<String>,
    server: Option<String>,
    detail: Detail,
    /// `detail: "names"`: list names and summaries, select nothing.
    names: bool,
    limit: usize,
    /// Offset into a server's listing (`cursor` from the previous page).
    cursor: usize,
}

// The error is the sentence the model is answered with (`MetaResult::error`): a string
// is the value, not a lost type.
fn parse(args: &Map<String, Value>) -> Result<Checked, String> {
    let given: RouteArgs = args::parse(args)?;
    let task = given.task.filter(|t| !t.trim().is_empty());
    let server = given.server;
    if task.is_none() && server.is_none() {
        return Err(
            "\"task\" is required: what to do, in a few words, or an exact tool name \
                    (or give only \"server\" to list that server's tools)"
                .into(),
        );
    }
    let (detail, names) = match given.detail.as_deref() {
        None => (Detail::Signature, task.is_none()),
        Some("names") => (Detail::Signature, true),
        Some(d) => (
            Detail::parse(d).ok_or_else(|| {
                format!("\"detail\" is {d:?}: use names, summary, signature, full or typescript")
            })?,
            task.is_none(),
        ),
    };
    let default = if names { 10 } else { DEFAULT_LIMIT as u64 };
    let limit = given.limit.unwrap_or(default);
    if !(1..=MAX_BROWSE as u64).contains(&limit) {
        return Err(format!("\"limit\" is {limit}: use 1 to {MAX_BROWSE}"));
    }
    let cursor = match given.cursor {
        None => 0,
        Some(_) if task.is_some() => {
            return Err(
                "\"cursor\" pages a server's listing: give it with \"server\" and no task".into(),
            )
        }
        Some(c) => c.parse().map_err(|_| {
            format!("\"cursor\" is {c:?}: pass the nextCursor of the previous listing")
        })?,
    };
    Ok(Checked {
        task,
        server,
        detail,
        names,
        limit: limit as usize,
        cursor,
    })
}

/// `{server}` with no task: that server's visible tools in catalog order, a page at a time.
fn browse_server(cx: &RouteContext, server: &str, limit: usize, cursor: usize) -> MetaResult {
    let tools: Vec<&Arc<ToolRecord>> = cx
        .catalog
        .tools()
        .iter()
        .filter(|t| t.id.server == server && cx.visible(t))
        .collect();
    let page: Vec<&Arc<ToolRecord>> = tools.iter().skip(cursor).take(limit).copied().collect();
    let next = (cursor + page.len() < tools.len()).then(|| (cursor + page.len()).to_string());
    let mut text = format!(
        "{server}: tools {}-{} of {}",
        (cursor + 1).min(tools.len()),
        cursor + page.len(),
        tools.len()
    );
    let items = name_list(cx, &page, &mut text);
    let mut structured =
        json!({"decision": "list", "server": server, "total": tools.len(), "tools": items});
    if let Some(n) = next {
        // Route's own paging (not continue's nextCursor): the next page is one more route.
        let call = json!({"tool": format!("{}{ROUTE}", cx.meta_prefix),
            "arguments": {"server": server, "cursor": n, "limit": limit}});
        text.push_str(&format!("\nNext page: call {call}"));
        structured["nextCall"] = call;
    }
    MetaResult::text(text, Some(structured))
}

/// `detail: "names"`: the best `limit` tools for the task, names and summaries only.
fn browse_task(cx: &RouteContext, task: &str, server: Option<&str>, limit: usize) -> MetaResult {
    let ranked = cx.retriever.rank(task, server, limit);
    // The gateway's retriever already leaves hidden tools out; `shows` is checked again so
    // a listing never depends on which retriever a caller passed.
    let page: Vec<&Arc<ToolRecord>> = ranked
        .iter()
        .map(|(t, _)| t)
        .filter(|t| cx.visible(t))
        .collect();
    let mut text = if page.is_empty() {
        "No tool matches that task. Describe it differently, or name a server.".to_string()
    } else {
        format!("Tools for {:?}, best first:", task.trim())
    };
    let items = name_list(cx, &page, &mut text);
    text.push_str("\nRoute with one of these names as the task to get its schema and nextCall.");
    MetaResult::text(text, Some(json!({"decision": "list", "tools": items})))
}

/// `[{server, name, summary}]`, and one text line each.
fn name_list(cx: &RouteContext, tools: &[&Arc<ToolRecord>], text: &mut String) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let summary = cx.summary(t, 100);
            text.push_str(&format!("\n- {}/{}: {summary}", t.id.server, t.id.name));
            json!({"server": t.id.server, "name": t.id.name, "summary": summary})
        })
        .collect()
}

fn answer(
    cx: &RouteContext,
    remember: &mut dyn FnMut(&ToolId) -> String,
    task: &str,
    server: Option<&str>,
    detail: Detail,
    limit: usize,
) -> (MetaResult, Option<Arc<ToolRecord>>) {
    let opts = RouteOptions {
        server,
        limit,
        threshold: cx.threshold,
        ..RouteOptions::default()
    };
    let decision = match &cx.learned {
        Some(l) => route_with(
            cx.retriever,
            task,
            &opts,
            &l.evidence,
            l.settings,
            l.destructive,
        ),
        None => route(cx.retriever, task, &opts),
    };
    match decision {
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
            nothing_fits: true,
            ..
        } => (nothing_fits(cx, task, &question, &candidates), None),
        RouteDecision::Clarify {
            question,
            candidates,
            confidence,
            ..
        } => {
            // A task of several steps: the best tool of each step too, when not offered.
            let offered: Vec<ToolId> = candidates.iter().map(|t| t.id.clone()).collect();
            let steps = match cx.steps {
                true => step_tools(cx.retriever, task, server, &offered),
                false => Vec::new(),
            };
            let asked = Question {
                question: &question,
                candidates: &candidates,
                steps: &steps,
                confidence,
            };
            (clarify(cx, remember, asked), None)
        }
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
        Detail::TypeScript if skill => json!({"typescript": crate::programs::skill::declare(tool)}),
        Detail::TypeScript => {
            json!({"typescript": crate::code::typescript::declare_tool(cx.catalog, tool)})
        }
        _ => render(&tool.id.name, shown.unwrap_or(tool.input_schema()), detail),
    };
    let next_args =
        json!({"selectionId": selection, "arguments": placeholders(tool.input_schema())});
    let summary = cx.summary(tool, 160);
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

/// No tool explains the task: one line that says so, the nearest names (no selectionIds:
/// they are not offered as answers) and the browsing calls, instead of five unrelated tools.
fn nothing_fits(
    cx: &RouteContext,
    task: &str,
    question: &str,
    nearest: &[Arc<ToolRecord>],
) -> MetaResult {
    let route = format!("{}{ROUTE}", cx.meta_prefix);
    let names: Vec<Value> = nearest
        .iter()
        .map(|t| json!({"server": t.id.server, "name": t.id.name}))
        .collect();
    let browse = json!([
        {"tool": route, "arguments": {"task": task.trim(), "detail": "names"}},
        {"tool": route, "arguments": {"server": "<one of servers>"}},
    ]);
    let text = format!("{question}\nServers: {}", cx.servers.join(", "));
    MetaResult::text(
        text,
        Some(json!({
            "decision": "none",
            "question": question,
            "nearest": names,
            "servers": cx.servers,
            "browse": browse,
        })),
    )
}

/// What a question offers: the candidates for the whole task, and for a task of several
/// steps the best tool of each step not among them.
struct Question<'a> {
    question: &'a str,
    candidates: &'a [Arc<ToolRecord>],
    steps: &'a [StepTool],
    confidence: f32,
}

/// One offered tool as a question lists it: its selectionId, compact signature (the
/// signature names the arguments; the selectionId is all execute needs) and nextCall.
fn offer(
    cx: &RouteContext,
    remember: &mut dyn FnMut(&ToolId) -> String,
    tool: &ToolRecord,
    summary_chars: usize,
) -> (Value, String) {
    let execute = format!("{}{EXECUTE}", cx.meta_prefix);
    let selection = remember(&tool.id);
    let summary = cx.summary(tool, summary_chars);
    let signature = render(&tool.id.name, tool.input_schema(), Detail::Signature)["signature"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let args = json!({"selectionId": selection, "arguments": placeholders(tool.input_schema())});
    let line = format!(
        "{}/{signature}: {summary} [selectionId {selection}]",
        tool.id.server
    );
    let offered = json!({
        "server": tool.id.server,
        "name": tool.id.name,
        "summary": summary,
        "selectionId": selection,
        "signature": signature,
        "nextCall": {"tool": execute, "arguments": args},
    });
    (offered, line)
}

/// A question whose every candidate carries its own selectionId, compact signature and
/// nextCall, so the model answers it by calling execute: no second route. A task of
/// several steps also gets, per step, the best tool for it alone.
fn clarify(
    cx: &RouteContext,
    remember: &mut dyn FnMut(&ToolId) -> String,
    asked: Question,
) -> MetaResult {
    let Question {
        question,
        candidates,
        steps,
        confidence,
    } = asked;
    let execute = format!("{}{EXECUTE}", cx.meta_prefix);
    let question = if !candidates.is_empty() || question.starts_with("No tool of that name") {
        question.to_string()
    } else if cx.catalog.is_empty() {
        "No tools are available yet: the upstream servers are not connected.".to_string()
    } else {
        "No tool matches that task. Describe it differently, or name a server.".to_string()
    };
    let mut text = question.clone();
    let list: Vec<Value> = candidates
        .iter()
        .map(|t| {
            let (offered, line) = offer(cx, remember, t, 80);
            text.push_str(&format!("\n- {line}"));
            offered
        })
        .collect();
    let steps: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (mut offered, line) = offer(cx, remember, &s.tool, 60);
            if i == 0 {
                text.push_str("\nFor its steps:");
            }
            text.push_str(&format!("\n- {:?}: {line}", s.step));
            offered["step"] = json!(s.step);
            offered
        })
        .collect();
    if !candidates.is_empty() {
        text.push_str(&format!(
            "\nAnswer by calling {execute} {{\"selectionId\": <the chosen one's>, \"arguments\": {{...}}}}."
        ));
    }
    let mut structured = json!({
        "decision": "clarify",
        "question": question,
        "candidates": list,
        "confidence": (confidence * 1000.0).round() / 1000.0,
    });
    if !steps.is_empty() {
        structured["steps"] = json!(steps);
    }
    MetaResult::text(text, Some(structured))
}
