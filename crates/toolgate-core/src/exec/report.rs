//! What was wrong with a call's arguments, as problems a model can act on.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::ValidationError;
use serde_json::{json, Map, Value};

/// At most this many characters of a schema excerpt: enough to show the rule that was
/// broken and its neighbours (type, enum, description), never a whole tool schema.
const EXCERPT_CHARS: usize = 300;
/// A nested schema (a `oneOf` branch, `items`) is shown when at most this long.
const NESTED_CHARS: usize = 100;
/// At most this many problems are listed; the rest are counted.
const MAX_PROBLEMS: usize = 20;
/// At most this many characters of a message (a message may quote the offending value).
const MESSAGE_CHARS: usize = 200;

/// One thing wrong with the arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// JSON pointer into the arguments (`""` is the arguments object itself). For a
    /// missing or unexpected property this points at the property, not its parent,
    /// so the model sees `/title: is required`.
    pub pointer: String,
    /// The keyword that failed (`required`, `type`, `oneOf`, ...).
    pub keyword: String,
    /// JSON pointer into the input schema to that keyword (`/properties/title/type`).
    pub schema_path: String,
    /// The schema object holding that keyword, clipped to a few hundred characters.
    pub schema: Value,
    /// What is wrong, in plain words.
    pub message: String,
}

/// Every problem found in one set of arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationReport {
    /// In the order the validator found them, at most `MAX_PROBLEMS`.
    pub problems: Vec<Problem>,
    /// How many more were found and not listed.
    pub omitted: usize,
}

impl ValidationReport {
    /// The report when the arguments are not a JSON object at all.
    pub(crate) fn not_an_object(args: &Value, schema: &Value) -> Self {
        Self {
            problems: vec![Problem {
                pointer: String::new(),
                keyword: "type".into(),
                schema_path: String::new(),
                schema: clip_schema(schema, "type"),
                message: format!(
                    "the arguments must be a JSON object, got {}",
                    json_type(args)
                ),
            }],
            omitted: 0,
        }
    }

    /// Builds a report from the validator's errors.
    pub(crate) fn from_errors<'a>(
        errors: impl Iterator<Item = ValidationError<'a>>,
        schema: &Value,
    ) -> Self {
        let mut problems = Vec::new();
        let mut omitted = 0;
        for e in errors {
            for p in problems_of(&e, schema) {
                if problems.len() < MAX_PROBLEMS {
                    problems.push(p);
                } else {
                    omitted += 1;
                }
            }
        }
        Self { problems, omitted }
    }

    /// A short message for the model, e.g. "The arguments do not match github/create_issue's
    /// input schema: /title: is required; /labels/0: expected string, got number. Fix these
    /// and call again."
    pub fn to_text(&self, tool_name: &str) -> String {
        let mut out = format!("The arguments do not match {tool_name}'s input schema:");
        for p in &self.problems {
            let at = if p.pointer.is_empty() {
                "(arguments)"
            } else {
                &p.pointer
            };
            out.push_str(&format!("\n- {at}: {}", p.message));
        }
        if self.omitted > 0 {
            out.push_str(&format!("\n- ... and {} more", self.omitted));
        }
        out.push_str("\nFix these and call again.");
        out
    }

    /// The same report as JSON (for `structuredContent`): `{problems: [{pointer, keyword,
    /// schemaPath, schema, message}], omitted}`.
    pub fn structured(&self) -> Value {
        let problems: Vec<Value> = self
            .problems
            .iter()
            .map(|p| {
                json!({
                    "pointer": p.pointer,
                    "keyword": p.keyword,
                    "schemaPath": p.schema_path,
                    "schema": p.schema,
                    "message": p.message,
                })
            })
            .collect();
        json!({"problems": problems, "omitted": self.omitted})
    }
}

/// One validator error becomes one problem, except `additionalProperties` and
/// `unevaluatedProperties`, which become one problem per unexpected property.
fn problems_of(e: &ValidationError<'_>, schema: &Value) -> Vec<Problem> {
    let keyword = e.kind().keyword().to_string();
    let at = e.instance_path().as_str().to_string();
    let schema_path = e.schema_path().as_str().to_string();
    // The schema object that holds the keyword: the parent of the keyword's location.
    let holder = schema_path
        .rsplit_once('/')
        .and_then(|(parent, _)| schema.pointer(parent))
        .unwrap_or(schema);
    let excerpt = clip_schema(holder, &keyword);
    let problem = |pointer: String, message: String| Problem {
        pointer,
        keyword: keyword.clone(),
        schema_path: schema_path.clone(),
        schema: excerpt.clone(),
        message: clip(&message, MESSAGE_CHARS),
    };
    match e.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map(str::to_string).unwrap_or_default();
            vec![problem(child(&at, &name), "is required".into())]
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            let allowed = allowed_properties(holder);
            unexpected
                .iter()
                .map(|name| problem(child(&at, name), not_allowed(&allowed)))
                .collect()
        }
        kind => vec![problem(at, message(kind, e, holder))],
    }
}

fn not_allowed(allowed: &[String]) -> String {
    if allowed.is_empty() {
        "is not an allowed property".into()
    } else {
        format!(
            "is not an allowed property (allowed: {})",
            clip(&allowed.join(", "), 120)
        )
    }
}

