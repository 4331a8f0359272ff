//! Instances generated from a JSON Schema: the smallest value that gives every required
//! field (or every field), for checking that a rewritten schema still accepts it.

use serde_json::{json, Map, Value};

/// Generates a value for `schema` (a subschema of `root`, for `$ref`s). With `all`,
/// objects get every declared property, not only the required ones.
pub fn instance(schema: &Value, root: &Value, all: bool, depth: usize) -> Value {
    let Value::Object(s) = schema else {
        return json!("x");
    };
    if depth > 12 {
        return json!(null);
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r.strip_prefix('#').and_then(|p| root.pointer(p));
        return target.map_or(json!("x"), |t| instance(t, root, all, depth + 1));
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(e) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(k).and_then(Value::as_array) {
            // A branch that only adds `required` applies to this schema's own object.
            let typed = branches.iter().find(|b| {
                b.get("type").is_some_and(|t| t != "null")
                    || b.get("$ref").is_some()
                    || b.get("const").is_some()
                    || b.get("properties").is_some()
            });
            match typed {
                Some(b) if !s.contains_key("properties") => {
                    return instance(b, root, all, depth + 1)
                }
                _ => {
                    let mut merged = s.clone();
                    merged.remove(k);
                    if let Some(Value::Array(req)) =
                        branches.first().and_then(|b| b.get("required"))
                    {
                        let mut r = merged
                            .get("required")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        r.extend(req.iter().cloned());
                        merged.insert("required".into(), Value::Array(r));
                    }
                    return instance(&Value::Object(merged), root, all, depth + 1);
                }
            }
        }
    }
    if let Some(parts) = s.get("allOf").and_then(Value::as_array) {
        let mut out = Map::new();
        for p in parts {
            if let Value::Object(m) = instance(p, root, all, depth + 1) {
                out.extend(m);
            }
        }
        return Value::Object(out);
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") => "array",
        _ => "string",
    };
    match ty {
        "object" => {
            let props = s.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut out = Map::new();
            let names: Vec<&str> = if all {
                props
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.as_str())
                    .chain(required.iter().copied())
                    .collect()
            } else {
                required
            };
            for name in names {
                let sub = props
                    .and_then(|p| p.get(name))
                    .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()));
                let v = sub.map_or(json!("x"), |sub| instance(sub, root, all, depth + 1));
                out.insert(name.to_string(), v);
            }
            Value::Object(out)
        }
        "array" => {
            let n = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::from(all));
            let item = s
                .get("items")
                .map_or(json!("x"), |i| instance(i, root, all, depth + 1));
            Value::Array(vec![item; n as usize])
        }
        "integer" | "number" => {
            let min = s.get("minimum").and_then(Value::as_f64);
            let xmin = s
                .get("exclusiveMinimum")
                .and_then(Value::as_f64)
                .map(|x| x + 1.0);
            let max = s.get("maximum").and_then(Value::as_f64);
            let v = min.or(xmin).unwrap_or(1.0).min(max.unwrap_or(f64::MAX));
            json!(v as i64)
        }
        "boolean" => json!(true),
        "null" => json!(null),
        _ => {
            let base = match s.get("format").and_then(Value::as_str) {
                Some("uuid") => "123e4567-e89b-12d3-a456-426614174000".to_string(),
                Some("date-time") => "2024-01-01T00:00:00Z".to_string(),
                Some("date") => "2024-01-01".to_string(),
                Some("uri") => "https://example.com/x".to_string(),
                Some("email") => "a@example.com".to_string(),
                _ => "x".to_string(),
            };
            let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            json!(if base.len() < min {
                "x".repeat(min)
            } else {
                base
            })
        }
    }
}
