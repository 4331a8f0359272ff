//! Deterministic result bodies: the echo object and exact-size text.

use rmcp::model::JsonObject;
use serde_json::{json, Value};

/// The object every successful call echoes: which tool was called, with what.
pub fn echo(server: &str, tool: &str, arguments: JsonObject) -> Value {
    json!({"server": server, "tool": tool, "arguments": arguments})
}

/// Exactly `bytes` bytes of readable ASCII: numbered lines naming the tool, the last one cut
/// short. The same `(tool, bytes)` always gives the same text, so results can be compared.
pub fn sized_text(tool: &str, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 128);
    let mut line = 1u64;
    while text.len() < bytes {
        text.push_str(&format!(
            "{line:06} {tool}: the quick brown fox jumps over the lazy dog\n"
        ));
        line += 1;
    }
    // ASCII only, so cutting at any byte index keeps the string valid.
    text.truncate(bytes);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_text_is_exact_and_deterministic() {
        for bytes in [0, 1, 57, 4096, 100_003] {
            let text = sized_text("get_issue", bytes);
            assert_eq!(text.len(), bytes);
            assert_eq!(text, sized_text("get_issue", bytes));
        }
        assert!(sized_text("t", 200).starts_with("000001 t: "));
    }
}
