//! The direct surface: every visible tool under its exposed name, calls forwarded as they are.

use super::convert::{result_from, tool_error, tool_named};
use crate::catalog::Catalog;
use crate::gateway::Gateway;
use crate::policy::Caller;
use crate::upstream::{CallOptions, Progress};
use rmcp::model::{CallToolResult, ProgressNotificationParam, Tool};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

/// The tools/list of the direct surface.
pub fn list(catalog: &Catalog) -> Vec<Tool> {
    catalog
        .tools()
        .iter()
        .filter_map(|t| tool_named(&t.tool, &t.exposed))
        .collect()
}

/// Forwards a tools/call, passing the client's progress token and cancellation through.
/// The caller's permission is checked (and the call audited) before any upstream sees it.
pub async fn call(
    gw: &Gateway,
    name: &str,
    arguments: Map<String, Value>,
    context: &RequestContext<RoleServer>,
    caller: &Caller,
) -> CallToolResult {
    let catalog = gw.catalog();
    let Some(tool) = catalog.by_exposed(name).or_else(|| catalog.resolve(name)) else {
        // Suggest only what this caller is shown: a hidden name is not a hint to give away.
        let listed = |t: &crate::catalog::ToolRecord| caller.policy.lists(caller, t);
        return tool_error(unknown_tool_message(&catalog, name, &listed));
    };
    let permit = match caller.policy.authorize(caller, tool, &arguments).await {
        Ok(p) => p,
        Err(refusal) => return tool_error(refusal),
    };
    let mut opts = CallOptions {
        cancel: Some(context.ct.clone()),
        ..Default::default()
    };
    let forward = context.meta.get_progress_token().map(|token| {
        let (tx, mut rx) = mpsc::unbounded_channel::<Progress>();
        opts.progress = Some(tx);
        let peer = context.peer.clone();
        tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                let mut n = ProgressNotificationParam::new(token.clone(), p.progress);
                n.total = p.total;
                n.message = p.message;
                if peer.notify_progress(n).await.is_err() {
                    break;
                }
            }
        })
    });
    let outcome = gw.call(tool, arguments, opts).await;
    permit.finish(&outcome);
    let result = match outcome {
        Ok(outcome) => result_from(outcome),
        Err(e) => tool_error(format!("{} failed: {e}", tool.exposed)),
    };
    if let Some(f) = forward {
        // The sender is gone once the call returns; let queued progress drain first.
        let _ = f.await;
    }
    result
}

/// "Unknown tool" with the closest names, so the model can correct itself.
pub fn unknown_tool_message(
    catalog: &Catalog,
    name: &str,
    shown: &dyn Fn(&crate::catalog::ToolRecord) -> bool,
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
