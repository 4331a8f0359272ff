//! What the model sees of each tool, and what it costs: token counts, slim direct mode,
//! the local-model-safe profile, and the lint that says why that profile exists.
//!
//! Everything here works on a `Catalog` snapshot and returns new objects; the catalog
//! keeps every tool as its upstream sent it, for validation and calls. The modules below
//! are private; what other crates name is re-exported here ([`Encoding`], [`ShapeProfile`],
//! [`SlimOptions`], [`LocalOptions`], [`listing`], [`lint_schema`], [`ProfileView`], ...).
//!
//! - `tokens`: BPE counts (o200k, cl100k) and the OpenAI / MCP definition forms.
//! - `slim`: `SlimOptions` and the slimmed tool listing; `boilerplate` finds
//!   per-server repeated text; `text` cuts descriptions at sentence ends.
//! - `local`: `LocalOptions` and the grammar-safe schema rewrite; `refs` inlines `$ref`s.
//! - `keywords`: the keywords converters mishandle, listed once for lint and local.
//! - `lint`: the rules local models trip on (the reports over a catalog are in `measure`).
//! - `walk`: visiting every subschema with its JSON pointer.
//! - `view`: one snapshot under the configured direct profile (`ProfileView`).

mod boilerplate;
mod keywords;
mod lint;
mod local;
mod options;
mod refs;
mod slim;
mod text;
mod tokens;
mod view;
mod walk;

pub use lint::{lint_schema, Rule, SchemaFinding};
pub use local::{rewrite_schema, LocalOptions};
pub use options::{SlimOptions, ToolOverride};
pub use slim::{slim_catalog, slim_schema, slim_tool, ShapedTool};
pub use tokens::{openai_form, openai_form_of_tool, Encoding, FormTokens};
pub use view::ProfileView;

use serde::{Deserialize, Serialize};
use toolgate_core::catalog::Catalog;

/// Which rendering of the plain tool list (`[direct] profile`; not a policy profile, which
/// says which tools a role sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
// `expecting`: a wrong type in `[direct] profile` reads as it did before the rename.
#[serde(rename_all = "snake_case", expecting = "enum Profile")]
pub enum ShapeProfile {
    /// Every tool object as its upstream sent it (only the name is the exposed one).
    #[default]
    Raw,
    /// `SlimOptions` applied.
    Slim,
    /// Slim, then every input schema rewritten by `LocalOptions`.
    Local,
}

impl ShapeProfile {
    /// The profile a configuration word names (`raw` or `direct`, `slim`, `local`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "raw" | "direct" => Some(ShapeProfile::Raw),
            "slim" => Some(ShapeProfile::Slim),
            "local" => Some(ShapeProfile::Local),
            _ => None,
        }
    }
}

/// The options of every surface, as configuration will hold them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SurfaceOptions {
    /// What the slim profile removes.
    pub slim: SlimOptions,
    /// How the local profile rewrites schemas.
    pub local: LocalOptions,
    /// Prefix of the guided meta-tool names (empty: `route`, `execute`, `continue`).
    pub guided_prefix: String,
}

/// The tool list a profile shows, in catalog order.
pub fn listing(catalog: &Catalog, profile: ShapeProfile, opts: &SurfaceOptions) -> Vec<ShapedTool> {
    match profile {
        ShapeProfile::Raw => catalog
            .tools()
            .iter()
            .map(|r| ShapedTool {
                id: r.id.clone(),
                tool: tokens::mcp_form_of_tool(&r.exposed, &r.tool),
            })
            .collect(),
        ShapeProfile::Slim => slim_catalog(catalog, &opts.slim),
        ShapeProfile::Local => slim_catalog(catalog, &opts.slim)
            .into_iter()
            .map(|mut t| {
                if let Some(s) = t.tool.get("inputSchema") {
                    let safe = rewrite_schema(s, &opts.local);
                    t.tool.insert("inputSchema".into(), safe);
                }
                t
            })
            .collect(),
    }
}
