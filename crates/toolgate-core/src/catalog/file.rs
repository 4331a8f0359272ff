//! The dataset file formats (see `../shared/datasets/README.md`): catalog files and
//! labelled query files. Used by the fixture server, `toolgate tokens`, `lint` and `eval`.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;

/// One element of a catalog file: `{"server": ..., "tool": {...MCP Tool object...}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    pub server: String,
    pub tool: Map<String, Value>,
}

/// One line of a query file.
#[derive(Debug, Clone, Deserialize)]
pub struct LabelledQuery {
    #[serde(default)]
    pub id: Option<Value>,
    pub query: String,
    /// Every acceptable tool as `server/name`.
    pub expected: Vec<String>,
    /// Asking the user to choose is the right answer.
    #[serde(default)]
    pub ambiguous: bool,
    /// The query is a tool name typed verbatim.
    #[serde(default)]
    pub exact: bool,
}

/// Reads a catalog file. Every entry needs a `server` and a `tool` with a string `name`.
pub fn load_catalog_file(path: &Path) -> Result<Vec<CatalogEntry>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read catalog file {}", path.display()))?;
    parse_catalog(&text).with_context(|| format!("in catalog file {}", path.display()))
}

/// Parses catalog text (the same format as `load_catalog_file`).
pub fn parse_catalog(text: &str) -> Result<Vec<CatalogEntry>> {
    let entries: Vec<CatalogEntry> = serde_json::from_str(text)
        .context("a catalog is a JSON array of {\"server\": NAME, \"tool\": {MCP Tool object}}")?;
    for (i, e) in entries.iter().enumerate() {
        if !e.tool.get("name").is_some_and(Value::is_string) {
            bail!(
                "entry {i} (server {:?}): the tool has no string \"name\"",
                e.server
            );
        }
    }
    Ok(entries)
}

/// Reads a JSON-lines query file; blank lines are skipped, a bad line names its number.
pub fn load_queries_file(path: &Path) -> Result<Vec<LabelledQuery>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read query file {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a query object", path.display(), i + 1))
        })
        .collect()
}

/// A file or folder under the datasets folder, or a sentence saying it is missing and how
/// to provide it. Tests and benchmarks that need the shared datasets (which a plain clone
/// does not have) skip with that sentence, except in CI (`CI` set), where it is present.
pub fn dataset(relative: &str) -> Result<std::path::PathBuf, String> {
    let path = datasets_dir().join(relative);
    if path.exists() {
        return Ok(path);
    }
    Err(format!(
        "needs the shared datasets: {} is missing; put the project's shared/ folder beside \
         the repository (as ../shared) or set TOOLGATE_DATASETS to its datasets folder",
        path.display()
    ))
}

/// The datasets folder: `TOOLGATE_DATASETS`, else `../shared/datasets` from the workspace.
pub fn datasets_dir() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("TOOLGATE_DATASETS") {
        return p.into();
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.join("../../../shared/datasets")
}
