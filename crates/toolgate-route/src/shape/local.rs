//! The local-model-safe profile: each input schema rewritten so grammar converters
//! (llama.cpp and the like) build a small grammar quickly, while meaning at least as much
//! as the original: every rewrite widens or moves a constraint into the description,
//! never narrows (the one exception: a root object with no properties at all is shown as
//! taking none). Execute keeps validating against the original.

use super::keywords::{is_partial, rewritten_away, shaped_by_combinator, BOUNDS};
use super::refs::{any_value, inline};
use super::text::append_note;
use super::walk;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Limits shared by the rewrite and the lint, so `lint --profile local` agrees with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalOptions {
    /// Largest `minLength`/`maxLength`/`minItems`/`maxItems` kept in the schema; larger
    /// bounds move into the description.
    pub max_bound: u64,
    /// Most `oneOf`/`anyOf` branches kept; larger unions are merged.
    pub max_union: usize,
    /// How many times a recursive definition is expanded inside itself before it is cut.
    pub ref_depth: usize,
    /// `format` values converters have grammar rules for (llama.cpp: these four).
    pub formats: Vec<String>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            max_bound: 64,
            max_union: 8,
            ref_depth: 1,
            formats: ["date", "time", "date-time", "uuid"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// The local-model-safe copy of an input schema.
pub fn rewrite_schema(schema: &Value, opts: &LocalOptions) -> Value {
    let mut s = inline(schema, opts.ref_depth.max(1));
    walk::for_each_mut(&mut s, &mut merge_combinators);
    walk::for_each_mut_at(&mut s, "", &mut |node, ptr| {
        fix_node(node, ptr.is_empty(), opts)
    });
    s
}

/// First pass: `allOf` merged into its parent; unions with constraint-only branches
/// dropped (the parent's own keywords still apply, so dropping only widens).
fn merge_combinators(node: &mut Map<String, Value>) {
    let mut notes = Vec::new();
    if let Some(Value::Array(parts)) = node.remove("allOf") {
        for part in parts {
            let Value::Object(part) = part else { continue };
            for (k, v) in part {
                match (k.as_str(), node.get_mut(&k)) {
                    ("properties", Some(Value::Object(mine))) => {
                        for (n, p) in v.as_object().into_iter().flatten() {
                            mine.entry(n.clone()).or_insert_with(|| p.clone());
                        }
                    }
                    ("required", Some(Value::Array(mine))) => {
                        for r in v.as_array().into_iter().flatten() {
                            if !mine.contains(r) {
                                mine.push(r.clone());
                            }
                        }
                    }
                    (_, Some(_)) => {}
                    (_, None) => {
                        node.insert(k, v);
                    }
                }
            }
        }
    }
    for k in ["anyOf", "oneOf"] {
        let partial = node
            .get(k)
            .and_then(Value::as_array)
            .is_some_and(|bs| bs.iter().any(|b| b.as_object().is_some_and(is_partial)));
        if partial {
            let Some(Value::Array(branches)) = node.remove(k) else {
                continue;
            };
            let alts: Vec<String> = branches
                .iter()
                .filter_map(|b| b.get("required").and_then(Value::as_array))
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" + ")
                })
                .filter(|s| !s.is_empty())
                .collect();
            if !alts.is_empty() {
                let which = if k == "oneOf" {
                    "exactly one"
                } else {
                    "at least one"
                };
                notes.push(format!("Give {which} of: {}.", alts.join("; ")));
            }
        }
    }
    note(node, &notes);
}

fn note(node: &mut Map<String, Value>, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let d = append_note(
        node.get("description").and_then(Value::as_str),
        &notes.join(" "),
    );
    node.insert("description".into(), Value::String(d));
}

