//! The messages of an agent loop, as OpenAI chat requests carry them, and the loop that
//! counts each request: its fixed part (definitions, instructions) plus the messages so far.

use super::ResultForm;
use serde_json::{json, Map, Value};
use toolgate_core::meta::MetaResult;
use toolgate_route::shape::Encoding;

/// One agent loop: a fixed part every request carries, then the messages so far.
pub(super) struct Loop {
    enc: Encoding,
    fixed: usize,
    /// Tokens of the messages so far.
    history: usize,
    pub(super) requests: Vec<usize>,
    /// Every message, for inspection (tests, `--transcript`-like debugging).
    pub(super) messages: Vec<Value>,
    calls: usize,
}

impl Loop {
    pub(super) fn new(enc: Encoding, fixed: usize) -> Self {
        Self {
            enc,
            fixed,
            history: 0,
            requests: Vec::new(),
            messages: Vec::new(),
            calls: 0,
        }
    }

    pub(super) fn push(&mut self, message: Value) {
        self.history += self.enc.count_json(&message);
        self.messages.push(message);
    }

    /// A request: everything so far goes to the model.
    pub(super) fn request(&mut self) {
        self.requests.push(self.fixed + self.history);
    }

    /// The model's answer to the request just made: one tool call. Returns its id.
    pub(super) fn call(&mut self, name: &str, arguments: &Value) -> String {
        self.calls += 1;
        let id = format!("call_{}", self.calls);
        self.push(assistant_call(&id, name, arguments));
        id
    }

    pub(super) fn total(&self) -> usize {
        self.requests.iter().sum()
    }
}

/// `{"role":"user","content":…}`.
pub(crate) fn user_message(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

/// An assistant message with one tool call, arguments as a JSON string (OpenAI form).
pub(crate) fn assistant_call(id: &str, name: &str, arguments: &Value) -> Value {
    json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
        "function": {"name": name, "arguments": arguments.to_string()}}]})
}

/// A `tool` message answering `id`.
pub(crate) fn tool_message(id: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

/// A meta-tool answer as the model's context receives it.
pub(crate) fn result_content(r: &MetaResult, form: ResultForm) -> String {
    match form {
        ResultForm::Text => r
            .content
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        ResultForm::Mcp => {
            let mut m = Map::new();
            m.insert("content".into(), Value::Array(r.content.clone()));
            if let Some(s) = &r.structured {
                m.insert("structuredContent".into(), s.clone());
            }
            if r.is_error {
                m.insert("isError".into(), Value::Bool(true));
            }
            Value::Object(m).to_string()
        }
    }
}
