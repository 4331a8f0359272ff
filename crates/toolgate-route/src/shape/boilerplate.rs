//! Boilerplate: text a server repeats across many of its tools, found per server.
//!
//! Two kinds: sentences (or lines) that recur in many tool descriptions (Notion's
//! "Error Responses:" / "400: Bad request"), and top-level parameters whose name and
//! description recur in many tools (Azure's `tenant`, `retry-*`, `auth-method` on all 235).
//! The first are removed from descriptions; the second are cut to their first sentence.

use super::options::SlimOptions;
use super::text::sentences;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use toolgate_core::catalog::Catalog;

/// What one server repeats.
#[derive(Debug, Clone, Default)]
pub struct ServerBoilerplate {
    /// Sentences found in at least the threshold number of the server's descriptions.
    pub sentences: HashSet<String>,
    /// (property name, description) pairs found in at least the threshold number of
    /// the server's input schemas, at the top level.
    pub properties: HashSet<(String, String)>,
}

/// Boilerplate of every server in a catalog, keyed by server name.
#[derive(Debug, Clone, Default)]
pub(super) struct Boilerplate {
    by_server: HashMap<String, ServerBoilerplate>,
}

impl Boilerplate {
    /// Finds each server's boilerplate. A unit counts when it occurs in at least
    /// `max(boilerplate_min_tools, boilerplate_min_share * tools)` of the server's tools.
    pub(super) fn detect(catalog: &Catalog, opts: &SlimOptions) -> Self {
        let mut by_server = HashMap::new();
        if !opts.boilerplate {
            return Self { by_server };
        }
        for server in catalog.servers() {
            let tools: Vec<_> = catalog
                .tools()
                .iter()
                .filter(|t| t.id.server == server)
                .collect();
            let threshold = (opts.boilerplate_min_share * tools.len() as f64)
                .ceil()
                .max(opts.boilerplate_min_tools as f64) as usize;
            let mut sentence_count: HashMap<&str, usize> = HashMap::new();
            let mut prop_count: HashMap<(&str, &str), usize> = HashMap::new();
            for t in &tools {
                // Count each unit once per tool: a sentence repeated inside one
                // description is not boilerplate across tools.
                let unique: HashSet<&str> = sentences(t.description()).into_iter().collect();
                for s in unique {
                    *sentence_count.entry(s).or_default() += 1;
                }
                if let Some(props) = t
                    .input_schema()
                    .get("properties")
                    .and_then(Value::as_object)
                {
                    for (name, p) in props {
                        if let Some(d) = p.get("description").and_then(Value::as_str) {
                            *prop_count.entry((name, d)).or_default() += 1;
                        }
                    }
                }
            }
            let sb = ServerBoilerplate {
                sentences: sentence_count
                    .into_iter()
                    .filter(|&(_, n)| n >= threshold)
                    .map(|(s, _)| s.to_string())
                    .collect(),
                properties: prop_count
                    .into_iter()
                    .filter(|&(_, n)| n >= threshold)
                    .map(|((k, d), _)| (k.to_string(), d.to_string()))
                    .collect(),
            };
            by_server.insert(server.to_string(), sb);
        }
        Self { by_server }
    }

    /// The boilerplate of one server (empty when none was found).
    pub(super) fn server(&self, server: &str) -> &ServerBoilerplate {
        static NONE: std::sync::OnceLock<ServerBoilerplate> = std::sync::OnceLock::new();
        self.by_server
            .get(server)
            .unwrap_or_else(|| NONE.get_or_init(ServerBoilerplate::default))
    }
}

impl ServerBoilerplate {
    /// `description` without its boilerplate sentences. Lines keep their breaks; a
    /// description made only of boilerplate keeps its first sentence, so no tool is left
    /// without one.
    pub(crate) fn strip(&self, description: &str) -> String {
        if self.sentences.is_empty() {
            return description.to_string();
        }
        let lines: Vec<String> = description
            .lines()
            .map(|line| {
                sentences(line)
                    .into_iter()
                    .filter(|s| !self.sentences.contains(*s))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            return sentences(description)
                .first()
                .map(|s| s.to_string())
                .unwrap_or_default();
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::catalog::CatalogEntry;

    fn entry(server: &str, name: &str, desc: &str) -> CatalogEntry {
        let tool = json!({"name": name, "description": desc, "inputSchema": {"type": "object",
            "properties": {"tenant": {"type": "string", "description": "The tenant. Long text."}}}});
        CatalogEntry {
            server: server.into(),
            tool: tool.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn finds_and_strips_repeated_sentences() {
        let c = Catalog::from_entries(vec![
            entry("n", "a", "Get a page.\nError Responses:\n400: Bad request"),
            entry("n", "b", "Get a user.\nError Responses:\n400: Bad request"),
            entry("n", "c", "Error Responses:\n400: Bad request"),
            entry("other", "d", "Error Responses:"),
        ]);
        let b = Boilerplate::detect(&c, &SlimOptions::default());
        let n = b.server("n");
        assert!(n.sentences.contains("Error Responses:"));
        assert_eq!(
            n.strip("Get a page.\nError Responses:\n400: Bad request"),
            "Get a page."
        );
        assert_eq!(
            n.strip("Error Responses:\n400: Bad request"),
            "Error Responses:"
        );
        assert!(n
            .properties
            .contains(&("tenant".into(), "The tenant. Long text.".into())));
        // One tool is below the minimum count: nothing is boilerplate there.
        assert!(b.server("other").sentences.is_empty());
        assert!(b.server("missing").sentences.is_empty());
    }
}
