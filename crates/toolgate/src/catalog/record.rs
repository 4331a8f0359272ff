//! One tool as an upstream listed it, keyed by (server, tool name).

use serde_json::{Map, Value};
use std::fmt;

/// The identity of a tool: the upstream server it lives on and its name there.
/// Names repeat across servers (19 do in realcat), so both parts are needed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolId {
    /// The upstream's configured name.
    pub server: String,
    /// The tool's name exactly as the upstream sent it.
    pub name: String,
}

impl ToolId {
    pub fn new(server: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            name: name.into(),
        }
    }

    /// Parses `server/name` (the server is everything before the first `/`).
    pub fn parse(s: &str) -> Option<Self> {
        let (server, name) = s.split_once('/')?;
        (!server.is_empty() && !name.is_empty()).then(|| Self::new(server, name))
    }
}

impl fmt::Display for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.server, self.name)
    }
}

/// A tool in the catalog: its identity, the name clients see, and the original
/// tool object kept whole (inputSchema, outputSchema, annotations, _meta, ...),
/// so validation and forwarding always work from what the upstream sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
    /// (server, upstream name).
    pub id: ToolId,
    /// The unique name clients see in direct mode (see `names`).
    pub exposed: String,
    /// The MCP Tool object exactly as the upstream listed it.
    pub tool: Map<String, Value>,
}

impl ToolRecord {
    pub fn description(&self) -> &str {
        self.tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn title(&self) -> Option<&str> {
        self.tool.get("title").and_then(Value::as_str).or_else(|| {
            self.tool
                .get("annotations")
                .and_then(|a| a.get("title"))
                .and_then(Value::as_str)
        })
    }

    /// The input schema; an absent one is treated as an empty object schema.
    pub fn input_schema(&self) -> &Value {
        static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        self.tool
            .get("inputSchema")
            .unwrap_or_else(|| EMPTY.get_or_init(|| serde_json::json!({"type": "object"})))
    }

    pub fn output_schema(&self) -> Option<&Value> {
        self.tool.get("outputSchema")
    }

    /// A boolean annotation hint (`readOnlyHint`, `destructiveHint`, ...), if the upstream set it.
    pub fn annotation(&self, hint: &str) -> Option<bool> {
        self.tool.get("annotations")?.get(hint)?.as_bool()
    }

    /// The first sentence of the description, at most `max` characters: a one-line summary.
    pub fn summary(&self, max: usize) -> String {
        one_line(self.description(), max)
    }
}

/// The first sentence (or line) of `text`, cut at a char boundary to at most `max` chars.
pub fn one_line(text: &str, max: usize) -> String {
    let text = text.trim();
    let mut end = text.find('\n').unwrap_or(text.len());
    if let Some(p) = text[..end].find(". ") {
        end = p + 1;
    }
    let line = text[..end].trim();
    if line.chars().count() <= max {
        return line.to_string();
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}
