//! Checking a call's arguments against the tool's full input schema, before any upstream sees them.
//!
//! Validators are compiled once per (tool, schema) and cached; a changed upstream schema
//! has a different hash and is compiled again. External `$ref`s (http, https, file, ...)
//! are never fetched: the retriever refuses every URI, so a schema can reach only what is
//! inside itself (`#/$defs/...`). jsonschema's `resolve-http` and `resolve-file` features
//! stay off as well, so neither a client nor file access is even compiled in.
//!
//! A schema that does not compile (invalid, or needing an external `$ref`) does not block
//! the call: validation here exists to give the model a better error sooner, and the
//! upstream still checks its own arguments. Such a tool is validated as [`Checked::Skipped`]
//! with the reason, which the caller logs; the outcome is cached like any other.

use super::report::ValidationReport;
use crate::catalog::{ToolId, ToolRecord};
use jsonschema::{Draft, Retrieve, Uri, Validator};
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock};

/// Past this many cached validators the cache is emptied and refilled on demand; tools
/// that left the catalog must not pin memory forever, and a full recompile is cheap.
const MAX_CACHED: usize = 8192;

/// How a valid call was checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// The arguments match the input schema.
    Valid,
    /// The input schema does not compile, so the arguments went unchecked; the upstream
    /// will judge them. `reason` says why (for a log line, not for the model).
    Skipped {
        /// Why the schema did not compile.
        reason: String,
    },
}

/// A cache of compiled input-schema validators, shared by every session.
#[derive(Default)]
pub struct Validators {
    /// Tool -> its compiled validator and the hash of the schema it was compiled from.
    cache: RwLock<HashMap<ToolId, Arc<Compiled>>>,
}

struct Compiled {
    /// Hash of the input schema this was compiled from.
    hash: u64,
    /// The validator, or why the schema did not compile.
    validator: Result<Validator, SchemaError>,
}

impl Validators {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `args` against `tool`'s input schema. `Err` lists every problem found.
    pub fn validate(&self, tool: &ToolRecord, args: &Value) -> Result<Checked, ValidationReport> {
        let schema = tool.input_schema();
        if !args.is_object() {
            return Err(ValidationReport::not_an_object(args, schema));
        }
        let compiled = self.compiled(&tool.id, schema);
        match &compiled.validator {
            Err(reason) => Ok(Checked::Skipped {
                reason: reason.to_string(),
            }),
            Ok(v) => {
                let mut errors = v.iter_errors(args).peekable();
                if errors.peek().is_none() {
                    Ok(Checked::Valid)
                } else {
                    Err(ValidationReport::from_errors(errors, schema))
                }
            }
        }
    }

    /// How many validators are cached (for tests and `toolgate check`).
    pub fn len(&self) -> usize {
        self.cache.read().expect("validators").len()
    }

    /// True when no validator is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn compiled(&self, id: &ToolId, schema: &Value) -> Arc<Compiled> {
        let hash = schema_hash(schema);
        if let Some(c) = self.cache.read().expect("validators").get(id) {
            if c.hash == hash {
                return c.clone();
            }
        }
        // Compiled outside the lock: other tools' calls go on meanwhile. Two calls racing
        // on the same new schema both compile; the second insert wins, harmlessly.
        let compiled = Arc::new(Compiled {
            hash,
            validator: compile_schema(schema),
        });
        if let Err(reason) = &compiled.validator {
            tracing::warn!(tool = %id, %reason, "input schema does not compile; arguments go unchecked");
        }
        let mut cache = self.cache.write().expect("validators");
        if cache.len() >= MAX_CACHED && !cache.contains_key(id) {
            cache.clear();
        }
        cache.insert(id.clone(), compiled.clone());
        compiled
    }
}

/// Compiles `schema` with the draft its `$schema` names (2020-12 when it names none or
/// one jsonschema does not know: following an unknown meta-schema URI would mean a fetch).
pub fn compile_schema(schema: &Value) -> Result<Validator, SchemaError> {
    let draft = match Draft::default().detect(schema) {
        Draft::Unknown => Draft::Draft202012,
        known => known,
    };
    jsonschema::options()
        .with_draft(draft)
        .with_retriever(RefuseExternal)
        .build(schema)
        .map_err(SchemaError)
}

/// An input schema that does not compile (its own error, an external `$ref`, an unknown
/// keyword's value): the arguments go unchecked, and a skill with it is refused.
#[derive(Debug, thiserror::Error)]
#[error("the input schema does not compile: {0}")]
pub struct SchemaError(#[source] pub jsonschema::ValidationError<'static>);

/// Refuses every external resource, so validation never touches the network or disk.
struct RefuseExternal;

impl Retrieve for RefuseExternal {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "external $ref {uri} is not fetched: toolgate resolves only references inside the schema"
        )
        .into())
    }
}

/// A hash of the schema's content, computed by walking it (no serialisation, no allocation).
fn schema_hash(schema: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    hash_value(schema, &mut h);
    h.finish()
}

