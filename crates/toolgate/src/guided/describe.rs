//! The `describe_tools` meta-tool: what a model needs before it writes a program, over
//! exactly the tools the caller may use and its profile shows (the same tree a program
//! sees under `./servers`).
//!
//! - `{tools: ["server/tool", ...]}`: their TypeScript declarations.
//! - `{server}`: that server's tools; `{search}` (optionally with `server`): the best
//!   matches for a few words, ranked by route's index; `{}`: the servers.
//! - `detail`: `names`, `summary` (the default for lists: name and first sentence) or
//!   `typescript` (the default for `tools`).

use super::{Engine, MetaResult};
use crate::code::{tools_where, typescript, ToolSet};
use crate::policy::profiles::Visible;
use crate::policy::Caller;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use toolgate_core::catalog::{Catalog, ToolRecord};
use toolgate_core::meta::args::DescribeArgs;
use toolgate_route::Retriever;
use toolgate_sandbox::protocol::ToolEntry;

/// Most tools described as TypeScript in one call.
pub(crate) const MAX_TOOLS: usize = 20;
/// Most tools listed by name or summary in one call.
const MAX_LISTED: usize = 100;
/// Tools a search, and a server's listing, return unless `limit` says otherwise.
const SEARCH_LIMIT: usize = 10;
const SERVER_LIMIT: usize = 50;
/// Longest one-line summary of a tool.
const SUMMARY_BYTES: usize = 160;

pub(crate) fn run(engine: &Engine, args: &Map<String, Value>, caller: &Caller) -> MetaResult {
    match answer(engine, args, caller) {
        Ok(r) => r,
        Err(e) => MetaResult::error(format!("describe_tools: {e}")),
    }
}

/// The tools this caller's programs may call and its profile shows, with their run
/// layout (the same as `code::tree`'s).
fn visible(catalog: &Catalog, caller: &Caller) -> ToolSet {
    tools_where(catalog, |t| crate::gate::describable(caller, t))
}

