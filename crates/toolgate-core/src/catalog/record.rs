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
    /// The id of the tool `name` of `server`.
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
    /// The tool's description (empty when it has none).
    pub fn description(&self) -> &str {
        self.tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The tool's title, or its annotations' title.
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

    /// The output schema, if the tool declares one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.tool.get("outputSchema")
    }

    /// A boolean annotation hint (`readOnlyHint`, `destructiveHint`, ...), if the upstream set it.
    pub fn annotation(&self, hint: &str) -> Option<bool> {
        self.tool.get("annotations")?.get(hint)?.as_bool()
    }

    /// The tool's MCP App (the `io.modelcontextprotocol/ui` extension): its `_meta.ui`
    /// object (`resourceUri`, `visibility`, ...), or one made of the older flat key
    /// `_meta["ui/resourceUri"]`; `None` for a tool without a UI.
    pub fn ui(&self) -> Option<Value> {
        let meta = self.tool.get("_meta")?;
        match (meta.get("ui"), meta.get("ui/resourceUri")) {
            (Some(ui @ Value::Object(_)), _) => Some(ui.clone()),
            (_, Some(uri @ Value::String(_))) => Some(serde_json::json!({ "resourceUri": uri })),
            _ => None,
        }
    }

    /// Whether only the tool's app may call it (`_meta.ui.visibility` without `"model"`):
    /// route never offers it to a model, though the app's own calls of it are served.
    pub fn app_only(&self) -> bool {
        let visibility = self
            .tool
            .get("_meta")
            .and_then(|m| m.get("ui"))
            .and_then(|u| u.get("visibility"))
            .and_then(Value::as_array);
        visibility.is_some_and(|v| !v.iter().any(|x| x.as_str() == Some("model")))
    }

    /// The first sentence of the description, at most `max` characters: a one-line summary.
    pub fn summary(&self, max: usize) -> String {
        one_line(self.description(), max)
    }
}

/// The first sentence (or line) of `text`, at most `max` characters: a one-line summary.
///
/// A sentence ends at `.`, `!` or `?` followed by a space, outside brackets, unless the
/// word before is an abbreviation ("e.g.", "i.e.", "etc.", "vs.") or a lone letter;
/// versions and URLs (`v1.2`, `example.com/a.b`) have no space after their dots. A cut
/// summary ends with `…`, and brackets it opened are closed after it.
pub fn one_line(text: &str, max: usize) -> String {
    let text = text.trim();
    let line = text[..first_sentence_end(text)].trim();
    let (line, cut) = if line.chars().count() <= max {
        (line.to_string(), false)
    } else {
        let kept: String = line.chars().take(max.saturating_sub(1)).collect();
        // Prefer a word boundary when one is near the end.
        let at = kept
            .rfind(' ')
            .filter(|&i| i * 4 >= kept.len() * 3)
            .unwrap_or(kept.len());
        (kept[..at].trim_end().to_string(), true)
    };
    let mut out = line;
    let closers = unclosed(&out);
    if cut {
        out.push('…');
    } else if !closers.is_empty() {
        // A sentence that ends inside brackets (a cut upstream text): close them too.
        out = out.trim_end_matches('.').to_string();
    }
    out.extend(closers.chars().rev());
    out
}

/// Byte offset where the first sentence (or the first line) of `text` ends.
fn first_sentence_end(text: &str) -> usize {
    let end = text.find('\n').unwrap_or(text.len());
    let bytes = text.as_bytes();
    let mut depth = 0i32;
    for i in 0..end {
        match bytes[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = (depth - 1).max(0),
            b'.' | b'!' | b'?' if depth == 0 => {
                let space_after = bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace());
                if space_after && !(bytes[i] == b'.' && abbreviation_before(&text[..i])) {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    end
}

/// True when the word before a `.` is an abbreviation, not the end of a sentence.
fn abbreviation_before(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || matches!(c, '(' | '['))
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    const ABBREVIATIONS: &[&str] = &[
        "e.g", "i.e", "eg", "ie", "etc", "vs", "approx", "incl", "cf", "esp", "max", "min", "no",
        "nr", "mr", "ms", "dr", "st", "ca", "resp", "u.s", "viz",
    ];
    ABBREVIATIONS.contains(&word.as_str()) || word.chars().count() == 1
}

/// The closing brackets `text` still owes, innermost last.
fn unclosed(text: &str) -> String {
    let mut open = Vec::new();
    for c in text.chars() {
        match c {
            '(' => open.push(')'),
            '[' => open.push(']'),
            '{' => open.push('}'),
            ')' | ']' | '}' if open.last() == Some(&c) => {
                open.pop();
            }
            _ => {}
        }
    }
    open.into_iter().collect()
}

#[cfg(test)]
mod summary_tests {
    use super::one_line;

    #[test]
    fn abbreviations_versions_and_urls_do_not_end_the_sentence() {
        assert_eq!(
            one_line("Project key, e.g. PROJ or OPS. Required.", 100),
            "Project key, e.g. PROJ or OPS."
        );
        assert_eq!(
            one_line(
                "Search issues with a query language (e.g. `is:open label:bug`). More.",
                100
            ),
            "Search issues with a query language (e.g. `is:open label:bug`)."
        );
        assert_eq!(
            one_line(
                "Works with v1.2.3 of https://api.example.com/v2. Next.",
                100
            ),
            "Works with v1.2.3 of https://api.example.com/v2."
        );
        assert_eq!(
            one_line("Fetch a page, i.e. its HTML.\nSecond line", 100),
            "Fetch a page, i.e. its HTML."
        );
        assert_eq!(
            one_line("Sort (a. b) order. Next", 100),
            "Sort (a. b) order."
        );
    }

    #[test]
    fn cut_summaries_close_their_brackets() {
        let s = one_line(
            "Search issues with a query language (e.g. is:open label:bug sort:updated)",
            50,
        );
        assert!(s.ends_with("…)"), "{s}");
        assert!(s.chars().count() <= 51, "{s}");
        assert_eq!(one_line("List files [dir", 100), "List files [dir]");
    }
}

#[cfg(test)]
mod app_tests {
    use super::{ToolId, ToolRecord};
    use serde_json::{json, Value};

    fn tool(meta: Value) -> ToolRecord {
        ToolRecord {
            id: ToolId::new("s", "t"),
            exposed: "s_t".into(),
            tool: json!({"name": "t", "_meta": meta})
                .as_object()
                .unwrap()
                .clone(),
        }
    }

    #[test]
    fn a_tools_app_is_read_from_either_form_and_app_only_tools_are_known() {
        let ui = json!({"resourceUri": "ui://t/a.html"});
        assert_eq!(tool(json!({"ui": ui})).ui(), Some(ui.clone()));
        assert_eq!(
            tool(json!({"ui/resourceUri": "ui://t/a.html"})).ui(),
            Some(ui)
        );
        assert_eq!(tool(json!({"other": 1})).ui(), None);
        assert_eq!(tool(json!({"ui": "not an object"})).ui(), None);
        // Visibility: only an explicit list without "model" keeps the model out.
        assert!(tool(json!({"ui": {"visibility": ["app"]}})).app_only());
        assert!(!tool(json!({"ui": {"visibility": ["model", "app"]}})).app_only());
        assert!(!tool(json!({"ui": {"resourceUri": "ui://t/a.html"}})).app_only());
        assert!(!tool(json!({})).app_only());
    }
}
