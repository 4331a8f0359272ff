//! What a meta-tool answers (`MetaResult`), before the front turns it into an MCP
//! result: content blocks, a structured part, and whether it is an error. A leaf, so
//! code mode, the gate and the simulation can make one too. [`args`]: each meta-tool's
//! arguments, typed.

pub mod args;

use serde_json::Value;

/// What a meta-tool answers, before the front turns it into an MCP result.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaResult {
    /// Content blocks (MCP JSON), shown to the model.
    pub content: Vec<Value>,
    /// The structured part (`structuredContent`), if any.
    pub structured: Option<Value>,
    /// The answer is an error the model should act on (`isError`).
    pub is_error: bool,
    /// The result's `_meta`: for `execute` of a tool with an MCP App, the tool's `ui`
    /// (see [`crate::catalog::ToolRecord::ui`]), so a host that renders apps can show it.
    pub meta: Option<Value>,
}

impl MetaResult {
    /// A successful answer of one text block, with an optional structured part.
    pub fn text(text: impl Into<String>, structured: Option<Value>) -> Self {
        Self {
            content: vec![serde_json::json!({"type": "text", "text": text.into()})],
            structured,
            is_error: false,
            meta: None,
        }
    }

    /// A model-fixable error: what was wrong and what to do.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(text, None)
        }
    }
}
