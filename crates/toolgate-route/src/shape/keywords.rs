//! The JSON Schema keywords grammar converters mishandle, listed once: the lint reports
//! them (`lint.rs`) and the local-model-safe rewrite moves them into the description
//! (`local.rs`), so `lint --profile local` and the rewrite cannot disagree on a keyword.

use serde_json::{Map, Value};

/// Keywords that constrain through other keywords' results; converters ignore them, so
/// a grammar lets through what the schema forbids.
pub(super) const CONDITIONAL: &[&str] = &[
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
];
/// Keywords converters ignore: a grammar lets through values they forbid.
pub(super) const IGNORED: &[&str] = &[
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "minProperties",
    "maxProperties",
];
/// Keywords that give a schema a shape; a schema with none of them accepts any value.
pub(super) const SHAPING: &[&str] = &[
    "type",
    "enum",
    "const",
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
    "properties",
    "items",
    "prefixItems",
    "additionalProperties",
    "patternProperties",
];
/// Length and size bounds, with what they count; grammars spell a large one out rule by rule.
pub(super) const BOUNDS: &[(&str, &str)] = &[
    ("maxLength", "characters"),
    ("minLength", "characters"),
    ("maxItems", "items"),
    ("minItems", "items"),
];

/// `not`: a grammar cannot exclude a sub-language.
pub(super) const NOT: &str = "not";

/// What the local rewrite takes out of a schema and says in its description instead:
/// `not`, the conditional keywords and the ignored ones, in that order.
pub(super) fn rewritten_away() -> impl Iterator<Item = &'static str> {
    std::iter::once(NOT).chain(CONDITIONAL.iter().chain(IGNORED).copied())
}

/// A union branch or `allOf` part that only adds `required` (or similar) to its parent:
/// JSON Schema allows it, but converters treat each branch as a whole value schema.
pub(super) fn is_partial(node: &Map<String, Value>) -> bool {
    !SHAPING.iter().any(|k| node.contains_key(*k))
}

/// An object whose shape comes from a union, `allOf`, a `$ref` or a constant is not empty.
pub(super) fn shaped_by_combinator(node: &Map<String, Value>) -> bool {
    ["oneOf", "anyOf", "allOf", "$ref", "enum", "const"]
        .iter()
        .any(|k| node.contains_key(*k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{lint_schema, rewrite_schema, LocalOptions};
    use serde_json::json;

    #[test]
    fn every_keyword_the_lint_reports_the_rewrite_takes_out() {
        let opts = LocalOptions::default();
        for k in rewritten_away() {
            let mut a = json!({"type": "string"});
            a[k] = json!({});
            let schema = json!({"type": "object", "properties": {"a": a}});
            let found = lint_schema(&schema, &opts);
            let at = format!("/properties/a/{k}");
            assert!(found.iter().any(|f| f.pointer == at), "{k}: {found:?}");
            let local = rewrite_schema(&schema, &opts);
            let a = &local["properties"]["a"];
            assert!(a.get(k).is_none(), "{k} kept: {a}");
            let said = a["description"].as_str().unwrap_or_default();
            assert!(said.contains(&format!("Also: {k} ")), "{k}: {said:?}");
            assert!(lint_schema(&local, &opts).iter().all(|f| f.pointer != at));
        }
    }

    #[test]
    fn a_large_bound_is_reported_and_said_in_words() {
        let opts = LocalOptions::default();
        for (k, unit) in BOUNDS {
            let mut a = json!({"type": "array"});
            a[*k] = json!(opts.max_bound + 1);
            let schema = json!({"type": "object", "properties": {"a": a}});
            assert!(lint_schema(&schema, &opts)
                .iter()
                .any(|f| f.pointer == format!("/properties/a/{k}")));
            let local = rewrite_schema(&schema, &opts);
            let said = local["properties"]["a"]["description"].as_str().unwrap();
            assert!(
                said.contains(&format!("{} {unit}.", opts.max_bound + 1)),
                "{said}"
            );
        }
    }
}
