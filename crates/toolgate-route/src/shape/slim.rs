//! Slim direct mode: each tool cut to what a model needs to call it well.
//!
//! What a slimmed tool keeps: `name` (the exposed name), `description` (boilerplate
//! removed, cut at a sentence boundary), `inputSchema` (without keys that only serve
//! tooling), and, when `keep_annotation_hints` is set, the boolean `annotations` hints
//! (`readOnlyHint`, `destructiveHint`, ...), which clients use for approval prompts and which
//! never reach the model in OpenAI form, and an MCP App's `_meta.ui` (hosts render the
//! tool's UI from it). Everything else the upstream sent (`title`, `outputSchema`, the rest
//! of `_meta`, `icons`, `execution`, the annotation `title`) is left out of the listing only: the catalog keeps the original, and execute validates and forwards with it.

use super::boilerplate::{Boilerplate, ServerBoilerplate};
use super::options::{RepeatedParameters, SlimOptions};
use super::text::{cut_at_sentence, sentences};
use super::walk;
use serde_json::{Map, Value};
use std::collections::HashSet;
use toolgate_core::catalog::{Catalog, ToolId, ToolRecord};

/// One tool as a surface lists it: the original's identity and the object shown.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapedTool {
    /// The original's identity, to find the record (and its full schema) at execute.
    pub id: ToolId,
    /// An MCP Tool object whose `name` is the exposed name.
    pub tool: Map<String, Value>,
}

/// Slims every tool of a catalog (boilerplate is detected over the whole catalog first).
pub fn slim_catalog(catalog: &Catalog, opts: &SlimOptions) -> Vec<ShapedTool> {
    let boiler = Boilerplate::detect(catalog, opts);
    catalog
        .tools()
        .iter()
        .map(|r| ShapedTool {
            id: r.id.clone(),
            tool: slim_tool(r, opts, boiler.server(&r.id.server)),
        })
        .collect()
}

/// The slimmed MCP Tool object for one record, named with its exposed name.
pub fn slim_tool(
    record: &ToolRecord,
    opts: &SlimOptions,
    boiler: &ServerBoilerplate,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("name".into(), Value::String(record.exposed.clone()));
    let over = opts
        .override_for(&record.id)
        .and_then(|o| o.description.clone());
    let description = over.or_else(|| {
        record
            .tool
            .get("description")
            .and_then(Value::as_str)
            .map(|d| cut_at_sentence(&boiler.strip(d), opts.description_max))
    });
    if let Some(d) = description.filter(|d| !d.is_empty()) {
        out.insert("description".into(), Value::String(d));
    }
    out.insert(
        "inputSchema".into(),
        slim_schema(record.input_schema(), opts, boiler),
    );
    if opts.keep_annotation_hints {
        let hints: Map<String, Value> = record
            .tool
            .get("annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(k, v)| k.ends_with("Hint") && v.is_boolean())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !hints.is_empty() {
            out.insert("annotations".into(), Value::Object(hints));
        }
    }
    // An MCP App stays reachable: hosts read `_meta.ui` (never shown to the model) to
    // render the tool's UI, so the slim listing keeps that and only that of `_meta`.
    if let Some(ui) = record.ui() {
        out.insert("_meta".into(), serde_json::json!({ "ui": ui }));
    }
    out
}

/// The slimmed copy of an input schema. It accepts everything the original accepts
/// (it only loses keys that do not restrict, plus `additionalProperties: false` when so
/// configured), which the realcat test checks.
pub fn slim_schema(schema: &Value, opts: &SlimOptions, boiler: &ServerBoilerplate) -> Value {
    let mut s = schema.clone();
    // Repeated top-level parameters first, while their text still matches the original.
    if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, p) in props.iter_mut() {
            let Some(d) = p.get("description").and_then(Value::as_str) else {
                continue;
            };
            if !boiler.properties.contains(&(name.clone(), d.to_string())) {
                continue;
            }
            match opts.repeated_parameters {
                RepeatedParameters::Keep => {}
                RepeatedParameters::FirstSentence => {
                    let first = sentences(d).first().map(|f| f.to_string());
                    p["description"] = Value::String(first.unwrap_or_default());
                }
                RepeatedParameters::Bare => {
                    if let Some(m) = p.as_object_mut() {
                        m.remove("description");
                    }
                }
            }
        }
    }
    walk::for_each_mut(&mut s, &mut |node| slim_node(node, opts));
    if opts.drop_unused_defs {
        drop_unused_defs(&mut s);
    }
    s
}

