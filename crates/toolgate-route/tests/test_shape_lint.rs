//! Each lint rule on a schema that trips it and one that does not, and the local
//! rewrite of every tripping schema linting clean while still accepting a valid value.

use serde_json::{json, Value};
use toolgate_route::shape::{lint_schema, rewrite_schema, LocalOptions, Rule};

fn rules(schema: &Value) -> Vec<Rule> {
    lint_schema(schema, &LocalOptions::default())
        .into_iter()
        .map(|f| f.rule)
        .collect()
}

fn obj(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

/// (rule, failing schema, passing schema, a value the failing schema accepts)
fn cases() -> Vec<(Rule, Value, Value, Value)> {
    vec![
        (
            Rule::Pattern,
            obj(json!({"id": {"type": "string", "pattern": "^(?=\\d)\\d+$"}})),
            obj(json!({"id": {"type": "string"}})),
            json!({"id": "12"}),
        ),
        (
            Rule::PatternProperties,
            json!({"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": false}),
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"x-a": "b"}),
        ),
        (
            Rule::LargeBound,
            obj(json!({"l": {"type": "array", "items": {"type": "string"}, "maxItems": 2000}})),
            obj(json!({"l": {"type": "array", "items": {"type": "string"}, "maxItems": 10}})),
            json!({"l": ["a"]}),
        ),
        (
            Rule::EmptyObject,
            obj(json!({"values": {"type": "object"}})),
            obj(json!({"values": {"type": "object", "additionalProperties": true}})),
            json!({"values": {"a": 1}}),
        ),
        (
            Rule::Untyped,
            obj(json!({"v": {"description": "anything"}})),
            obj(json!({"v": {"type": "string"}})),
            json!({"v": [1, 2]}),
        ),
        (
            Rule::Ref,
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}),
            obj(json!({"a": {"type": "string"}})),
            json!({"a": "x"}),
        ),
        (
            Rule::RecursiveRef,
            json!({"type": "object", "properties": {"t": {"$ref": "#/$defs/t"}},
                "$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}}}),
            json!({"type": "object", "properties": {"t": {"$ref": "#/$defs/t"}}, "$defs": {"t": {"type": "object", "properties": {"n": {"type": "string"}}}}}),
            json!({"t": {"kids": [{"kids": [{"kids": []}]}]}}),
        ),
        (
            Rule::UnresolvableRef,
            obj(json!({"a": {"$ref": "#/$defs/missing"}})),
            obj(json!({"a": {"type": "string"}})),
            json!({}),
        ),
        (
            Rule::LargeUnion,
            obj(
                json!({"u": {"oneOf": (0..12).map(|i| json!({"const": format!("v{i}")})).collect::<Vec<_>>()}}),
            ),
            obj(json!({"u": {"anyOf": [{"type": "string"}, {"type": "null"}]}})),
            json!({"u": "v7"}),
        ),
        (
            Rule::AllOf,
            json!({"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}]}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            json!({"a": "x"}),
        ),
        (
            Rule::Not,
            obj(json!({"a": {"type": "string", "not": {"const": "root"}}})),
            obj(json!({"a": {"type": "string"}})),
            json!({"a": "x"}),
        ),
        (
            Rule::Conditional,
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "dependentRequired": {"a": ["b"]}}),
            obj(json!({"a": {"type": "string"}, "b": {"type": "string"}})),
            json!({"a": "x", "b": "y"}),
        ),
        (
            Rule::Format,
            obj(json!({"u": {"type": "string", "format": "uri"}})),
            obj(json!({"u": {"type": "string", "format": "uuid"}})),
            json!({"u": "https://a.b"}),
        ),
        (
            Rule::PropertyNames,
            json!({"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": true}),
            json!({"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": true}),
            json!({"abc": 1}),
        ),
        (
            Rule::IgnoredKeyword,
            obj(
                json!({"l": {"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}}),
            ),
            obj(json!({"l": {"type": "array", "items": {"type": "integer"}}})),
            json!({"l": [1]}),
        ),
    ]
}

#[test]
fn every_rule_has_a_failing_and_a_passing_case() {
    let cases = cases();
    assert_eq!(cases.len(), Rule::ALL.len(), "one case per rule");
    for (rule, bad, good, _) in &cases {
        assert!(
            rules(bad).contains(rule),
            "{} not found in {bad}: {:?}",
            rule.id(),
            rules(bad)
        );
        assert!(!rules(good).contains(rule), "{} found in {good}", rule.id());
    }
}

#[test]
fn local_rewrite_clears_every_rule_and_still_accepts() {
    for (rule, bad, _, value) in cases() {
        let original = jsonschema::validator_for(&bad).ok();
        if let Some(v) = &original {
            assert!(
                v.is_valid(&value),
                "{}: the case's value must fit the original",
                rule.id()
            );
        }
        let safe = rewrite_schema(&bad, &LocalOptions::default());
        assert!(
            rules(&safe).is_empty(),
            "{}: {safe} still has {:?}",
            rule.id(),
            rules(&safe)
        );
        let v = jsonschema::validator_for(&safe).expect("the rewrite is a valid schema");
        assert!(
            v.is_valid(&value),
            "{}: rewrite {safe} refuses {value}",
            rule.id()
        );
    }
}

#[test]
fn rewrite_moves_constraints_into_descriptions() {
    let s = obj(
        json!({"id": {"type": "string", "pattern": "^a+$", "maxLength": 500, "description": "The id"}}),
    );
    let out = rewrite_schema(&s, &LocalOptions::default());
    let d = out["properties"]["id"]["description"].as_str().unwrap();
    assert_eq!(
        d,
        "The id. Must match the regular expression /^a+$/. At most 500 characters."
    );
    // A root object with no properties is shown as taking none.
    assert_eq!(
        rewrite_schema(&json!({"type": "object"}), &LocalOptions::default()),
        json!({"type": "object", "properties": {}})
    );
}
