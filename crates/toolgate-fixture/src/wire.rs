//! Puts the catalog's raw tool objects back into outgoing `tools/list` answers.
//!
//! rmcp's `Tool` keeps only the keys it models, so a tool served through it loses
//! `execution`, extra annotation hints (`category`, ...) and anything newer. The fixture
//! promises to serve the file unchanged, so both transports pass every outgoing JSON-RPC
//! message through [`restore_raw_tools`] after rmcp has serialized it.

use serde_json::Value;

use crate::server::FixtureServer;

/// Rewrites one serialized JSON-RPC message; returns `None` when it needs no change.
pub fn restore_raw_tools_text(server: &FixtureServer, message: &str) -> Option<String> {
    // Cheap pre-check: most messages are not tool lists.
    if !message.contains("\"tools\"") {
        return None;
    }
    let mut value: Value = serde_json::from_str(message).ok()?;
    restore_raw_tools(server, &mut value).then(|| value.to_string())
}

/// Replaces each tool of a `tools/list` result by its raw catalog object; true if changed.
pub fn restore_raw_tools(server: &FixtureServer, message: &mut Value) -> bool {
    let Some(tools) = message
        .get_mut("result")
        .and_then(|result| result.get_mut("tools"))
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let mut changed = false;
    for tool in tools.iter_mut() {
        let Some(typed) = tool.as_object() else {
            continue;
        };
        let Some(raw) = typed
            .get("name")
            .and_then(Value::as_str)
            .and_then(|name| server.raw_tool(name))
        else {
            continue;
        };
        let mut restored = raw.as_ref().clone();
        // rmcp drops a non-object `outputSchema` for peers older than 2026-07-28; keep that
        // decision, it is protocol negotiation rather than data loss.
        if !typed.contains_key("outputSchema") {
            restored.remove("outputSchema");
        }
        *tool = Value::Object(restored);
        changed = true;
    }
    if server.lists_malformed_tools() {
        let extra = crate::faults::malformed_tools(tools.first());
        tools.extend(extra);
        changed = true;
    }
    changed
}
