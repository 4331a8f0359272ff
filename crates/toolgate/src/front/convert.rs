//! Conversions between toolgate's JSON values and rmcp's types, at the server edge.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value};
use toolgate_core::call::CallOutcome;

/// An MCP Tool object (as JSON) under the name clients should see.
pub(super) fn tool_named(tool: &Map<String, Value>, name: &str) -> Option<Tool> {
    let mut t = tool.clone();
    t.insert("name".into(), Value::String(name.to_string()));
    if !t.contains_key("inputSchema") {
        t.insert("inputSchema".into(), serde_json::json!({"type": "object"}));
    }
    serde_json::from_value(Value::Object(t)).ok()
}

/// A JSON tool definition (e.g. a meta-tool) as an rmcp Tool.
pub(super) fn tool_from(def: &Value) -> Tool {
    serde_json::from_value(def.clone()).expect("meta-tool definitions are valid Tool objects")
}

/// An upstream outcome passed on unchanged: content, structuredContentBlock and isError kept.
pub(super) fn result_from(outcome: CallOutcome) -> CallToolResult {
    let content: Vec<ContentBlock> = outcome
        .content
        .into_iter()
        .filter_map(|c| serde_json::from_value(c).ok())
        .collect();
    let mut r = if outcome.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    r.structured_content = outcome.structured_content;
    if let Some(meta) = outcome.meta.and_then(|m| serde_json::from_value(m).ok()) {
        r.meta = Some(meta);
    }
    r
}

/// A model-fixable error as a tool result (`isError: true`) with a message saying what to do.
pub(super) fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}