/// Second pass: every remaining lint finding rewritten, children first.
fn fix_node(node: &mut Map<String, Value>, is_root: bool, opts: &LocalOptions) {
    let mut notes: Vec<String> = Vec::new();
    if let Some(Value::String(p)) = node.remove("pattern") {
        notes.push(format!("Must match the regular expression /{p}/."));
    }
    if let Some(pp) = node.remove("patternProperties") {
        let keys: Vec<&str> = pp
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        notes.push(format!("Keys may match /{}/.", keys.join("/ or /")));
        node.insert("additionalProperties".into(), Value::Bool(true));
    }
    for (k, unit) in BOUNDS {
        if let Some(n) = node
            .get(*k)
            .and_then(Value::as_u64)
            .filter(|n| *n > opts.max_bound)
        {
            node.remove(*k);
            let most = if k.starts_with("max") {
                "most"
            } else {
                "least"
            };
            notes.push(format!("At {most} {n} {unit}."));
        }
    }
    for k in ["anyOf", "oneOf"] {
        if node
            .get(k)
            .and_then(Value::as_array)
            .is_some_and(|b| b.len() > opts.max_union)
        {
            let Some(Value::Array(branches)) = node.remove(k) else {
                continue;
            };
            notes.push(merge_union(node, branches, k));
        }
    }
    for k in rewritten_away() {
        if let Some(v) = node.remove(k) {
            let v = v.to_string();
            let v = if v.chars().count() > 120 {
                "(see the server's schema)".to_string()
            } else {
                v
            };
            notes.push(format!("Also: {k} {v}."));
        }
    }
    if node
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !opts.formats.iter().any(|x| x == f))
    {
        if let Some(Value::String(f)) = node.remove("format") {
            notes.push(format!("Format: {f}."));
        }
    }
    if let Some(p) = node.remove("propertyNames") {
        if p != json!({"type": "string"}) {
            notes.push(format!("Keys: {p}."));
        }
    }
    let is_object = match node.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    let has_props = node
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if is_object
        && !has_props
        && !node.contains_key("additionalProperties")
        && !shaped_by_combinator(node)
    {
        if is_root {
            // A tool that declares no parameters: show it as taking none, so the grammar is `{}`.
            node.insert("properties".into(), json!({}));
        } else {
            node.insert("additionalProperties".into(), Value::Bool(true));
            if !node.contains_key("description") {
                notes.push("Any JSON object.".into());
            }
        }
    } else if is_partial(node) {
        let any = any_value();
        for (k, v) in any.as_object().into_iter().flatten() {
            node.insert(k.clone(), v.clone());
        }
    }
    note(node, &notes);
}

/// Replaces a large union by one schema that accepts every branch: one enum when every
/// branch is a constant, one object with the properties the branches agree on when every
/// branch is an object, else a list of the branches' types. Returns the note to add.
fn merge_union(node: &mut Map<String, Value>, branches: Vec<Value>, kw: &str) -> String {
    let n = branches.len();
    let consts: Option<Vec<Value>> = branches
        .iter()
        .map(|b| {
            let b = b.as_object()?;
            let shaping = b
                .keys()
                .filter(|k| !matches!(k.as_str(), "description" | "title" | "type"))
                .count();
            match (b.get("const"), b.get("enum").and_then(Value::as_array)) {
                (Some(c), None) if shaping == 1 => Some(vec![c.clone()]),
                (None, Some(e)) if shaping == 1 => Some(e.clone()),
                _ => None,
            }
        })
        .collect::<Option<Vec<_>>>()
        .map(|v| v.into_iter().flatten().collect());
    if let Some(values) = consts {
        node.insert("enum".into(), Value::Array(values));
        return format!("One of {n} values.");
    }
    let objects: Option<Vec<&Map<String, Value>>> = branches
        .iter()
        .map(|b| {
            b.as_object()
                .filter(|o| o.get("type") == Some(&json!("object")))
        })
        .collect();
    if let Some(objects) = objects {
        let mut props: Map<String, Value> = Map::new();
        let mut conflicted = std::collections::HashSet::new();
        for o in &objects {
            for (name, p) in o
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                match props.get(name) {
                    Some(seen) if seen != p => {
                        conflicted.insert(name.clone());
                    }
                    _ => {
                        props.insert(name.clone(), p.clone());
                    }
                }
            }
        }
        props.retain(|k, _| !conflicted.contains(k));
        node.insert("type".into(), json!("object"));
        node.insert("properties".into(), Value::Object(props));
        node.insert("additionalProperties".into(), Value::Bool(true));
        return format!("One of {n} object shapes ({kw}); give the fields of one.");
    }
    let mut types: Vec<Value> = Vec::new();
    for b in &branches {
        match b.get("type") {
            Some(Value::String(t)) if !types.contains(&json!(t)) => types.push(json!(t)),
            Some(Value::String(_)) => {}
            _ => {
                types = any_value()["type"].as_array().cloned().unwrap_or_default();
                break;
            }
        }
    }
    if types.contains(&json!("object")) {
        node.insert("additionalProperties".into(), Value::Bool(true));
    }
    node.insert("type".into(), Value::Array(types));
    format!("One of {n} alternatives ({kw}).")
}
