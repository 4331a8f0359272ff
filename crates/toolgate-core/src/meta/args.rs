//! The meta-tools' arguments: one typed definition per tool (serde, unknown keys refused,
//! and `schemars` for its shape), parsed by [`parse`] with errors the model can fix.
//!
//! The schema the model sees is written by hand in `guided::surface`: a generated one is
//! longer (nullable types, formats, `additionalProperties`), and every guided session pays
//! for it. A test there checks that the two agree exactly on property names, types and
//! `required`, so a field added here and not there (or the reverse) fails the build's tests.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The arguments of one meta-tool.
pub trait MetaArgs: DeserializeOwned + JsonSchema {
    /// The tool's name, without the meta prefix.
    const TOOL: &'static str;
    /// Said after the list of its arguments when a call passes another key.
    const HINT: &'static str = "";
}

/// `route`: find the one tool for a task, or list a server's tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    missing_docs,
    reason = "a doc comment would become the field's description in the derived JSON Schema; guided/surface.rs describes each argument"
)]
pub struct RouteArgs {
    pub task: Option<String>,
    pub server: Option<String>,
    pub detail: Option<String>,
    pub limit: Option<u64>,
    pub cursor: Option<String>,
}

impl MetaArgs for RouteArgs {
    const TOOL: &'static str = "route";
}

/// `execute`: run the tool route chose (or one named exactly). `arguments` may be left out
/// for a tool that takes none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    missing_docs,
    reason = "a doc comment would become the field's description in the derived JSON Schema; guided/surface.rs describes each argument"
)]
pub struct ExecuteArgs {
    #[serde(rename = "selectionId")]
    pub selection_id: Option<String>,
    pub tool: Option<String>,
    pub arguments: Option<Map<String, Value>>,
    pub fields: Option<Vec<String>>,
    pub max_tokens: Option<u64>,
}

impl MetaArgs for ExecuteArgs {
    const TOOL: &'static str = "execute";
    const HINT: &'static str = "; the tool's own arguments go inside \"arguments\"";
}

/// `continue`: the next page of a result, or a running operation.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    missing_docs,
    reason = "a doc comment would become the field's description in the derived JSON Schema; guided/surface.rs describes each argument"
)]
pub struct ContinueArgs {
    pub cursor: Option<String>,
    #[serde(rename = "operationId")]
    pub operation_id: Option<String>,
    pub cancel: Option<bool>,
}

impl MetaArgs for ContinueArgs {
    const TOOL: &'static str = "continue";
}

/// `execute_code`: a program to run in a sandbox worker.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    missing_docs,
    reason = "a doc comment would become the field's description in the derived JSON Schema; guided/surface.rs describes each argument"
)]
pub struct ExecuteCodeArgs {
    /// A JavaScript program (a body that may await and return, or an async function of input)
    pub code: String,
    #[serde(default)]
    pub input: Value,
    pub timeout_ms: Option<u64>,
    pub max_tool_calls: Option<u64>,
}

impl MetaArgs for ExecuteCodeArgs {
    const TOOL: &'static str = "execute_code";
}

/// `describe_tools`: TypeScript or summaries of the tools a program may call.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    missing_docs,
    reason = "a doc comment would become the field's description in the derived JSON Schema; guided/surface.rs describes each argument"
)]
pub struct DescribeArgs {
    pub tools: Option<Vec<String>>,
    pub server: Option<String>,
    pub search: Option<String>,
    pub detail: Option<String>,
    pub limit: Option<u64>,
}

impl MetaArgs for DescribeArgs {
    const TOOL: &'static str = "describe_tools";
}

/// `propose_skill`: a finished run proposed as a skill draft.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    missing_docs,
    reason = "a doc comment would become the field's description in the derived JSON Schema; guided/surface.rs describes each argument"
)]
pub struct ProposeArgs {
    /// the runId of a finished execute_code run of this session
    #[serde(rename = "runId")]
    pub run_id: String,
    /// a short name, e.g. weekly-report
    pub name: String,
    /// what the skill does and when to use it (route finds it by this)
    pub description: String,
    pub input_schema: Option<Map<String, Value>>,
    pub servers: Option<Vec<String>>,
}

impl MetaArgs for ProposeArgs {
    const TOOL: &'static str = "propose_skill";
}

