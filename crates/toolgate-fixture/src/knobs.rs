//! Knobs: reserved call arguments (and per-tool defaults from `--knobs FILE`) that make a
//! fixture call slow, big, failing, chatty or fatal. See the crate docs for the table.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};
use rmcp::model::JsonObject;
use serde_json::Value;

/// Every reserved argument name; these are stripped before a call's arguments are echoed.
pub const KNOB_NAMES: [&str; 10] = [
    "_delay_ms",
    "_result_bytes",
    "_error",
    "_progress",
    "_list_changed",
    "_toggle_tool",
    "_crash",
    "_log",
    "_log_after_ms",
    "_ask_roots",
];

/// Upper bound on `_result_bytes`, so a typo cannot make the fixture allocate gigabytes.
pub const MAX_RESULT_BYTES: u64 = 64 * 1024 * 1024;

/// Upper bound on `_progress`: progress notifications are for exercising a path, not load.
pub const MAX_PROGRESS: u64 = 10_000;

/// The knobs in effect for one call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Knobs {
    /// `_delay_ms`: sleep this long before answering.
    pub delay_ms: u64,
    /// `_result_bytes`: answer with one text block of exactly this many bytes.
    pub result_bytes: Option<u64>,
    /// `_error`: answer with `isError: true` and this message.
    pub error: Option<String>,
    /// `_progress`: send this many progress notifications (needs a progressToken).
    pub progress: u64,
    /// `_list_changed`: send `notifications/tools/list_changed` (after the toggle, if any).
    pub list_changed: bool,
    /// `_toggle_tool`: hide this tool if visible, show it if hidden (with `_list_changed`).
    pub toggle_tool: Option<String>,
    /// `_crash`: exit the process mid-call, without answering.
    pub crash: bool,
    /// `_log`: send a `notifications/message` (info) carrying this value.
    pub log: Option<Value>,
    /// `_log_after_ms`: send the `_log` message this long after the answer, outside the
    /// call, instead of before it.
    pub log_after_ms: Option<u64>,
    /// `_ask_roots`: ask the client for its roots (`roots/list`) first, and go on whatever
    /// it answers, as server-everything does on a timer.
    pub ask_roots: bool,
}

impl Knobs {
    /// Overrides these knobs with any reserved keys of `source` (a call's arguments or a
    /// tool's entry of the knobs file).
    pub fn apply(&mut self, source: &JsonObject) -> anyhow::Result<()> {
        for (key, value) in source {
            match key.as_str() {
                "_delay_ms" => self.delay_ms = as_u64(key, value)?,
                "_result_bytes" => {
                    let bytes = as_u64(key, value)?;
                    if bytes > MAX_RESULT_BYTES {
                        bail!("_result_bytes must be at most {MAX_RESULT_BYTES}");
                    }
                    self.result_bytes = Some(bytes);
                }
                "_error" => self.error = Some(as_string(key, value)?),
                "_progress" => self.progress = as_u64(key, value)?.min(MAX_PROGRESS),
                "_list_changed" => self.list_changed = as_bool(key, value)?,
                "_toggle_tool" => self.toggle_tool = Some(as_string(key, value)?),
                "_crash" => self.crash = as_bool(key, value)?,
                "_log" => self.log = Some(value.clone()),
                "_log_after_ms" => self.log_after_ms = Some(as_u64(key, value)?),
                "_ask_roots" => self.ask_roots = as_bool(key, value)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// `arguments` without the reserved knob keys: what a call echoes.
pub fn strip_knobs(arguments: &JsonObject) -> JsonObject {
    arguments
        .iter()
        .filter(|(key, _)| !KNOB_NAMES.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Per-tool default knobs, from `--knobs FILE`: `{tool_name: {knob: value}}`.
#[derive(Debug, Clone, Default)]
pub struct KnobsFile {
    /// Tool name to its default knobs; calls' own knob arguments override these.
    by_tool: HashMap<String, JsonObject>,
}

impl KnobsFile {
    /// Reads and checks a knobs file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read knobs file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in knobs file {}", path.display()))
    }

    /// Parses a knobs file's text, rejecting unknown knob names (they would be silent typos).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let by_tool: HashMap<String, JsonObject> =
            serde_json::from_str(text).context("expected a JSON object {tool: {knob: value}}")?;
        for (tool, knobs) in &by_tool {
            for key in knobs.keys() {
                if !KNOB_NAMES.contains(&key.as_str()) {
                    bail!(
                        "tool {tool:?}: unknown knob {key:?} (known: {})",
                        KNOB_NAMES.join(", ")
                    );
                }
            }
            Knobs::default()
                .apply(knobs)
                .with_context(|| format!("tool {tool:?}"))?;
        }
        Ok(Self { by_tool })
    }

    /// The knobs for one call of `tool`: the file's defaults, then the call's arguments.
    pub fn knobs_for(&self, tool: &str, arguments: &JsonObject) -> anyhow::Result<Knobs> {
        let mut knobs = Knobs::default();
        if let Some(defaults) = self.by_tool.get(tool) {
            knobs.apply(defaults)?;
        }
        knobs.apply(arguments)?;
        Ok(knobs)
    }
}

fn as_u64(key: &str, value: &Value) -> anyhow::Result<u64> {
    value
        .as_u64()
        .with_context(|| format!("{key} must be a non-negative integer, got {value}"))
}

fn as_bool(key: &str, value: &Value) -> anyhow::Result<bool> {
    value
        .as_bool()
        .with_context(|| format!("{key} must be true or false, got {value}"))
}

fn as_string(key: &str, value: &Value) -> anyhow::Result<String> {
    value
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("{key} must be a string, got {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn call_arguments_override_file_defaults() {
        let file = KnobsFile::parse(r#"{"slow": {"_delay_ms": 50, "_log": "hi"}}"#).unwrap();
        let knobs = file
            .knobs_for("slow", &object(json!({"_delay_ms": 5, "q": 1})))
            .unwrap();
        assert_eq!(knobs.delay_ms, 5);
        assert_eq!(knobs.log, Some(json!("hi")));
        assert_eq!(
            file.knobs_for("other", &JsonObject::new()).unwrap(),
            Knobs::default()
        );
    }

    #[test]
    fn rejects_unknown_knobs_and_bad_types() {
        assert!(KnobsFile::parse(r#"{"t": {"_dealy_ms": 5}}"#).is_err());
        assert!(KnobsFile::parse(r#"{"t": {"_crash": "yes"}}"#).is_err());
    }

    #[test]
    fn strips_only_reserved_keys() {
        let stripped = strip_knobs(&object(json!({"_error": "x", "_other": 1, "q": 2})));
        assert_eq!(Value::Object(stripped), json!({"_other": 1, "q": 2}));
    }
}
