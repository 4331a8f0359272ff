//! One catalog snapshot as the configured direct profile shows it, built once per snapshot
//! and looked up by tool (direct `tools/list`, route's `full` detail, `auto` mode's cost).

use super::tokens::{openai_form_of_tool, Encoding};
use super::{listing, ShapeProfile, ShapedTool, SurfaceOptions};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use toolgate_core::catalog::{Catalog, ToolId};

/// The direct profile's listing of one snapshot.
#[derive(Debug, Clone)]
pub struct ProfileView {
    /// The snapshot this was built from (callers compare it by pointer to reuse the view).
    pub catalog: Arc<Catalog>,
    /// The profile it shows.
    pub profile: ShapeProfile,
    /// Every tool in catalog order, as the profile shows it.
    pub tools: Vec<ShapedTool>,
    /// (server, name) -> index into `tools`.
    by_id: HashMap<ToolId, usize>,
    /// The listing's cost in o200k tokens, OpenAI form (what `auto` compares).
    pub tokens: usize,
}

impl ProfileView {
    /// The listing of `catalog` under `profile`, with its cost.
    pub fn build(catalog: Arc<Catalog>, profile: ShapeProfile, opts: &SurfaceOptions) -> Self {
        let tools = listing(&catalog, profile, opts);
        let by_id = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.clone(), i))
            .collect();
        let tokens = tools
            .iter()
            .map(|t| {
                let name = t.tool.get("name").and_then(Value::as_str).unwrap_or("");
                Encoding::O200k.count_json(&openai_form_of_tool(name, &t.tool))
            })
            .sum();
        Self {
            catalog,
            profile,
            tools,
            by_id,
            tokens,
        }
    }

    /// The tool object the profile shows for `id`.
    pub fn tool(&self, id: &ToolId) -> Option<&Map<String, Value>> {
        self.by_id.get(id).map(|&i| &self.tools[i].tool)
    }

    /// The input schema the profile shows for `id`.
    pub fn input_schema(&self, id: &ToolId) -> Option<&Value> {
        self.tool(id)?.get("inputSchema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::catalog::CatalogEntry;

    #[test]
    fn slim_view_drops_schema_keys_and_is_found_by_id() {
        let tool = json!({"name": "t", "description": "D.", "inputSchema":
            {"$schema": "x", "type": "object", "properties": {"a": {"type": "string"}}}});
        let catalog = Arc::new(Catalog::from_entries(vec![CatalogEntry {
            server: "s".into(),
            tool: tool.as_object().unwrap().clone(),
        }]));
        let opts = SurfaceOptions::default();
        let raw = ProfileView::build(catalog.clone(), ShapeProfile::Raw, &opts);
        let slim = ProfileView::build(catalog, ShapeProfile::Slim, &opts);
        let id = ToolId::new("s", "t");
        assert!(raw.input_schema(&id).unwrap().get("$schema").is_some());
        assert!(slim.input_schema(&id).unwrap().get("$schema").is_none());
        assert!(slim.tokens < raw.tokens);
        assert!(slim.tool(&ToolId::new("s", "u")).is_none());
    }
}