/// The generated JSON Schema of `T` (what the hand-written one must agree with).
pub fn schema_of<T: MetaArgs>() -> Value {
    schemars::schema_for!(T).to_value()
}

/// Why a meta-tool's arguments were refused; the message says what to fix, for the model.
/// None is retryable as it was sent: the call must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// A key the tool does not take.
    #[error("unknown argument {key:?}: {tool} takes {takes}{hint}")]
    Unknown {
        /// The meta-tool.
        tool: &'static str,
        /// The key the call passed.
        key: String,
        /// The keys it takes, in words ("a, b and c").
        takes: String,
        /// What the tool adds (where its own arguments go).
        hint: &'static str,
    },
    /// A required key left out (or `null`).
    #[error("{key:?} is required{}", .what.as_deref().map(|w| format!(": {w}")).unwrap_or_default())]
    Missing {
        /// The key.
        key: String,
        /// What it is, from its description.
        what: Option<String>,
    },
    /// A key whose value is not of its type.
    #[error("{key:?} must be {expected}, got {got}")]
    WrongType {
        /// The key.
        key: String,
        /// What it must be, in words.
        expected: &'static str,
        /// What was given, as JSON cut short.
        got: String,
    },
    /// The arguments did not deserialize for another reason (serde's words).
    #[error("{tool}: {message}")]
    Other {
        /// The meta-tool.
        tool: &'static str,
        /// What serde said.
        message: String,
    },
}

impl ArgsError {
    /// A short, stable name of what was wrong (for logs and metrics labels).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => "unknown_argument",
            Self::Missing { .. } => "missing_argument",
            Self::WrongType { .. } => "wrong_type",
            Self::Other { .. } => "invalid_arguments",
        }
    }
}

/// The handlers answer a refused call with the message alone.
impl From<ArgsError> for String {
    fn from(e: ArgsError) -> Self {
        e.to_string()
    }
}

/// A call's arguments as `T`, or what to fix: an unknown key (naming the ones it takes), a
/// required one missing, or one of the wrong type. `null` counts as left out.
pub fn parse<T: MetaArgs>(args: &Map<String, Value>) -> Result<T, ArgsError> {
    let schema = schema_of::<T>();
    let empty = Map::new();
    let props = schema["properties"].as_object().unwrap_or(&empty);
    if let Some(key) = args.keys().find(|k| !props.contains_key(*k)) {
        let names: Vec<&str> = props.keys().map(String::as_str).collect();
        return Err(ArgsError::Unknown {
            tool: T::TOOL,
            key: key.clone(),
            takes: listed(&names),
            hint: T::HINT,
        });
    }
    let required = schema["required"].as_array().into_iter().flatten();
    for key in required.filter_map(Value::as_str) {
        if args.get(key).is_none_or(Value::is_null) {
            return Err(ArgsError::Missing {
                key: key.to_string(),
                what: props[key]["description"].as_str().map(str::to_string),
            });
        }
    }
    // Left-out and null optional keys are the same to the handler.
    let given: Map<String, Value> = args
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    serde_path_to_error::deserialize(Value::Object(given)).map_err(|e| {
        let key = match e.path().iter().next() {
            Some(serde_path_to_error::Segment::Map { key }) => key.clone(),
            _ => {
                return ArgsError::Other {
                    tool: T::TOOL,
                    message: e.inner().to_string(),
                }
            }
        };
        let got = args.get(&key).map(Value::to_string).unwrap_or_default();
        ArgsError::WrongType {
            expected: expected(&props[&key]),
            got: clip(&got, 80),
            key,
        }
    })
}

/// "a, b and c".
fn listed(names: &[&str]) -> String {
    match names.split_last() {
        None => "no arguments".into(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// What a value of this property's schema is, in words.
fn expected(prop: &Value) -> &'static str {
    let types: Vec<&str> = match &prop["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    match types.iter().find(|t| **t != "null").copied() {
        Some("string") => "a string",
        Some("integer") if prop["minimum"].as_u64().is_some() => "a non-negative integer",
        Some("integer") => "an integer",
        Some("boolean") => "true or false",
        Some("object") => "an object",
        Some("array") if prop["items"]["type"] == "string" => "a list of strings",
        Some("array") => "a list",
        _ => "a JSON value",
    }
}

/// At most `max` bytes of `text`, with an ellipsis when cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
