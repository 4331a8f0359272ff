//! The guided surface at the edge: lists the meta-tools and dispatches their calls to
//! the guided engine (`crate::guided`).

use super::convert::{tool_error, tool_from};
use super::Surface;
use crate::gateway::Gateway;
use crate::guided::surface::{meta_tools, CONTINUE, EXECUTE, ROUTE};
use rmcp::model::{CallToolResult, Tool};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};

/// Per-session guided state (selections made by route, pages, operations).
#[derive(Default)]
pub struct GuidedState {}

pub fn list(gw: &Gateway) -> Vec<Tool> {
    meta_tools(&gw.config.gateway.meta_prefix)
        .iter()
        .map(tool_from)
        .collect()
}

pub async fn call(
    gw: &Gateway,
    _state: &GuidedState,
    name: &str,
    _args: Map<String, Value>,
    _context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let prefix = &gw.config.gateway.meta_prefix;
    let bare = name.strip_prefix(prefix.as_str()).unwrap_or(name);
    match bare {
        ROUTE | EXECUTE | CONTINUE => tool_error(format!("{name} is not available yet")),
        _ => tool_error(format!(
            "Unknown tool {name:?}. This gateway is in guided mode: call {prefix}{ROUTE} with the task to find the right tool, then {prefix}{EXECUTE}."
        )),
    }
}

/// Resolves `auto` mode for a new session.
pub fn auto_surface(_gw: &Gateway) -> Surface {
    Surface::Guided
}

#[allow(dead_code)]
fn _unused(_: Value) {}