fn slim_node(node: &mut Map<String, Value>, opts: &SlimOptions) {
    node.retain(|k, _| {
        let vendor = opts.drop_vendor_keys && k.starts_with("x-");
        !(vendor || opts.drop_keys.iter().any(|d| d == k))
    });
    if node
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        node.remove("required");
    }
    if opts.drop_additional_properties_false
        && node.get("additionalProperties") == Some(&Value::Bool(false))
    {
        node.remove("additionalProperties");
    }
    if let Some(Value::String(d)) = node.get_mut("description") {
        *d = cut_at_sentence(d, opts.property_description_max);
    }
    if let Some(Value::Object(props)) = node.get_mut("properties") {
        for (name, p) in props.iter_mut() {
            let Some(p) = p.as_object_mut() else { continue };
            if p.get("title")
                .and_then(Value::as_str)
                .is_some_and(|t| same_words(t, name))
            {
                p.remove("title");
            }
        }
    }
}

/// True when a title only restates a name: "Repo Path" for `repo_path`.
pub(super) fn same_words(a: &str, b: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    norm(a) == norm(b)
}

/// Every `$ref` in schema positions of `schema`, skipping the `$defs`/`definitions` blocks
/// at its root when `outside_defs` is set.
pub(super) fn refs_in(schema: &Value, outside_defs: bool) -> Vec<String> {
    let mut out = Vec::new();
    walk::for_each(schema, "", &mut |node, ptr| {
        if outside_defs && (ptr.starts_with("/$defs/") || ptr.starts_with("/definitions/")) {
            return;
        }
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            out.push(r.to_string());
        }
    });
    out
}

/// The root definition a local `$ref` points into: `#/$defs/a/properties/b` -> (`$defs`, `a`).
pub(super) fn def_target(r: &str) -> Option<(&str, String)> {
    let rest = r.strip_prefix("#/")?;
    let mut parts = rest.splitn(3, '/');
    let block = parts.next()?;
    let name = parts.next()?;
    let block = ["$defs", "definitions"].into_iter().find(|b| *b == block)?;
    Some((block, name.replace("~1", "/").replace("~0", "~")))
}