fn allowed_properties(holder: &Value) -> Vec<String> {
    holder
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn message(kind: &ValidationErrorKind, e: &ValidationError<'_>, holder: &Value) -> String {
    use ValidationErrorKind as K;
    let got = json_type(e.instance());
    match kind {
        K::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            format!("expected {expected}, got {got}")
        }
        K::Enum { options } => format!("must be one of {}", clip(&options.to_string(), 150)),
        K::Constant { expected_value } => {
            format!("must be {}", clip(&expected_value.to_string(), 150))
        }
        K::Minimum { limit } => format!("must be >= {limit}"),
        K::Maximum { limit } => format!("must be <= {limit}"),
        K::ExclusiveMinimum { limit } => format!("must be > {limit}"),
        K::ExclusiveMaximum { limit } => format!("must be < {limit}"),
        K::MinLength { limit } => format!("must be at least {limit} characters long"),
        K::MaxLength { limit } => format!("must be at most {limit} characters long"),
        K::MinItems { limit } => format!("must have at least {limit} items"),
        K::MaxItems { limit } => format!("must have at most {limit} items"),
        K::MinProperties { limit } => format!("must have at least {limit} properties"),
        K::MaxProperties { limit } => format!("must have at most {limit} properties"),
        K::Pattern { pattern } => format!("must match the pattern {pattern}"),
        K::Format { format } => format!("must be a valid {format}"),
        K::UniqueItems => "must not contain duplicate items".into(),
        K::OneOfNotValid { context } => format!(
            "must match exactly one of the {} alternatives, but matches none{}",
            alternatives(holder, "oneOf", context.len()),
            first_reasons(context)
        ),
        K::OneOfMultipleValid { .. } => format!(
            "must match exactly one of the {} alternatives, but matches more than one",
            alternatives(holder, "oneOf", 0)
        ),
        K::AnyOf { context } => format!(
            "must match at least one of the {} alternatives{}",
            alternatives(holder, "anyOf", context.len()),
            first_reasons(context)
        ),
        _ => e.to_string(),
    }
}

fn alternatives(holder: &Value, keyword: &str, fallback: usize) -> usize {
    holder
        .get(keyword)
        .and_then(Value::as_array)
        .map_or(fallback, Vec::len)
}

/// Why each alternative failed, briefly: the first problem of each branch.
fn first_reasons(context: &[Vec<ValidationError<'static>>]) -> String {
    let reasons: Vec<String> = context
        .iter()
        .enumerate()
        .filter_map(|(i, errs)| {
            let e = errs.first()?;
            let at = e.instance_path().as_str();
            let what = match e.kind() {
                ValidationErrorKind::Required { property } => {
                    format!("{} is required", child(at, property.as_str().unwrap_or("")))
                }
                kind => format!(
                    "{}: {}",
                    if at.is_empty() { "(arguments)" } else { at },
                    message(kind, e, &Value::Null)
                ),
            };
            Some(format!("#{}: {}", i + 1, clip(&what, 80)))
        })
        .collect();
    if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join("; "))
    }
}

/// The pointer to property `name` of the object at `parent` (RFC 6901 escaping).
fn child(parent: &str, name: &str) -> String {
    format!("{parent}/{}", name.replace('~', "~0").replace('/', "~1"))
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A schema object cut down to about `EXCERPT_CHARS`: the failed keyword first, then
/// `type`, then the other keys in order while they fit. Long nested schemas
/// (`properties`, `$defs` ...) are elided as `"…"`: the problem's pointer already says
/// where in them the model should look.
pub(crate) fn clip_schema(holder: &Value, keyword: &str) -> Value {
    let Some(obj) = holder.as_object() else {
        return holder.clone();
    };
    let mut out = Map::new();
    let mut used = 2;
    let order = [keyword, "type"]
        .into_iter()
        .chain(obj.keys().map(String::as_str));
    for key in order {
        let Some(v) = obj.get(key) else { continue };
        if out.contains_key(key) {
            continue;
        }
        let v = clip_value(v, key == keyword);
        let cost = key.len() + v.to_string().len() + 4;
        if used + cost > EXCERPT_CHARS && !out.is_empty() {
            out.insert(
                "…".into(),
                Value::String(format!("{} more keys", obj.len() - out.len())),
            );
            break;
        }
        used += cost;
        out.insert(key.to_string(), v);
    }
    Value::Object(out)
}

/// Short values stay; long strings and arrays are cut; nested schemas longer than
/// `NESTED_CHARS` become `"…"` unless they are the broken keyword's own value.
fn clip_value(v: &Value, is_keyword: bool) -> Value {
    match v {
        Value::String(s) => Value::String(clip(s, 120)),
        Value::Array(items) if items.len() > 12 => {
            let mut kept: Vec<Value> = items[..10].iter().map(|x| clip_value(x, false)).collect();
            kept.push(Value::String(format!("… {} more", items.len() - 10)));
            Value::Array(kept)
        }
        Value::Array(items) => Value::Array(items.iter().map(|x| clip_value(x, false)).collect()),
        Value::Object(_) if !is_keyword && v.to_string().len() > NESTED_CHARS => {
            Value::String("…".into())
        }
        Value::Object(o) if v.to_string().len() > EXCERPT_CHARS / 2 => {
            Value::String(format!("… ({} keys)", o.len()))
        }
        other => other.clone(),
    }
}

/// `s` cut to at most `max` characters (on a char boundary), marked with `…` if cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.chars().nth(max).is_none() {
        return s.to_string();
    }
    let keep: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{keep}…")
}
