//! Lint: what in a tool's input schema breaks or slows JSON-Schema-to-grammar converters
//! (llama.cpp's `json_schema_to_grammar`, and others built the same way) used to
//! constrain local models.
//!
//! Each rule has a stable id (scripts filter on it), and `local` rewrites every finding
//! away, which the realcat test checks.

use super::keywords::{is_partial, shaped_by_combinator, BOUNDS, CONDITIONAL, IGNORED, NOT};
use super::local::LocalOptions;
use super::refs::{classify, RefKind};
use super::walk;
use serde::Serialize;
use serde_json::{Map, Value};

/// A lint rule. The id is what `toolgate lint` prints and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A `pattern` regex, which grammars follow only in part.
    Pattern,
    /// `patternProperties`, ignored or turned into a key grammar.
    PatternProperties,
    /// A length or item bound above `max_bound`, spelled out rule by rule.
    LargeBound,
    /// An object with no properties and no `additionalProperties`.
    EmptyObject,
    /// A subschema with no type.
    Untyped,
    /// A `$ref` to a local definition.
    Ref,
    /// A recursive `$ref`.
    RecursiveRef,
    /// A `$ref` that is no local definition.
    UnresolvableRef,
    /// A `oneOf`/`anyOf` with more branches than `max_union`.
    LargeUnion,
    /// `allOf`, of which converters keep only object properties.
    AllOf,
    /// `not`, which a grammar cannot express.
    Not,
    /// `if`/`then`/`else` or dependent constraints, ignored by converters.
    Conditional,
    /// A `format` with no grammar rule.
    Format,
    /// `propertyNames` beyond plain strings, ignored by converters.
    PropertyNames,
    /// Another keyword converters ignore.
    IgnoredKeyword,
}

impl Rule {
    /// Every rule, in the order reports list them.
    pub const ALL: [Rule; 15] = [
        Rule::Pattern,
        Rule::PatternProperties,
        Rule::LargeBound,
        Rule::EmptyObject,
        Rule::Untyped,
        Rule::Ref,
        Rule::RecursiveRef,
        Rule::UnresolvableRef,
        Rule::LargeUnion,
        Rule::AllOf,
        Rule::Not,
        Rule::Conditional,
        Rule::Format,
        Rule::PropertyNames,
        Rule::IgnoredKeyword,
    ];

    /// The rule's id, as `toolgate lint` prints it.
    pub fn id(self) -> &'static str {
        match self {
            Rule::Pattern => "pattern",
            Rule::PatternProperties => "pattern-properties",
            Rule::LargeBound => "large-bound",
            Rule::EmptyObject => "empty-object",
            Rule::Untyped => "untyped",
            Rule::Ref => "ref",
            Rule::RecursiveRef => "recursive-ref",
            Rule::UnresolvableRef => "unresolvable-ref",
            Rule::LargeUnion => "large-union",
            Rule::AllOf => "all-of",
            Rule::Not => "not",
            Rule::Conditional => "conditional",
            Rule::Format => "format",
            Rule::PropertyNames => "property-names",
            Rule::IgnoredKeyword => "ignored-keyword",
        }
    }
}

/// One finding inside one schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemaFinding {
    /// JSON pointer into the input schema.
    pub pointer: String,
    /// The rule it breaks.
    pub rule: Rule,
    /// Why it is a problem, for this schema.
    pub why: String,
}

/// Every finding in one input schema, in document order.
pub fn lint_schema(schema: &Value, opts: &LocalOptions) -> Vec<SchemaFinding> {
    let kinds = classify(schema);
    let mut out = Vec::new();
    walk::for_each(schema, "", &mut |node, ptr| {
        check_node(node, ptr, opts, &kinds, &mut out)
    });
    out
}

fn has_type(node: &Map<String, Value>, t: &str) -> bool {
    match node.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(a)) => a.iter().any(|x| x == t),
        _ => false,
    }
}

