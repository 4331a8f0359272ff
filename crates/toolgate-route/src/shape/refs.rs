//! Local `$ref`s: resolving, finding cycles, and inlining them with recursion cut.

use super::slim::def_target;
use super::walk;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

/// What a `$ref` points at, inside one root schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RefKind {
    /// A local definition that does not lead back to itself.
    Plain,
    /// A local definition on a cycle (a recursive type).
    Recursive,
    /// Not a local pointer, or its target is missing.
    Unresolvable,
}

/// The subschema a local pointer (`#`, `#/$defs/a`, `#/properties/x`) names in `root`.
pub(super) fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let ptr = r.strip_prefix('#')?;
    if ptr.is_empty() {
        return Some(root);
    }
    root.pointer(ptr)
}

/// Classifies every `$ref` target in `root`: definition names on a cycle are recursive.
pub(super) fn classify(root: &Value) -> HashMap<String, RefKind> {
    // Edges: from each definition (or the root, as "#") to the refs inside it.
    let mut edges: HashMap<String, Vec<String>> = HashMap::new();
    walk::for_each(root, "", &mut |node, ptr| {
        if let Some(r) = node.get("$ref").and_then(Value::as_str) {
            edges.entry(owner(ptr)).or_default().push(r.to_string());
        }
    });
    let mut out = HashMap::new();
    for targets in edges.values() {
        for r in targets {
            let kind = if resolve(root, r).is_none() {
                RefKind::Unresolvable
            } else if reaches(&edges, &key_of(r), &key_of(r), &mut HashSet::new()) {
                RefKind::Recursive
            } else {
                RefKind::Plain
            };
            out.insert(r.clone(), kind);
        }
    }
    out
}

/// The definition a pointer sits in: `/$defs/a/properties/b` -> `#/$defs/a`, else `#`.
fn owner(ptr: &str) -> String {
    let mut parts = ptr.splitn(4, '/').skip(1);
    match (parts.next(), parts.next()) {
        (Some(b @ ("$defs" | "definitions")), Some(name)) => format!("#/{b}/{name}"),
        _ => "#".into(),
    }
}

/// The node a ref counts as for cycles: its definition, or the whole root.
fn key_of(r: &str) -> String {
    match def_target(r) {
        Some((block, name)) => format!("#/{block}/{}", name.replace('~', "~0").replace('/', "~1")),
        None => "#".into(),
    }
}

fn reaches(
    edges: &HashMap<String, Vec<String>>,
    from: &str,
    goal: &str,
    seen: &mut HashSet<String>,
) -> bool {
    if !seen.insert(from.to_string()) {
        return false;
    }
    edges.get(from).into_iter().flatten().any(|r| {
        let k = key_of(r);
        k == goal || reaches(edges, &k, goal, seen)
    })
}

/// `schema` with every `$ref` replaced by a copy of its target (sibling keywords beside
/// the `$ref` win over the target's), `$defs`/`definitions` removed. A definition
/// already being expanded `depth` times is cut: it becomes a free-form value of the same
/// type, described as such; an unresolvable ref becomes free-form too. Both widen what
/// the model may send; execute still validates against the original.
pub(super) fn inline(schema: &Value, depth: usize) -> Value {
    let mut stack = Vec::new();
    let mut out = expand(schema, schema, depth, &mut stack);
    if let Some(m) = out.as_object_mut() {
        m.remove("$defs");
        m.remove("definitions");
    }
    out
}

