//! Walking every subschema of a JSON Schema, by keyword, with its JSON pointer.
//!
//! Only schema positions are visited (`properties/*`, `items`, `anyOf/*`, ...), never
//! data such as `enum`, `const` or `default`, so a property named `pattern` or an enum
//! value `{}` is not mistaken for a keyword.

use serde_json::{Map, Value};

/// Keywords whose value is one subschema.
pub(super) const SINGLE: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "propertyNames",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// Keywords whose value is an array of subschemas.
pub(super) const LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords whose value maps names to subschemas.
pub(super) const MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Escapes one JSON pointer token (RFC 6901).
pub(super) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Calls `f` on every schema object in `schema` (pre-order), with its pointer from
/// `base`. Boolean schemas are skipped: they have no keywords to look at.
pub(super) fn for_each(schema: &Value, base: &str, f: &mut dyn FnMut(&Map<String, Value>, &str)) {
    let Value::Object(map) = schema else { return };
    f(map, base);
    for (key, value) in map {
        let here = format!("{base}/{}", escape(key));
        if SINGLE.contains(&key.as_str()) {
            // `items` may be an array (draft-07 tuples).
            match value {
                Value::Array(list) => {
                    for (i, v) in list.iter().enumerate() {
                        for_each(v, &format!("{here}/{i}"), f);
                    }
                }
                v => for_each(v, &here, f),
            }
        } else if LIST.contains(&key.as_str()) {
            if let Value::Array(list) = value {
                for (i, v) in list.iter().enumerate() {
                    for_each(v, &format!("{here}/{i}"), f);
                }
            }
        } else if MAP.contains(&key.as_str()) {
            if let Value::Object(m) = value {
                for (name, v) in m {
                    for_each(v, &format!("{here}/{}", escape(name)), f);
                }
            }
        }
    }
}

/// Like `for_each_mut`, with each schema's JSON pointer from `base`.
pub(super) fn for_each_mut_at(
    schema: &mut Value,
    base: &str,
    f: &mut dyn FnMut(&mut Map<String, Value>, &str),
) {
    let Value::Object(map) = schema else { return };
    for (key, value) in map.iter_mut() {
        let here = format!("{base}/{}", escape(key));
        if SINGLE.contains(&key.as_str()) || LIST.contains(&key.as_str()) {
            match value {
                Value::Array(list) => {
                    for (i, v) in list.iter_mut().enumerate() {
                        for_each_mut_at(v, &format!("{here}/{i}"), f);
                    }
                }
                v => for_each_mut_at(v, &here, f),
            }
        } else if MAP.contains(&key.as_str()) {
            if let Value::Object(m) = value {
                for (name, v) in m.iter_mut() {
                    for_each_mut_at(v, &format!("{here}/{}", escape(name)), f);
                }
            }
        }
    }
    f(map, base);
}

/// Calls `f` on every schema object in `schema`, children before parents, so `f` sees
/// subschemas already rewritten.
pub(super) fn for_each_mut(schema: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    for_each_mut_at(schema, "", &mut |m, _| f(m));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn visits_schema_positions_only() {
        let s = json!({"type": "object", "properties": {"a/b": {"type": "string",
            "enum": [{"pattern": "x"}]}, "l": {"items": [{"type": "integer"}]}},
            "anyOf": [{"required": ["a/b"]}], "default": {"properties": {}}});
        let mut seen = vec![];
        for_each(&s, "", &mut |_, p| seen.push(p.to_string()));
        assert_eq!(
            seen,
            vec![
                "",
                "/properties/a~1b",
                "/properties/l",
                "/properties/l/items/0",
                "/anyOf/0"
            ]
        );
        let mut s2 = s.clone();
        let mut n = 0;
        for_each_mut(&mut s2, &mut |m| {
            n += 1;
            m.insert("seen".into(), json!(n));
        });
        assert_eq!(s2["seen"], 5, "the root comes last");
        assert!(s2["default"].get("seen").is_none());
    }
}
