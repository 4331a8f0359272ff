//! The `describe_tools` meta-tool: TypeScript declarations of the named tools, so a model
//! writing a program reads exactly the signatures it needs.

use super::{Engine, MetaResult};
use crate::catalog::Catalog;
use crate::code::{tools_for, typescript};
use serde_json::{json, Map, Value};
use toolgate_sandbox::protocol::ToolEntry;

/// Most tools described in one call.
pub const MAX_TOOLS: usize = 20;

pub fn run(engine: &Engine, args: &Map<String, Value>) -> MetaResult {
    if let Some(key) = args.keys().find(|k| k.as_str() != "tools") {
        return MetaResult::error(format!(
            "describe_tools: unknown argument {key:?}: describe_tools takes tools, a list of tool names"
        ));
    }
    let names: Vec<&str> = match args.get("tools") {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_TOOLS => {
            match a.iter().map(Value::as_str).collect::<Option<Vec<_>>>() {
                Some(n) => n,
                None => return MetaResult::error("describe_tools: \"tools\" must be a list of tool names (server/tool)"),
            }
        }
        _ => {
            return MetaResult::error(format!(
                "describe_tools: \"tools\" must be a list of 1 to {MAX_TOOLS} tool names (server/tool, as route returns them)"
            ))
        }
    };
    let catalog = engine.gw.catalog();
    let (entries, _) = tools_for(&catalog);
    describe(&catalog, &entries, &names)
}

/// The answer for `names` in `catalog` whose run layout is `entries` (see
/// [`crate::code::tools_for`]); the whole-task simulation asks this too.
pub fn describe(catalog: &Catalog, entries: &[ToolEntry], names: &[&str]) -> MetaResult {
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
            "describe_tools: no tool named {}: call route with the task to find tools, then describe them by server/name",
            unknown.join(", ")
        ));
    }
    let text = typescript::declare(&found);
    let calls: Vec<Value> = found
        .iter()
        .map(|(e, _)| json!({"server": e.server, "tool": e.tool, "call": format!("tools.{}.{}", e.server_ident, e.tool_ident)}))
        .collect();
    let mut shown = text.clone();
    if !unknown.is_empty() {
        shown.push_str(&format!("// not found: {}\n", unknown.join(", ")));
    }
    MetaResult::text(
        shown,
        Some(json!({"typescript": text, "tools": calls, "unknown": unknown})),
    )
}
