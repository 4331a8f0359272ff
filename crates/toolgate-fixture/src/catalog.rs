//! The catalog file format, and the choice of which of its tools one fixture serves.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use anyhow::{bail, Context};
use rmcp::model::{JsonObject, Tool};
use serde::Deserialize;

/// One element of a catalog file: `{"server": NAME, "tool": {MCP Tool object}}`.
#[derive(Debug, Deserialize)]
struct CatalogEntry {
    /// The upstream server the tool came from; `(server, tool.name)` is unique.
    server: String,
    /// Kept as raw JSON so every key the file holds can be served back unchanged.
    tool: JsonObject,
}

/// A tool the fixture serves.
#[derive(Debug, Clone)]
pub struct FixtureTool {
    /// The catalog server the tool belongs to; echoed in every call result.
    pub server: String,
    /// The tool exactly as the file holds it: rmcp's [`Tool`] drops keys it does not model
    /// (`execution`, extra annotation hints), so the wire answer is rebuilt from this.
    pub raw: Arc<JsonObject>,
    /// The same tool parsed by rmcp, which is what the handler hands to the SDK.
    pub tool: Tool,
}

impl FixtureTool {
    /// The tool's name (unique within one fixture).
    pub fn name(&self) -> &str {
        &self.tool.name
    }

    /// The declared `outputSchema`, if any.
    pub fn output_schema(&self) -> Option<&JsonObject> {
        self.tool.output_schema.as_deref()
    }
}

/// The tools of a catalog file, in file order.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Every entry, in file order, so `tools/list` pages are stable.
    tools: Vec<FixtureTool>,
}

impl Catalog {
    /// Parses a catalog file's text.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let entries: Vec<CatalogEntry> = serde_json::from_str(text)
            .context("the catalog is not a JSON array of {server, tool}")?;
        let mut tools = Vec::with_capacity(entries.len());
        for (index, entry) in entries.into_iter().enumerate() {
            let tool: Tool = serde_json::from_value(serde_json::Value::Object(entry.tool.clone()))
                .with_context(|| format!("catalog entry {index} is not a valid MCP tool"))?;
            tools.push(FixtureTool {
                server: entry.server,
                raw: Arc::new(entry.tool),
                tool,
            });
        }
        Ok(Self { tools })
    }

    /// The distinct server names, sorted, with their tool counts.
    pub fn servers(&self) -> BTreeMap<&str, usize> {
        let mut servers = BTreeMap::new();
        for tool in &self.tools {
            *servers.entry(tool.server.as_str()).or_insert(0) += 1;
        }
        servers
    }

    /// Every tool, in file order.
    pub fn tools(&self) -> &[FixtureTool] {
        &self.tools
    }

    /// The tools one fixture serves: those of `server`, or all of them.
    ///
    /// One MCP server cannot list two tools with the same name, so serving several catalog
    /// servers at once fails when their names collide; pick one with `--server` then.
    pub fn select(&self, server: Option<&str>) -> anyhow::Result<Vec<FixtureTool>> {
        let selected: Vec<FixtureTool> = match server {
            Some(name) => {
                if !self.tools.iter().any(|tool| tool.server == name) {
                    let known: Vec<&str> = self.servers().into_keys().collect();
                    bail!(
                        "unknown server {name:?}; the catalog has: {}",
                        known.join(", ")
                    );
                }
                self.tools
                    .iter()
                    .filter(|tool| tool.server == name)
                    .cloned()
                    .collect()
            }
            None => self.tools.clone(),
        };
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for tool in &selected {
            if let Some(other) = seen.insert(tool.name(), &tool.server) {
                bail!(
                    "tool name {:?} appears in servers {other:?} and {:?}; serve one server with --server",
                    tool.name(),
                    tool.server
                );
            }
        }
        Ok(selected)
    }
}
