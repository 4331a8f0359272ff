//! Token counting with the real BPE encoders, and the two forms a tool definition takes.
//!
//! What is counted: the compact JSON serialization (`serde_json::to_string`, keys in the
//! order the upstream sent them, non-ASCII left as UTF-8) of one element of the `tools`
//! array a client sends. A surface's total is the sum over its tools; the array's own
//! `[`, `,` and `]` (one character per tool) are not counted. Providers render tools into
//! their own prompt format before the model sees them, so this measures what the client
//! sends, which is what every provider's count grows with.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tiktoken_rs::CoreBPE;

/// A BPE vocabulary. Each encoder is built once per process, on first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// `o200k_base`: GPT-4o, GPT-4.1, o-series.
    #[default]
    O200k,
    /// `cl100k_base`: GPT-4, GPT-3.5.
    Cl100k,
}

impl Encoding {
    /// The name tiktoken uses.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
        }
    }

    /// Accepts `o200k`, `cl100k` and the tiktoken names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "o200k" | "o200k_base" => Some(Encoding::O200k),
            "cl100k" | "cl100k_base" => Some(Encoding::Cl100k),
            _ => None,
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        // The singletons are `LazyLock`s: the rank tables (bundled in the crate) are
        // parsed once per process, not once per count.
        match self {
            Encoding::O200k => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        }
    }

    /// Tokens in `text`. Special-token text such as `<|endoftext|>` counts as ordinary
    /// text, as it does when it appears inside a tool description.
    pub fn count(self, text: &str) -> usize {
        self.bpe().count_ordinary(text)
    }

    /// Tokens in the compact JSON serialization of `value`.
    pub fn count_json(self, value: &Value) -> usize {
        self.count(&value.to_string())
    }
}

/// The OpenAI `tools` element for a tool: `{"type":"function","function":{name,
/// description, parameters}}`. A missing description is left out, as clients do.
pub fn openai_form(name: &str, description: Option<&str>, parameters: &Value) -> Value {
    let mut f = Map::new();
    f.insert("name".into(), Value::String(name.into()));
    if let Some(d) = description {
        f.insert("description".into(), Value::String(d.into()));
    }
    f.insert("parameters".into(), parameters.clone());
    json!({"type": "function", "function": f})
}

/// The OpenAI form of an MCP Tool object (`name`, `description`, `inputSchema`), under
/// `name` (the exposed name). An absent input schema becomes `{"type":"object"}`.
pub fn openai_form_of_tool(name: &str, tool: &Map<String, Value>) -> Value {
    static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let params = tool
        .get("inputSchema")
        .unwrap_or_else(|| EMPTY.get_or_init(|| json!({"type": "object"})));
    openai_form(
        name,
        tool.get("description").and_then(Value::as_str),
        params,
    )
}

/// The MCP `tools/list` form: the tool object itself, under `name`.
pub(super) fn mcp_form_of_tool(name: &str, tool: &Map<String, Value>) -> Map<String, Value> {
    let mut t = tool.clone();
    t.insert("name".into(), Value::String(name.into()));
    t
}

/// Token counts of one definition in both forms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FormTokens {
    /// The OpenAI `tools` element.
    pub openai: usize,
    /// The MCP `tools/list` element.
    pub mcp: usize,
}

impl FormTokens {
    /// Counts a tool object (as listed over MCP) in both forms under `name`.
    pub fn of_tool(enc: Encoding, name: &str, tool: &Map<String, Value>) -> Self {
        Self {
            openai: enc.count_json(&openai_form_of_tool(name, tool)),
            mcp: enc.count_json(&Value::Object(mcp_form_of_tool(name, tool))),
        }
    }
}

impl std::ops::AddAssign for FormTokens {
    fn add_assign(&mut self, o: Self) {
        self.openai += o.openai;
        self.mcp += o.mcp;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_strings() {
        // Token ids checked against tiktoken: "hello world" = [24912, 2375] in o200k_base
        // and [15339, 1917] in cl100k_base.
        let o = Encoding::O200k.bpe().encode_ordinary("hello world");
        assert_eq!(o, vec![24912, 2375]);
        let c = Encoding::Cl100k.bpe().encode_ordinary("hello world");
        assert_eq!(c, vec![15339, 1917]);
        assert_eq!(Encoding::O200k.count(""), 0);
        assert_eq!(
            Encoding::O200k.count("<|endoftext|>"),
            Encoding::O200k.count("<|endoftext|>")
        );
        assert!(
            Encoding::O200k.count("<|endoftext|>") > 1,
            "special text counts as text"
        );
    }

    #[test]
    fn forms() {
        let tool = json!({"name": "up", "description": "d", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}});
        let tool = tool.as_object().unwrap();
        let o = openai_form_of_tool("srv_up", tool);
        assert_eq!(
            o.to_string(),
            r#"{"type":"function","function":{"name":"srv_up","description":"d","parameters":{"type":"object"}}}"#
        );
        let m = mcp_form_of_tool("srv_up", tool);
        assert_eq!(m["name"], "srv_up");
        assert_eq!(m["annotations"]["readOnlyHint"], true);
        let f = FormTokens::of_tool(Encoding::O200k, "srv_up", tool);
        assert_eq!(f.openai, Encoding::O200k.count(&o.to_string()));
        assert!(f.mcp > 0);
    }
}
