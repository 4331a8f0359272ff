//! The dataset file formats (see `datasets/README.md`): catalog files and
//! labelled query files. Used by the fixture server, `toolgate tokens`, `lint` and `eval`.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;

/// One element of a catalog file: `{"server": ..., "tool": {...MCP Tool object...}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// The upstream the tool belongs to.
    pub server: String,
    /// The MCP Tool object.
    pub tool: Map<String, Value>,
}

/// One line of a query file.
#[derive(Debug, Clone, Deserialize)]
pub struct LabelledQuery {
    /// The query's id in its dataset, if it has one.
    #[serde(default)]
    pub id: Option<Value>,
    /// The task, in words.
    pub query: String,
    /// Every acceptable tool as `server/name`.
    pub expected: Vec<String>,
    /// Asking the user to choose is the right answer.
    #[serde(default)]
    pub ambiguous: bool,
    /// The query is a tool name typed verbatim.
    #[serde(default)]
    pub exact: bool,
    /// `"tune"`: traffic for `toolgate eval route --replay` (other values: test).
    #[serde(default)]
    pub split: Option<String>,
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
/// to provide it. Tests skip with that sentence (a failure with `CI` set); it can only be
/// missing when `TOOLGATE_DATASETS` points elsewhere or the checkout lacks `datasets/`.
/// The sentence is the value (a test prints it as its reason to skip).
pub fn dataset(relative: &str) -> Result<std::path::PathBuf, String> {
    let path = datasets_dir().join(relative);
    if path.exists() {
        return Ok(path);
    }
    Err(format!(
        "needs the datasets: {} is missing; the repository's datasets/ folder holds them \
         (restore it with `git checkout -- datasets`), or set TOOLGATE_DATASETS to a folder \
         laid out as datasets/README.md says",
        path.display()
    ))
}

/// The datasets folder: `TOOLGATE_DATASETS`, else the repository's `datasets/` (found from
/// this crate's source folder, `crates/NAME`, at build time).
pub fn datasets_dir() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("TOOLGATE_DATASETS").filter(|p| !p.is_empty()) {
        return p.into();
    }
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .nth(2)
        .unwrap_or(crate_dir)
        .join("datasets")
}
