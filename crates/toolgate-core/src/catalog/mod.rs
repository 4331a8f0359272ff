//! The live catalog: every upstream tool, keyed by (server, name), with its exposed name.
//!
//! A `Catalog` is an immutable snapshot; the gateway swaps in a new one (behind an
//! `Arc`) whenever an upstream connects, disconnects or announces `tools/list_changed`.
//! Everything derived from it (exposed names, the retriever index, token counts) is
//! computed when a snapshot is built, never on the request path.

mod file;
pub mod names;
mod record;

pub use file::{
    dataset, datasets_dir, load_catalog_file, load_queries_file, parse_catalog, CatalogEntry,
    LabelledQuery,
};
pub use record::{one_line, ToolId, ToolRecord};

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// An immutable snapshot of every known tool.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    /// Sorted by (server, name) so every listing is deterministic.
    tools: Vec<Arc<ToolRecord>>,
    /// Exposed name -> index into `tools` (the hot lookup for direct-mode calls).
    by_exposed: HashMap<String, usize>,
    /// (server, name) -> index into `tools`.
    by_id: HashMap<ToolId, usize>,
}

/// One tool as handed to `Catalog::build`.
#[derive(Debug, Clone)]
pub struct ToolInput {
    /// The tool's server and upstream name.
    pub id: ToolId,
    /// Prefix for the exposed name (the upstream's `prefix`, default its name).
    pub prefix: String,
    /// An exposed name set in configuration, if any.
    pub name_override: Option<String>,
    /// The MCP Tool object as the upstream listed it.
    pub tool: Map<String, Value>,
}

impl Catalog {
    /// Builds a snapshot. Duplicate (server, name) pairs keep the first occurrence.
    pub fn build(inputs: Vec<ToolInput>) -> Self {
        let mut seen = std::collections::HashSet::new();
        let mut inputs: Vec<ToolInput> = inputs
            .into_iter()
            .filter(|t| seen.insert(t.id.clone()))
            .collect();
        inputs.sort_by(|a, b| a.id.cmp(&b.id));
        let keys: Vec<_> = inputs
            .iter()
            .map(|t| (t.id.clone(), t.prefix.clone(), t.name_override.clone()))
            .collect();
        let exposed = names::assign(&keys);
        let tools: Vec<Arc<ToolRecord>> = inputs
            .into_iter()
            .zip(exposed)
            .map(|(t, exposed)| {
                Arc::new(ToolRecord {
                    id: t.id,
                    exposed,
                    tool: t.tool,
                })
            })
            .collect();
        let by_exposed = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.exposed.clone(), i))
            .collect();
        let by_id = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
        Self {
            tools,
            by_exposed,
            by_id,
        }
    }

    /// A catalog from a catalog file's entries, each server prefixed with its own name.
    pub fn from_entries(entries: Vec<CatalogEntry>) -> Self {
        Self::build(
            entries
                .into_iter()
                .filter_map(|e| {
                    let name = e.tool.get("name")?.as_str()?.to_string();
                    Some(ToolInput {
                        id: ToolId::new(&e.server, name),
                        prefix: e.server,
                        name_override: None,
                        tool: e.tool,
                    })
                })
                .collect(),
        )
    }

    /// Every tool, in catalog order.
    pub fn tools(&self) -> &[Arc<ToolRecord>] {
        &self.tools
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when no upstream has tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tool with this exposed name.
    pub fn by_exposed(&self, name: &str) -> Option<&Arc<ToolRecord>> {
        self.by_exposed.get(name).map(|&i| &self.tools[i])
    }

    /// The tool with this (server, name).
    pub fn by_id(&self, id: &ToolId) -> Option<&Arc<ToolRecord>> {
        self.by_id.get(id).map(|&i| &self.tools[i])
    }

    /// Resolves a name as a user or model may type it: the exposed name, `server/name`,
    /// or a bare upstream name when exactly one server has a tool by that name.
    pub fn resolve(&self, name: &str) -> Option<&Arc<ToolRecord>> {
        if let Some(t) = self.by_exposed(name) {
            return Some(t);
        }
        if let Some(t) = ToolId::parse(name).and_then(|id| self.by_id(&id)) {
            return Some(t);
        }
        let mut bare = self.tools.iter().filter(|t| t.id.name == name);
        match (bare.next(), bare.next()) {
            (Some(t), None) => Some(t),
            _ => None,
        }
    }

    /// The names of the servers that have tools, sorted.
    pub fn servers(&self) -> Vec<&str> {
        let mut s: Vec<&str> = self.tools.iter().map(|t| t.id.server.as_str()).collect();
        s.dedup();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(server: &str, name: &str) -> CatalogEntry {
        CatalogEntry {
            server: server.into(),
            tool: json!({"name": name, "inputSchema": {"type": "object"}})
                .as_object()
                .unwrap()
                .clone(),
        }
    }

    #[test]
    fn resolves_every_spelling() {
        let c = Catalog::from_entries(vec![
            entry("git", "status"),
            entry("github", "status"),
            entry("time", "now"),
        ]);
        assert_eq!(
            c.resolve("git_status").unwrap().id,
            ToolId::new("git", "status")
        );
        assert_eq!(c.resolve("github/status").unwrap().id.server, "github");
        assert_eq!(c.resolve("now").unwrap().id.server, "time");
        assert!(c.resolve("status").is_none(), "ambiguous bare name");
        assert!(c.resolve("nope").is_none());
        assert_eq!(c.servers(), vec!["git", "github", "time"]);
    }
}