fn expand(root: &Value, node: &Value, depth: usize, stack: &mut Vec<String>) -> Value {
    let Value::Object(map) = node else {
        return node.clone();
    };
    if let Some(r) = map.get("$ref").and_then(Value::as_str) {
        let mut siblings = map.clone();
        siblings.remove("$ref");
        let target = resolve(root, r);
        let times = stack.iter().filter(|s| *s == r).count();
        let mut base = match target {
            Some(t) if times < depth => {
                stack.push(r.to_string());
                let v = expand(root, t, depth, stack);
                stack.pop();
                v
            }
            Some(t) => free_form(
                t,
                &format!("Same shape as {} (nesting cut here).", ref_name(r)),
            ),
            None => free_form(
                &json!({}),
                &format!("Shape given by {r}, which could not be resolved."),
            ),
        };
        if let Value::Object(b) = &mut base {
            for (k, v) in siblings {
                b.insert(k, expand_child(root, &v, depth, stack));
            }
            b.remove("$defs");
            b.remove("definitions");
        }
        return base;
    }
    let mut out = Map::new();
    for (k, v) in map {
        let child = if walk::SINGLE.contains(&k.as_str()) || walk::LIST.contains(&k.as_str()) {
            expand_child(root, v, depth, stack)
        } else if walk::MAP.contains(&k.as_str()) {
            match v {
                Value::Object(m) => Value::Object(
                    m.iter()
                        .map(|(n, s)| (n.clone(), expand(root, s, depth, stack)))
                        .collect(),
                ),
                other => other.clone(),
            }
        } else {
            v.clone()
        };
        out.insert(k.clone(), child);
    }
    Value::Object(out)
}

fn expand_child(root: &Value, v: &Value, depth: usize, stack: &mut Vec<String>) -> Value {
    match v {
        Value::Array(list) => {
            Value::Array(list.iter().map(|x| expand(root, x, depth, stack)).collect())
        }
        other => expand(root, other, depth, stack),
    }
}

fn ref_name(r: &str) -> &str {
    r.rsplit('/').next().unwrap_or(r)
}

/// A value of `like`'s type with no inner constraints, carrying `note` (after `like`'s
/// own description).
fn free_form(like: &Value, note: &str) -> Value {
    let description =
        super::text::append_note(like.get("description").and_then(Value::as_str), note);
    match like.get("type").and_then(Value::as_str) {
        Some("object") => {
            json!({"type": "object", "additionalProperties": true, "description": description})
        }
        Some("array") => json!({"type": "array", "items": any_value(), "description": description}),
        Some(t @ ("string" | "number" | "integer" | "boolean" | "null")) => {
            json!({"type": t, "description": description})
        }
        _ => {
            let mut v = any_value();
            v["description"] = Value::String(description);
            v
        }
    }
}

/// A schema for any JSON value that grammar converters understand: every type listed,
/// objects free-form.
pub(super) fn any_value() -> Value {
    json!({"type": ["string", "number", "boolean", "object", "array", "null"], "additionalProperties": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_and_inlines_with_cycles_cut() {
        let s = json!({"type": "object", "properties": {
                "node": {"$ref": "#/$defs/node", "description": "The root"},
                "leaf": {"$ref": "#/$defs/leaf"}, "bad": {"$ref": "http://x/y"}},
            "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array",
                "items": {"$ref": "#/$defs/node"}}, "leaf": {"$ref": "#/$defs/leaf"}}},
                "leaf": {"type": "string"}}});
        let kinds = classify(&s);
        assert_eq!(kinds["#/$defs/node"], RefKind::Recursive);
        assert_eq!(kinds["#/$defs/leaf"], RefKind::Plain);
        assert_eq!(kinds["http://x/y"], RefKind::Unresolvable);
        let out = inline(&s, 1);
        assert!(!out.to_string().contains("$ref"), "{out}");
        assert!(out.get("$defs").is_none());
        let node = &out["properties"]["node"];
        assert_eq!(node["description"], "The root");
        assert_eq!(node["properties"]["leaf"], json!({"type": "string"}));
        let cut = &node["properties"]["kids"]["items"];
        assert_eq!(cut["type"], "object");
        assert_eq!(cut["additionalProperties"], true);
        assert_eq!(out["properties"]["bad"]["type"], any_value()["type"]);
        // Depth 2 expands the recursive type once more before cutting.
        let deeper = inline(&s, 2);
        let kids = &deeper["properties"]["node"]["properties"]["kids"]["items"];
        assert!(kids["properties"]["kids"]["items"]["additionalProperties"] == true);
    }
}
