//! Example tasks per tool: tasks that are known to have needed a tool (labelled by an
//! operator, or kept from an evaluation's tuning split), indexed as one more BM25F field
//! of that tool. A new task worded like an earlier one then finds the same tool even
//! when the tool's own description uses other words ("coupons" for "discounts").
//!
//! The file is the labelled-query format of `datasets/README.md`: one JSON
//! object per line, `{"query": "...", "expected": ["server/name", ...]}`; the query
//! becomes an example of every tool it expects. Examples of tools the catalog does not
//! hold are kept (the server may connect later) and simply match nothing.

use super::text::truncate;
use std::collections::HashMap;
use toolgate_core::catalog::LabelledQuery;

/// At most this many examples are kept per tool (the first ones in file order), so one
/// tool's field cannot grow without bound.
pub(crate) const MAX_EXAMPLES_PER_TOOL: usize = 256;
/// An example longer than this is cut (at a character boundary).
pub(crate) const MAX_EXAMPLE_BYTES: usize = 1024;

/// Example tasks by tool, keyed `(server, name)`.
#[derive(Debug, Clone, Default)]
pub struct RouteExamples {
    by_tool: HashMap<(String, String), Vec<String>>,
    total: usize,
}

impl RouteExamples {
    /// Every labelled query becomes an example of each tool it expects (`server/name`,
    /// the server being everything before the first `/`; other spellings are ignored).
    pub fn from_queries<'a>(queries: impl IntoIterator<Item = &'a LabelledQuery>) -> Self {
        let mut out = Self::default();
        for q in queries {
            let text = truncate(q.query.trim(), MAX_EXAMPLE_BYTES);
            if text.is_empty() {
                continue;
            }
            for expected in &q.expected {
                if let Some((server, name)) = expected.split_once('/') {
                    out.add(server, name, text);
                }
            }
        }
        out
    }

    /// Adds one example of `server/name` (dropped past `MAX_EXAMPLES_PER_TOOL`).
    pub fn add(&mut self, server: &str, name: &str, text: &str) {
        let list = self
            .by_tool
            .entry((server.to_string(), name.to_string()))
            .or_default();
        if list.len() < MAX_EXAMPLES_PER_TOOL {
            list.push(text.to_string());
            self.total += 1;
        }
    }

    /// The examples of one tool (empty when it has none).
    pub fn of(&self, server: &str, name: &str) -> &[String] {
        self.by_tool
            .get(&(server.to_string(), name.to_string()))
            .map_or(&[], Vec::as_slice)
    }

    /// Number of examples kept, over all tools.
    pub fn len(&self) -> usize {
        self.total
    }

    /// True when no tool has an example.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Number of tools with at least one example.
    pub fn tools(&self) -> usize {
        self.by_tool.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(query: &str, expected: &[&str]) -> LabelledQuery {
        serde_json::from_value(serde_json::json!({"query": query, "expected": expected})).unwrap()
    }

    #[test]
    fn each_expected_tool_gets_the_query() {
        let ex = RouteExamples::from_queries(&[
            q("find coupons", &["shop/get_discounts", "deals/search"]),
            q("  ", &["shop/get_discounts"]),
            q("no server here", &["bare_name"]),
        ]);
        assert_eq!(ex.of("shop", "get_discounts"), ["find coupons"]);
        assert_eq!(ex.of("deals", "search"), ["find coupons"]);
        assert!(ex.of("x", "bare_name").is_empty());
        assert_eq!((ex.len(), ex.tools()), (2, 2));
    }

    #[test]
    fn examples_are_bounded() {
        let mut ex = RouteExamples::default();
        for i in 0..MAX_EXAMPLES_PER_TOOL + 10 {
            ex.add("s", "t", &format!("task {i}"));
        }
        assert_eq!(ex.of("s", "t").len(), MAX_EXAMPLES_PER_TOOL);
        let long = "é".repeat(MAX_EXAMPLE_BYTES);
        let one = RouteExamples::from_queries(&[q(&long, &["s/t"])]);
        assert!(one.of("s", "t")[0].len() <= MAX_EXAMPLE_BYTES);
    }
}