fn check_node(
    node: &Map<String, Value>,
    ptr: &str,
    opts: &LocalOptions,
    kinds: &std::collections::HashMap<String, RefKind>,
    out: &mut Vec<SchemaFinding>,
) {
    let mut add = |at: String, rule: Rule, why: String| {
        out.push(SchemaFinding {
            pointer: at,
            rule,
            why,
        })
    };
    let at = |k: &str| format!("{ptr}/{}", walk::escape(k));
    if let Some(p) = node.get("pattern").and_then(Value::as_str) {
        add(at("pattern"), Rule::Pattern, pattern_why(p));
    }
    if node.contains_key("patternProperties") {
        add(at("patternProperties"), Rule::PatternProperties,
            "converters ignore patternProperties or turn each regex into a key grammar; keys it allows may be refused".into());
    }
    for (k, unit) in BOUNDS {
        if let Some(n) = node
            .get(*k)
            .and_then(Value::as_u64)
            .filter(|n| *n > opts.max_bound)
        {
            add(at(k), Rule::LargeBound, format!(
                "{k} {n} {unit}: grammars spell a bound out as {n} nested optional rules, which is slow to build and to sample (limit {})",
                opts.max_bound));
        }
    }
    let shapeless = !node.contains_key("properties")
        && !node.contains_key("additionalProperties")
        && !node.contains_key("patternProperties");
    let empty_props = node
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty);
    if has_type(node, "object")
        && !shaped_by_combinator(node)
        && (shapeless
            || (empty_props && !node.contains_key("additionalProperties") && !ptr.is_empty()))
    {
        add(ptr.to_string(), Rule::EmptyObject,
            "an object with no properties and no additionalProperties: converters either fail, emit only {} or allow any JSON; say which".into());
    } else if is_partial(node) {
        let why = if is_branch(ptr) {
            "a union branch with no type (it only adds `required` or similar): converters read each branch as a whole value and fail"
        } else {
            "no type: llama.cpp's converter stops with \"Unrecognized schema\" unless the schema is exactly {}, and {} lets the model emit anything"
        };
        add(ptr.to_string(), Rule::Untyped, why.into());
    }
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let (rule, why) = match kinds.get(r).copied().unwrap_or(RefKind::Unresolvable) {
            RefKind::Plain => (
                Rule::Ref,
                format!("$ref {r}: many converters do not resolve references; inline it"),
            ),
            RefKind::Recursive => (
                Rule::RecursiveRef,
                format!(
                    "$ref {r} is recursive: converters that inline references loop or fail, and the model may nest without end"
                ),
            ),
            RefKind::Unresolvable => (
                Rule::UnresolvableRef,
                format!(
                    "$ref {r} is not a local definition that exists; converters fail or fetch it"
                ),
            ),
        };
        add(at("$ref"), rule, why);
    }
    for k in ["oneOf", "anyOf"] {
        if let Some(n) = node
            .get(k)
            .and_then(Value::as_array)
            .map(Vec::len)
            .filter(|n| *n > opts.max_union)
        {
            add(at(k), Rule::LargeUnion, format!(
                "{k} with {n} branches (limit {}): each branch is a full sub-grammar, and the sampler tries them all at every step",
                opts.max_union));
        }
    }
    if node.contains_key("allOf") {
        add(
            at("allOf"),
            Rule::AllOf,
            "allOf: converters merge only object properties and drop everything else in it".into(),
        );
    }
    if node.contains_key(NOT) {
        add(
            at(NOT),
            Rule::Not,
            "not: a grammar cannot exclude a sub-language; converters ignore it".into(),
        );
    }
    for k in CONDITIONAL.iter().filter(|k| node.contains_key(**k)) {
        add(at(k), Rule::Conditional, format!("{k}: conditional constraints are ignored by converters, so the grammar allows what the schema forbids"));
    }
    if let Some(f) = node.get("format").and_then(Value::as_str) {
        if !opts.formats.iter().any(|x| x == f) {
            add(at("format"), Rule::Format, format!("format {f:?} has no grammar rule; it is silently ignored (say it in the description)"));
        }
    }
    if let Some(p) = node.get("propertyNames") {
        if p != &serde_json::json!({"type": "string"}) {
            add(
                at("propertyNames"),
                Rule::PropertyNames,
                "propertyNames is ignored by converters: keys it forbids are generated".into(),
            );
        }
    }
    for k in IGNORED.iter().filter(|k| node.contains_key(**k)) {
        add(
            at(k),
            Rule::IgnoredKeyword,
            format!("{k} is ignored by converters: the grammar allows values the schema refuses"),
        );
    }
}

/// True when `ptr` names a branch of a union or `allOf` (its last two tokens are a
/// combinator and an index).
fn is_branch(ptr: &str) -> bool {
    let mut it = ptr.rsplit('/');
    let (Some(idx), Some(kw)) = (it.next(), it.next()) else {
        return false;
    };
    idx.parse::<usize>().is_ok() && matches!(kw, "anyOf" | "oneOf" | "allOf")
}

fn pattern_why(p: &str) -> String {
    let mut bad = Vec::new();
    if p.contains("(?=") || p.contains("(?!") || p.contains("(?<") {
        bad.push("lookaround");
    }
    if (1..=9).any(|d| p.contains(&format!("\\{d}"))) {
        bad.push("a backreference");
    }
    if ["\\d", "\\w", "\\s", "\\b", "\\p"]
        .iter()
        .any(|e| p.contains(e))
    {
        bad.push("class escapes (\\d, \\w, \\s, \\p)");
    }
    if p.contains(")+") || p.contains(")*") || p.contains("){") {
        bad.push("a quantified group (nested repetition)");
    }
    let detail = if bad.is_empty() {
        String::new()
    } else {
        format!("; this one has {}", bad.join(", "))
    };
    format!("pattern /{p}/: converters translate only a regex subset and expand repetitions into rules{detail}")
}
