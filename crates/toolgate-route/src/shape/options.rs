//! How far slim direct mode cuts (`SlimOptions`, with per-tool overrides): read by the
//! listing (`slim.rs`) and by what finds a server's boilerplate (`boilerplate.rs`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use toolgate_core::catalog::ToolId;

/// How far to slim. Every field has a default, so `{}` is a valid configuration; the
/// config module deserializes one globally and may merge one per server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlimOptions {
    /// Longest tool description, in characters; longer ones are cut at a sentence end.
    pub description_max: usize,
    /// Longest description inside the input schema (parameters), in characters.
    pub property_description_max: usize,
    /// Remove text a server repeats across its tools (see `boilerplate`).
    pub boilerplate: bool,
    /// What to do with a top-level parameter whose name and description recur across a
    /// server's tools (Azure's `tenant`, `retry-*`): the model learns it once anyway.
    pub repeated_parameters: RepeatedParameters,
    /// A sentence or parameter is boilerplate when this share of a server's tools has it...
    pub boilerplate_min_share: f64,
    /// ...and at least this many tools do.
    pub boilerplate_min_tools: usize,
    /// Schema keywords removed everywhere in the input schema: they serve validators,
    /// editors or documentation generators, not a model choosing arguments.
    pub drop_keys: Vec<String>,
    /// Remove vendor extension keys (`x-...`) from the input schema.
    pub drop_vendor_keys: bool,
    /// Remove `additionalProperties: false`: models rarely invent parameters, and the
    /// original schema still rejects them at execute.
    pub drop_additional_properties_false: bool,
    /// Remove `$defs`/`definitions` entries no `$ref` reaches (Notion sends the same
    /// ~540-token `$defs` block with every tool, used or not).
    pub drop_unused_defs: bool,
    /// Keep the boolean annotation hints in the MCP listing.
    pub keep_annotation_hints: bool,
    /// Per-tool overrides, keyed by `server/name` or by the bare upstream name.
    pub tools: BTreeMap<String, ToolOverride>,
}

/// How much of a repeated parameter's description to keep (with `boilerplate` on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepeatedParameters {
    /// As the upstream wrote it (still subject to `property_description_max`).
    Keep,
    /// Its first sentence.
    FirstSentence,
    /// No description: name, type and enum only.
    Bare,
}

/// An operator's replacement for what the model sees of one tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolOverride {
    /// The exposed name. It must be unique, so it is applied when the catalog is built
    /// (`ToolInput::name_override`, see `SlimOptions::name_override`), not here.
    pub name: Option<String>,
    /// The description the model sees, used as written (not cut).
    pub description: Option<String>,
}

impl Default for SlimOptions {
    fn default() -> Self {
        Self {
            description_max: 500,
            property_description_max: 200,
            boilerplate: true,
            repeated_parameters: RepeatedParameters::FirstSentence,
            boilerplate_min_share: 0.5,
            boilerplate_min_tools: 3,
            drop_keys: ["$schema", "$id", "$comment", "examples", "example"]
                .map(String::from)
                .to_vec(),
            drop_vendor_keys: true,
            drop_additional_properties_false: true,
            drop_unused_defs: true,
            keep_annotation_hints: true,
            tools: BTreeMap::new(),
        }
    }
}

impl SlimOptions {
    /// The override for a tool: `server/name` first, then the bare name.
    pub fn override_for(&self, id: &ToolId) -> Option<&ToolOverride> {
        self.tools
            .get(&id.to_string())
            .or_else(|| self.tools.get(&id.name))
    }

    /// The exposed name an override asks for, to pass to `Catalog::build`.
    pub fn name_override(&self, id: &ToolId) -> Option<&str> {
        self.override_for(id)?.name.as_deref()
    }
}