fn drop_unused_defs(schema: &mut Value) {
    let mut reached: HashSet<(String, String)> = HashSet::new();
    let mut todo: Vec<String> = refs_in(schema, true);
    while let Some(r) = todo.pop() {
        let Some((block, name)) = def_target(&r) else {
            continue;
        };
        if reached.insert((block.to_string(), name.clone())) {
            if let Some(def) = schema.get(block).and_then(|b| b.get(&name)) {
                todo.extend(refs_in(def, false));
            }
        }
    }
    let Some(root) = schema.as_object_mut() else {
        return;
    };
    for block in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = root.get_mut(block) {
            defs.retain(|name, _| reached.contains(&(block.to_string(), name.clone())));
            if defs.is_empty() {
                root.remove(block);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::ToolOverride;
    use serde_json::json;

    #[test]
    fn schema_loses_only_tooling_keys() {
        let s = json!({"$schema": "x", "type": "object", "additionalProperties": false,
            "required": [], "x-vendor": 1,
            "properties": {"repo_path": {"type": "string", "title": "Repo Path", "examples": ["a"]},
                           "kind": {"type": "string", "title": "The kind of thing"},
                           "p": {"$ref": "#/$defs/used"}},
            "$defs": {"used": {"$ref": "#/$defs/chained"}, "chained": {"type": "string"},
                      "unused": {"type": "integer"}}});
        let out = slim_schema(&s, &SlimOptions::default(), &ServerBoilerplate::default());
        assert_eq!(
            out,
            json!({"type": "object",
                "properties": {"repo_path": {"type": "string"},
                               "kind": {"type": "string", "title": "The kind of thing"},
                               "p": {"$ref": "#/$defs/used"}},
                "$defs": {"used": {"$ref": "#/$defs/chained"}, "chained": {"type": "string"}}})
        );
    }

    #[test]
    fn repeated_parameters_are_cut_or_bared() {
        let s = json!({"type": "object", "properties": {
            "tenant": {"type": "string", "description": "The tenant. Long text."},
            "own": {"type": "string", "description": "Own. Text."}}});
        let mut b = ServerBoilerplate::default();
        b.properties
            .insert(("tenant".into(), "The tenant. Long text.".into()));
        let mut o = SlimOptions::default();
        let out = slim_schema(&s, &o, &b);
        assert_eq!(out["properties"]["tenant"]["description"], "The tenant.");
        assert_eq!(out["properties"]["own"]["description"], "Own. Text.");
        o.repeated_parameters = RepeatedParameters::Bare;
        let out = slim_schema(&s, &o, &b);
        assert_eq!(out["properties"]["tenant"], json!({"type": "string"}));
        o.repeated_parameters = RepeatedParameters::Keep;
        assert_eq!(slim_schema(&s, &o, &b), s);
    }

    #[test]
    fn options_deserialize_with_defaults_and_reject_unknown_keys() {
        let o: SlimOptions = serde_json::from_value(json!({"description_max": 80,
            "tools": {"git/status": {"description": "Show status"}}}))
        .unwrap();
        assert_eq!(o.description_max, 80);
        assert_eq!(
            o.property_description_max,
            SlimOptions::default().property_description_max
        );
        let id = ToolId::new("git", "status");
        assert_eq!(
            o.override_for(&id).unwrap().description.as_deref(),
            Some("Show status")
        );
        assert!(serde_json::from_value::<SlimOptions>(json!({"descripton_max": 1})).is_err());
    }

    #[test]
    fn tool_keeps_name_description_schema_and_hints() {
        let c = Catalog::from_entries(vec![toolgate_core::catalog::CatalogEntry {
            server: "s".into(),
            tool:
                json!({"name": "t", "title": "T", "description": "Does it. More words follow here.",
                "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                "annotations": {"title": "T", "readOnlyHint": true}, "_meta": {"a": 1}})
                .as_object()
                .unwrap()
                .clone(),
        }]);
        let mut opts = SlimOptions {
            description_max: 10,
            ..Default::default()
        };
        let t = &slim_catalog(&c, &opts)[0].tool;
        assert_eq!(
            Value::Object(t.clone()),
            json!({"name": "s_t", "description": "Does it.", "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true}})
        );
        opts.tools.insert(
            "t".into(),
            ToolOverride {
                name: None,
                description: Some("Mine".into()),
            },
        );
        opts.keep_annotation_hints = false;
        let t = &slim_catalog(&c, &opts)[0].tool;
        assert_eq!(t["description"], "Mine");
        assert!(t.get("annotations").is_none());
        assert!(
            t.get("_meta").is_none(),
            "only an app's ui is kept of _meta"
        );
    }

    #[test]
    fn an_mcp_apps_ui_survives_slimming_and_nothing_else_of_meta() {
        let app = |meta: Value| {
            let tool = json!({"name": "t", "inputSchema": {"type": "object"}, "_meta": meta});
            Catalog::from_entries(vec![toolgate_core::catalog::CatalogEntry {
                server: "s".into(),
                tool: tool.as_object().unwrap().clone(),
            }])
        };
        let opts = SlimOptions::default();
        let ui = json!({"resourceUri": "ui://t/app.html", "visibility": ["model", "app"]});
        let c = app(json!({"ui": ui, "secret/key": 1}));
        assert_eq!(slim_catalog(&c, &opts)[0].tool["_meta"], json!({"ui": ui}));
        // The older flat key becomes the object form hosts read today.
        let c = app(json!({"ui/resourceUri": "ui://t/app.html"}));
        assert_eq!(
            slim_catalog(&c, &opts)[0].tool["_meta"],
            json!({"ui": {"resourceUri": "ui://t/app.html"}})
        );
    }
}
