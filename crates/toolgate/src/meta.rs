//! What a meta-tool answers (`MetaResult`), before the front turns it into an MCP
//! result: content blocks, a structured part, and whether it is an error. A leaf, so
//! code mode, the gate and the simulation can make one too.

use serde_json::Value;

/// What a meta-tool answers, before the front turns it into an MCP result.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaResult {
    /// Content blocks (MCP JSON), shown to the model.
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl MetaResult {
    pub fn text(text: impl Into<String>, structured: Option<Value>) -> Self {
        Self {
            content: vec![serde_json::json!({"type": "text", "text": text.into()})],
            structured,
            is_error: false,
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

/// Reads an optional string argument, or says what is wrong with it.
pub(crate) fn opt_str<'a>(
    args: &'a serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("\"{key}\" must be a string, got {other}")),
    }
}

/// Reads an optional non-negative integer argument.
pub(crate) fn opt_uint(
    args: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("\"{key}\" must be a non-negative integer, got {v}")),
    }
}