// The error is the sentence the model is answered with (`MetaResult::error`): a string
// is the value, not a lost type.
fn answer(
    engine: &Engine,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Result<MetaResult, String> {
    let given: DescribeArgs = toolgate_core::meta::args::parse(args)?;
    let detail = given.detail.as_deref();
    if let Some(d) = detail.filter(|d| !["names", "summary", "typescript"].contains(d)) {
        return Err(format!("detail {d:?}: use names, summary or typescript"));
    }
    let (catalog, index) = engine.index();
    let (entries, allowed) = visible(&catalog, caller);
    if let Some(tools) = &given.tools {
        if given.server.is_some() || given.search.is_some() {
            return Err("give tools, or server/search, not both".into());
        }
        let names = tool_names(tools)?;
        return Ok(describe(
            &catalog,
            &entries,
            &names,
            detail.unwrap_or("typescript"),
        ));
    }
    let server = given.server.as_deref();
    let search = given.search.as_deref().filter(|s| !s.trim().is_empty());
    let detail = detail.unwrap_or("summary");
    let cap = if detail == "typescript" {
        MAX_TOOLS
    } else {
        MAX_LISTED
    };
    let default = if search.is_some() {
        SEARCH_LIMIT
    } else {
        SERVER_LIMIT
    };
    let limit = (given.limit).map_or(default, |n| n as usize).clamp(1, cap);
    let pick = |e: &ToolEntry| allowed.get(&(e.server.clone(), e.tool.clone())).cloned();
    let found: Vec<(ToolEntry, Arc<ToolRecord>)> = match (server, search) {
        (None, None) => return Ok(servers(&entries)),
        (Some(s), None) => {
            let on: Vec<_> = entries
                .iter()
                .filter(|e| e.server == s)
                .filter_map(|e| pick(e).map(|r| (e.clone(), r)))
                .collect();
            if on.is_empty() {
                return Err(format!(
                    "no server {s:?} among this caller's tools: describe_tools {{}} lists the servers"
                ));
            }
            on
        }
        (server, Some(query)) => {
            let keep =
                |t: &ToolRecord| allowed.contains_key(&(t.id.server.clone(), t.id.name.clone()));
            let hidden = catalog.len().saturating_sub(allowed.len())
                + index.len().saturating_sub(catalog.len());
            let ranked = Visible {
                inner: index.as_ref(),
                keep: &keep,
                hidden,
            }
            .rank(query, server, limit);
            ranked
                .into_iter()
                .filter_map(|(t, _)| {
                    entries
                        .iter()
                        .find(|e| e.server == t.id.server && e.tool == t.id.name)
                        .map(|e| (e.clone(), t))
                })
                .collect()
        }
    };
    let total = found.len();
    let shown: Vec<(ToolEntry, &ToolRecord)> = found
        .iter()
        .take(limit)
        .map(|(e, r)| (e.clone(), r.as_ref()))
        .collect();
    Ok(listing(&shown, total, detail))
}

// The error is the sentence the model is answered with (`MetaResult::error`): a string
// is the value, not a lost type.
fn tool_names(tools: &[String]) -> Result<Vec<&str>, String> {
    if tools.is_empty() || tools.len() > MAX_TOOLS {
        return Err(format!(
            "\"tools\" must be a list of 1 to {MAX_TOOLS} tool names (server/tool, as route returns them)"
        ));
    }
    Ok(tools.iter().map(String::as_str).collect())
}

/// `describe_tools {}`: each server with its number of tools.
fn servers(entries: &[ToolEntry]) -> MetaResult {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for e in entries {
        *counts.entry(e.server.as_str()).or_default() += 1;
    }
    let text: String = counts
        .iter()
        .map(|(s, n)| format!("{s}: {n} tool{}\n", if *n == 1 { "" } else { "s" }))
        .collect::<String>()
        + "describe_tools {server} lists a server's tools; {search} finds tools by what they do.\n";
    let list: Vec<Value> = counts
        .iter()
        .map(|(s, n)| json!({"server": s, "tools": n}))
        .collect();
    MetaResult::text(text, Some(json!({"servers": list})))
}

/// A list of tools at `detail`; `total` is how many matched before the cut.
fn listing(found: &[(ToolEntry, &ToolRecord)], total: usize, detail: &str) -> MetaResult {
    let calls = calls(found);
    let mut text = match detail {
        "typescript" => typescript::declare(found),
        "names" => found.iter().map(|(_, r)| format!("{}\n", r.id)).collect(),
        _ => found
            .iter()
            .map(|(_, r)| format!("{}: {}\n", r.id, r.summary(SUMMARY_BYTES)))
            .collect(),
    };
    if total > found.len() {
        text.push_str(&format!(
            "// {} of {total} shown: narrow with search, or raise limit\n",
            found.len()
        ));
    }
    let structured = json!({"detail": detail, "tools": calls, "total": total, "text": text});
    MetaResult::text(text, Some(structured))
}

fn calls(found: &[(ToolEntry, &ToolRecord)]) -> Vec<Value> {
    found
        .iter()
        .map(|(e, _)| json!({"server": e.server, "tool": e.tool, "call": format!("tools.{}.{}", e.server_ident, e.tool_ident)}))
        .collect()
}

/// The answer for `names` in `catalog` whose run layout is `entries` (see
/// [`crate::code::tools_for`]); the whole-task simulation asks this too.
pub fn describe(
    catalog: &Catalog,
    entries: &[ToolEntry],
    names: &[&str],
    detail: &str,
) -> MetaResult {
    let mut found = Vec::new();
    let mut unknown = Vec::new();
    for &name in names {
        let entry = catalog.resolve(name).and_then(|record| {
            entries
                .iter()
                .find(|e| e.server == record.id.server && e.tool == record.id.name)
                .map(|e| (e.clone(), record.as_ref()))
        });
        match entry {
            Some(e) if !found.iter().any(|(f, _): &(_, _)| f == &e.0) => found.push(e),
            Some(_) => {}
            None => unknown.push(name.to_string()),
        }
    }
    if found.is_empty() {
        return MetaResult::error(format!(
            "describe_tools: no tool named {} that this caller may use: describe_tools {{search}} or route finds tools, then describe them by server/name",
            unknown.join(", ")
        ));
    }
    if detail != "typescript" {
        let mut r = listing(&found, found.len(), detail);
        if let Some(s) = r.structured.as_mut() {
            s["unknown"] = json!(unknown);
        }
        return r;
    }
    let text = typescript::declare(&found);
    let mut shown = text.clone();
    if !unknown.is_empty() {
        shown.push_str(&format!("// not found: {}\n", unknown.join(", ")));
    }
    MetaResult::text(
        shown,
        Some(json!({"typescript": text, "tools": calls(&found), "unknown": unknown})),
    )
}
