//! Keeping only the requested parts of a JSON result, named by pointer or dotted path.
//!
//! A field is a JSON pointer (`/items/0/title`, RFC 6901 escapes) or a dotted path
//! (`items.0.title`); in both, a `*` segment stands for every key or element, so
//! `items.*.title` keeps the title of every item. The selection keeps the structure
//! around what it selects (`{"items": [{"title": ...}, ...]}`), so fields that share a
//! parent stay together and the model reads the same shape the tool documents. Array
//! elements keep their order; elements with nothing selected are left out.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One requested field, split into segments.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FieldPath {
    /// As the caller wrote it, for messages.
    pub text: String,
    segments: Vec<String>,
}

impl FieldPath {
    /// Parses a pointer (leading `/`) or a dotted path. `""` and `"/"`-free empty input mean the whole value.
    pub(super) fn parse(text: &str) -> Self {
        let segments = if let Some(rest) = text.strip_prefix('/') {
            rest.split('/')
                .map(|s| s.replace("~1", "/").replace("~0", "~"))
                .collect()
        } else if text.is_empty() {
            Vec::new()
        } else {
            text.split('.').map(str::to_string).collect()
        };
        Self {
            text: text.to_string(),
            segments,
        }
    }

    /// True if this path selects anything in `value`.
    pub(super) fn matches(&self, value: &Value) -> bool {
        fn walk(v: &Value, segs: &[String]) -> bool {
            let Some((first, rest)) = segs.split_first() else {
                return true;
            };
            match v {
                Value::Object(o) if first == "*" => o.values().any(|x| walk(x, rest)),
                Value::Object(o) => o.get(first).is_some_and(|x| walk(x, rest)),
                Value::Array(a) if first == "*" => a.iter().any(|x| walk(x, rest)),
                Value::Array(a) => first
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get(i))
                    .is_some_and(|x| walk(x, rest)),
                _ => false,
            }
        }
        walk(value, &self.segments)
    }
}

/// The requested fields merged into a tree, so one walk of the value serves them all.
#[derive(Debug, Default)]
struct Node {
    /// Some field ends here: keep the whole value.
    whole: bool,
    children: BTreeMap<String, Node>,
    /// A `*` segment: applies to every key or element.
    any: Option<Box<Node>>,
}

impl Node {
    fn insert(&mut self, segs: &[String]) {
        match segs.split_first() {
            None => self.whole = true,
            Some((first, rest)) if first == "*" => {
                self.any.get_or_insert_with(Default::default).insert(rest)
            }
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// The nodes that apply to key (or index) `key`: its own and the wildcard's.
    fn for_key<'a>(nodes: &[&'a Node], key: &str) -> Vec<&'a Node> {
        let mut out = Vec::new();
        for n in nodes {
            out.extend(n.children.get(key));
            out.extend(n.any.as_deref());
        }
        out
    }
}

/// `value` with only the parts `fields` select; `None` if they select nothing.
pub(super) fn select(value: &Value, fields: &[FieldPath]) -> Option<Value> {
    let mut root = Node::default();
    for f in fields {
        root.insert(&f.segments);
    }
    project(value, &[&root])
}

fn project(value: &Value, nodes: &[&Node]) -> Option<Value> {
    if nodes.is_empty() {
        return None;
    }
    if nodes.iter().any(|n| n.whole) {
        return Some(value.clone());
    }
    match value {
        Value::Object(o) => {
            let kept: Map<String, Value> = o
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), project(v, &Node::for_key(nodes, k))?)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Value::Array(a) => {
            let kept: Vec<Value> = a
                .iter()
                .enumerate()
                .filter_map(|(i, v)| project(v, &Node::for_key(nodes, &i.to_string())))
                .collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        _ => None,
    }
}

/// A hint for a field that matched nothing: the keys the value does have at its top.
pub(super) fn top_keys(value: &Value) -> String {
    match value {
        Value::Object(o) => {
            let keys: Vec<&str> = o.keys().map(String::as_str).take(20).collect();
            format!("top-level keys: {}", keys.join(", "))
        }
        Value::Array(a) => format!("the result is an array of {} items", a.len()),
        _ => "the result is a single value".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pick(value: &Value, fields: &[&str]) -> Option<Value> {
        let f: Vec<FieldPath> = fields.iter().map(|f| FieldPath::parse(f)).collect();
        select(value, &f)
    }

    fn issues() -> Value {
        json!({"total": 2, "items": [
            {"title": "a", "body": "long", "user": {"login": "x", "id": 1}},
            {"title": "b", "body": "long", "user": {"login": "y", "id": 2}}
        ], "a/b": {"c~d": 1}})
    }

    #[test]
    fn pointer_and_dotted_path_select_the_same() {
        let v = issues();
        let want = json!({"items": [{"title": "a"}]});
        assert_eq!(pick(&v, &["/items/0/title"]), Some(want.clone()));
        assert_eq!(pick(&v, &["items.0.title"]), Some(want));
        assert_eq!(pick(&v, &["/a~1b/c~0d"]), Some(json!({"a/b": {"c~d": 1}})));
    }

    #[test]
    fn wildcards_keep_every_element_and_fields_merge() {
        let v = issues();
        assert_eq!(
            pick(&v, &["items.*.title", "items.*.user.login", "total"]),
            Some(json!({"total": 2, "items": [
                {"title": "a", "user": {"login": "x"}},
                {"title": "b", "user": {"login": "y"}}
            ]}))
        );
        assert_eq!(
            pick(&v, &["/items/*/user", "items.1.user.id"]),
            Some(
                json!({"items": [{"user": {"login": "x", "id": 1}}, {"user": {"login": "y", "id": 2}}]})
            )
        );
    }

    #[test]
    fn misses_are_detected() {
        let v = issues();
        assert!(FieldPath::parse("items.*.title").matches(&v));
        assert!(!FieldPath::parse("items.5.title").matches(&v));
        assert!(!FieldPath::parse("/nope").matches(&v));
        assert!(!FieldPath::parse("total.x").matches(&v));
        assert_eq!(pick(&v, &["nope"]), None);
        assert_eq!(top_keys(&v), "top-level keys: total, items, a/b");
    }
}