fn hash_value(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.as_i64(), n.as_u64(), n.as_f64().map(f64::to_bits)).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            a.iter().for_each(|x| hash_value(x, h));
        }
        Value::Object(o) => {
            (5u8, o.len()).hash(h);
            for (k, x) in o {
                k.hash(h);
                hash_value(x, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolRecord {
        ToolRecord {
            id: ToolId::new("github", name),
            exposed: format!("github_{name}"),
            tool: json!({"name": name, "inputSchema": schema})
                .as_object()
                .unwrap()
                .clone(),
        }
    }

    /// The problems as (pointer, keyword) pairs, sorted, for exact comparison.
    fn problems(schema: Value, args: Value) -> Vec<(String, String)> {
        let v = Validators::new();
        let report = v
            .validate(&tool("t", schema), &args)
            .expect_err("should fail");
        let mut out: Vec<_> = report
            .problems
            .iter()
            .map(|p| (p.pointer.clone(), p.keyword.clone()))
            .collect();
        out.sort();
        out
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn issue_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 10},
                "state": {"type": "string", "enum": ["open", "closed"]},
                "count": {"type": "integer", "minimum": 1, "maximum": 100},
                "branch": {"type": "string", "pattern": "^[a-z]+$"},
                "items": {"type": "array", "minItems": 1, "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
                    "required": ["name"],
                    "additionalProperties": false
                }}
            },
            "required": ["title"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_arguments_pass() {
        let v = Validators::new();
        let args = json!({"title": "hi", "state": "open", "items": [{"name": "a", "tags": ["x"]}]});
        assert_eq!(
            v.validate(&tool("t", issue_schema()), &args),
            Ok(Checked::Valid)
        );
    }

    #[test]
    fn every_keyword_family_has_an_exact_pointer() {
        let args = json!({
            "state": "merged",
            "count": 0,
            "branch": "Main",
            "bogus": 1,
            "items": [{"name": 5, "extra": true, "tags": ["ok", 7]}, {}]
        });
        assert_eq!(
            problems(issue_schema(), args),
            pairs(&[
                ("/bogus", "additionalProperties"),
                ("/branch", "pattern"),
                ("/count", "minimum"),
                ("/items/0/extra", "additionalProperties"),
                ("/items/0/name", "type"),
                ("/items/0/tags/1", "type"),
                ("/items/1/name", "required"),
                ("/state", "enum"),
                ("/title", "required"),
            ])
        );
        assert_eq!(
            problems(
                issue_schema(),
                json!({"title": "far too long a title", "count": 101, "items": []})
            ),
            pairs(&[
                ("/count", "maximum"),
                ("/items", "minItems"),
                ("/title", "maxLength")
            ])
        );
        assert_eq!(
            problems(issue_schema(), json!({"title": ""})),
            pairs(&[("/title", "minLength")])
        );
    }

    #[test]
    fn one_of_reports_at_the_value_and_names_the_branches() {
        let schema = json!({"type": "object", "properties": {"target": {"oneOf": [
            {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
        ]}}});
        let v = Validators::new();
        let r = v
            .validate(&tool("t", schema), &json!({"target": {"name": "x"}}))
            .unwrap_err();
        assert_eq!(r.problems.len(), 1);
        let p = &r.problems[0];
        assert_eq!(
            (p.pointer.as_str(), p.keyword.as_str()),
            ("/target", "oneOf")
        );
        assert_eq!(p.schema_path, "/properties/target/oneOf");
        assert!(
            p.message.contains("exactly one of the 2 alternatives"),
            "{}",
            p.message
        );
        assert!(
            p.message.contains("/target/path is required"),
            "{}",
            p.message
        );
    }

    #[test]
    fn local_refs_resolve_and_point_into_defs() {
        let schema = json!({
            "type": "object",
            "properties": {"owner": {"$ref": "#/$defs/user"}},
            "$defs": {"user": {"type": "object", "properties": {"login": {"type": "string"}}, "required": ["login"]}}
        });
        let v = Validators::new();
        let r = v
            .validate(&tool("t", schema), &json!({"owner": {"login": 3}}))
            .unwrap_err();
        let p = &r.problems[0];
        assert_eq!(p.pointer, "/owner/login");
        assert_eq!(p.schema_path, "/$defs/user/properties/login/type");
        assert_eq!(p.schema, json!({"type": "string"}));
    }

    #[test]
    fn report_text_and_structured_form() {
        let v = Validators::new();
        let r = v
            .validate(&tool("create_issue", issue_schema()), &json!({"state": 1}))
            .unwrap_err();
        let text = r.to_text("github/create_issue");
        assert!(text.starts_with("The arguments do not match github/create_issue's input schema:"));
        assert!(text.contains("- /title: is required"), "{text}");
        assert!(
            text.contains("- /state: expected string, got integer"),
            "{text}"
        );
        assert!(text.ends_with("Fix these and call again."));
        let s = r.structured();
        let first = &s["problems"][0];
        assert!(first["schemaPath"].is_string() && first["message"].is_string());
        assert_eq!(s["omitted"], 0);
    }

    #[test]
    fn schema_excerpts_are_clipped() {
        let big_enum: Vec<String> = (0..200).map(|i| format!("value-{i}")).collect();
        let schema = json!({"type": "object", "properties": {"v": {
            "type": "string", "enum": big_enum, "description": "d".repeat(1000)
        }}});
        let v = Validators::new();
        let r = v
            .validate(&tool("t", schema), &json!({"v": "nope"}))
            .unwrap_err();
        let p = &r.problems[0];
        assert!(p.schema.to_string().chars().count() < 400, "{}", p.schema);
        assert_eq!(p.schema["enum"].as_array().unwrap().len(), 11);
        assert!(p.message.chars().count() <= 200);
    }

    #[test]
    fn non_object_arguments_are_one_problem_at_the_root() {
        let v = Validators::new();
        for args in [json!([1]), json!("x"), json!(null)] {
            let r = v.validate(&tool("t", issue_schema()), &args).unwrap_err();
            assert_eq!(r.problems.len(), 1);
            assert_eq!(r.problems[0].pointer, "");
            assert!(r.problems[0]
                .message
                .starts_with("the arguments must be a JSON object"));
            assert!(r
                .to_text("x/t")
                .contains("- (arguments): the arguments must be"));
        }
    }

    #[test]
    fn external_refs_are_refused_without_fetching() {
        // A listener that would see the fetch if one were made.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let local = format!("http://{}/x.json", listener.local_addr().unwrap());
        let v = Validators::new();
        for uri in [
            local.as_str(),
            "http://127.0.0.1:9/x.json",
            "file:///etc/passwd",
        ] {
            let schema = json!({"type": "object", "properties": {"a": {"$ref": uri}}});
            match v.validate(&tool("t", schema), &json!({"a": 1})) {
                Ok(Checked::Skipped { reason }) => {
                    assert!(reason.contains("is not fetched"), "{reason}");
                }
                other => panic!("{uri}: expected Skipped, got {other:?}"),
            }
        }
        assert!(
            listener.accept().is_err(),
            "the validator connected to the listener"
        );
    }

    #[test]
    fn uncompilable_schema_is_skipped_not_blocking() {
        let v = Validators::new();
        let schema = json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}});
        assert!(matches!(
            v.validate(&tool("t", schema), &json!({"a": 1})),
            Ok(Checked::Skipped { .. })
        ));
        // Still a clear problem when the arguments are not an object at all.
        let schema = json!({"type": 5});
        assert!(v.validate(&tool("t", schema), &json!(1)).is_err());
    }

    #[test]
    fn draft_is_detected_and_unknown_meta_schemas_default_to_2020_12() {
        let v = Validators::new();
        // Draft 4: exclusiveMaximum is a boolean modifying maximum.
        let d4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
            "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": true}}});
        let r = v.validate(&tool("d4", d4), &json!({"n": 5})).unwrap_err();
        assert_eq!(r.problems[0].pointer, "/n");
        let odd =
            json!({"$schema": "https://example.com/my-meta", "type": "object", "required": ["a"]});
        let r = v.validate(&tool("odd", odd), &json!({})).unwrap_err();
        assert_eq!(r.problems[0].pointer, "/a");
        let none = json!({"type": "object", "properties": {
            "p": {"type": "array", "prefixItems": [{"type": "string"}]}}});
        let r = v
            .validate(&tool("none", none), &json!({"p": [1]}))
            .unwrap_err();
        assert_eq!(r.problems[0].pointer, "/p/0");
    }

    #[test]
    fn cache_recompiles_when_the_schema_changes() {
        let v = Validators::new();
        let loose = tool("t", json!({"type": "object"}));
        let strict = tool("t", json!({"type": "object", "required": ["a"]}));
        assert_eq!(v.validate(&loose, &json!({})), Ok(Checked::Valid));
        assert_eq!(v.len(), 1);
        assert!(v.validate(&strict, &json!({})).is_err());
        assert_eq!(v.len(), 1, "the new schema replaced the old one");
        assert_eq!(v.validate(&loose, &json!({})), Ok(Checked::Valid));
        let cached = v.compiled(&loose.id, loose.input_schema());
        assert!(Arc::ptr_eq(
            &cached,
            &v.compiled(&loose.id, loose.input_schema())
        ));
    }

    #[test]
    fn validators_are_shared_across_threads() {
        let v = Validators::new();
        let a = tool("a", issue_schema());
        let b = tool("b", json!({"type": "object", "required": ["x"]}));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..25 {
                        assert_eq!(v.validate(&a, &json!({"title": "t"})), Ok(Checked::Valid));
                        assert!(v.validate(&b, &json!({})).is_err());
                    }
                });
            }
        });
        assert_eq!(v.len(), 2);
    }
}
