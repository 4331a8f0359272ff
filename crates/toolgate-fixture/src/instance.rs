//! A small generator of minimal JSON instances for a JSON Schema, used to fill
//! `structuredContent` for tools that declare an `outputSchema`.
//!
//! It covers what real tool schemas use (types, `required`, `enum`, `const`, bounds,
//! `minItems`, common formats, local `$ref`, `anyOf`/`oneOf`/`allOf`); it is not a general
//! solver (`pattern` and `not` are ignored).

use serde_json::{json, Map, Value};

/// Recursion bound for self-referencing schemas: past it the generator stops descending.
const MAX_DEPTH: usize = 24;

/// A minimal instance of `schema`, resolving local `$ref`s against `schema` itself.
pub fn minimal_instance(schema: &Value) -> Value {
    Generator { root: schema }.instance(schema, 0)
}

/// Walks one schema document.
struct Generator<'a> {
    /// The document root, against which `#/...` references are resolved.
    root: &'a Value,
}

impl Generator<'_> {
    fn instance(&self, schema: &Value, depth: usize) -> Value {
        let Some(object) = schema.as_object() else {
            // `true` or a malformed schema: anything validates; null is the smallest value.
            return Value::Null;
        };
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            if let Some(target) = self.resolve(reference) {
                return self.instance(target, depth + 1);
            }
        }
        if let Some(value) = object.get("const") {
            return value.clone();
        }
        if let Some(first) = object
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|values| values.first())
        {
            return first.clone();
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(first) = object
                .get(key)
                .and_then(Value::as_array)
                .and_then(|branches| branches.first())
            {
                return self.instance(first, depth + 1);
            }
        }
        if let Some(branches) = object.get("allOf").and_then(Value::as_array) {
            return self.all_of(object, branches, depth);
        }
        match self.type_of(object) {
            "object" => self.object(object, depth),
            "array" => self.array(object, depth),
            "string" => string(object),
            "integer" => number(object, true),
            "number" => number(object, false),
            "boolean" => Value::Bool(false),
            _ => Value::Null,
        }
    }

    /// The instance type: the first non-null of `type` (string or list), else inferred.
    fn type_of<'s>(&self, object: &'s Map<String, Value>) -> &'s str {
        match object.get("type") {
            Some(Value::String(name)) => name,
            Some(Value::Array(names)) => names
                .iter()
                .filter_map(Value::as_str)
                .find(|name| *name != "null")
                .unwrap_or("null"),
            _ if object.contains_key("properties") || object.contains_key("required") => "object",
            _ if object.contains_key("items") => "array",
            _ => "null",
        }
    }

    fn object(&self, object: &Map<String, Value>, depth: usize) -> Value {
        let properties = object.get("properties").and_then(Value::as_object);
        let mut instance = Map::new();
        let required = object.get("required").and_then(Value::as_array);
        for name in required.into_iter().flatten().filter_map(Value::as_str) {
            let value = properties
                .and_then(|properties| properties.get(name))
                .map_or(Value::Null, |schema| self.instance(schema, depth + 1));
            instance.insert(name.to_owned(), value);
        }
        Value::Object(instance)
    }

    fn array(&self, object: &Map<String, Value>, depth: usize) -> Value {
        let count = object.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let items = object.get("items").unwrap_or(&Value::Bool(true));
        let item = self.instance(items, depth + 1);
        // Clamped: a fixture answer never needs more than a handful of items.
        Value::Array(vec![item; count.min(16) as usize])
    }

    /// Merges the object instances of every branch (and of the schema's own keywords).
    fn all_of(&self, object: &Map<String, Value>, branches: &[Value], depth: usize) -> Value {
        let mut own = object.clone();
        own.remove("allOf");
        let mut merged = self.instance(&Value::Object(own), depth + 1);
        for branch in branches {
            match (&mut merged, self.instance(branch, depth + 1)) {
                (Value::Object(into), Value::Object(from)) => into.extend(from),
                (slot @ Value::Null, other) => *slot = other,
                _ => {}
            }
        }
        merged
    }

    /// Resolves a local JSON pointer reference (`#`, `#/$defs/x`, `#/definitions/x`).
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }
}

fn string(object: &Map<String, Value>) -> Value {
    let format = object.get("format").and_then(Value::as_str).unwrap_or("");
    let base = match format {
        "date-time" => "1970-01-01T00:00:00Z",
        "date" => "1970-01-01",
        "time" => "00:00:00Z",
        "email" => "fixture@example.com",
        "uri" | "url" | "iri" => "https://example.com/",
        "uuid" => "00000000-0000-0000-0000-000000000000",
        "ipv4" => "127.0.0.1",
        "ipv6" => "::1",
        "hostname" => "example.com",
        _ => "",
    };
    let min = object.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let mut text = base.to_owned();
    while text.chars().count() < min {
        text.push('x');
    }
    Value::String(text)
}

fn number(object: &Map<String, Value>, integer: bool) -> Value {
    let bound = |key: &str| object.get(key).and_then(Value::as_f64);
    let mut value: f64 = 0.0;
    if let Some(min) = bound("minimum") {
        value = value.max(min);
    }
    if let Some(min) = bound("exclusiveMinimum") {
        if value <= min {
            value = if integer {
                min.floor() + 1.0
            } else {
                min + 1.0
            };
        }
    }
    if let Some(max) = bound("maximum") {
        value = value.min(max);
    }
    if let Some(max) = bound("exclusiveMaximum") {
        if value >= max {
            value = if integer { max.ceil() - 1.0 } else { max - 1.0 };
        }
    }
    if integer {
        json!(value.ceil() as i64)
    } else {
        json!(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_required_properties_with_typed_values() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "state": {"type": "string", "enum": ["open", "closed"]},
                "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "when": {"type": "string", "format": "date-time"},
                "optional": {"type": "string"}
            },
            "required": ["id", "state", "labels", "when"]
        });
        assert_eq!(
            minimal_instance(&schema),
            json!({"id": 1, "state": "open", "labels": [""], "when": "1970-01-01T00:00:00Z"})
        );
    }

    #[test]
    fn resolves_local_references_and_stops_on_cycles() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["next"]}},
            "$ref": "#/$defs/node"
        });
        // Terminates, and the outermost level has the required key.
        assert!(minimal_instance(&schema)["next"].is_object());
    }

    #[test]
    fn merges_all_of_branches() {
        let schema = json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {"const": 7}}, "required": ["b"]}
        ]});
        assert_eq!(minimal_instance(&schema), json!({"a": false, "b": 7}));
    }
}
