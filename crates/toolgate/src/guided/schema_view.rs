//! How route shows a tool's input schema: `summary` (names, types, required), `signature`
//! (a compact typed line plus one short line per parameter), or `full` (the upstream schema).

use serde_json::{json, Map, Value};

/// The detail levels route accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Each argument's name, type and whether it is required.
    Summary,
    /// A one-line signature (`name(a: string, b?: number)`) and each argument's description, shortened.
    Signature,
    /// The whole input schema.
    Full,
    /// A TypeScript declaration, for code mode.
    TypeScript,
}

impl Detail {
    /// The level a word names (`summary`, `signature`, `full`, `typescript`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "summary" => Some(Self::Summary),
            "signature" => Some(Self::Signature),
            "full" => Some(Self::Full),
            "typescript" => Some(Self::TypeScript),
            _ => None,
        }
    }
}

/// A short type name for a property schema: `string`, `integer[]`, `"a"|"b"`, `object`.
pub(crate) fn type_name(schema: &Value) -> String {
    let Some(o) = schema.as_object() else {
        return "any".into();
    };
    if let Some(values) = o.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values.iter().take(6).map(|v| v.to_string()).collect();
        let more = if values.len() > 6 { "|…" } else { "" };
        return format!("{}{more}", shown.join("|"));
    }
    if let Some(c) = o.get("const") {
        return c.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = o.get(key).and_then(Value::as_array) {
            let names: Vec<String> = alts.iter().take(4).map(type_name).collect();
            return names.join("|");
        }
    }
    match o.get("type") {
        Some(Value::String(t)) if t == "array" => {
            format!("{}[]", o.get("items").map_or("any".into(), type_name))
        }
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if o.contains_key("properties") => "object".into(),
        _ if o.contains_key("$ref") => "object".into(),
        _ => "any".into(),
    }
}

fn properties(schema: &Value) -> (Vec<(&String, &Value)>, Vec<&str>) {
    let props: Vec<(&String, &Value)> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().collect())
        .unwrap_or_default();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    (props, required)
}

fn short(text: &str, max: usize) -> String {
    toolgate_core::catalog::one_line(text, max)
}

/// The input schema at the requested detail.
pub(crate) fn render(name: &str, schema: &Value, detail: Detail) -> Value {
    match detail {
        Detail::Full => schema.clone(),
        Detail::TypeScript => {
            json!({"typescript": crate::code::typescript::input_type(name, schema)})
        }
        Detail::Summary => {
            let (props, required) = properties(schema);
            let args: Vec<Value> = props
                .iter()
                .map(|(k, v)| json!({"name": k, "type": type_name(v), "required": required.contains(&k.as_str())}))
                .collect();
            json!({"arguments": args})
        }
        Detail::Signature => {
            let (props, required) = properties(schema);
            let mut sig = Vec::new();
            let mut docs = Vec::new();
            // Required parameters first, as a reader expects them.
            let mut ordered: Vec<&(&String, &Value)> = props.iter().collect();
            ordered.sort_by_key(|(k, _)| !required.contains(&k.as_str()));
            for (k, v) in ordered {
                let opt = if required.contains(&k.as_str()) {
                    ""
                } else {
                    "?"
                };
                sig.push(format!("{k}{opt}: {}", type_name(v)));
                if let Some(d) = v.get("description").and_then(Value::as_str) {
                    docs.push(format!("{k}: {}", short(d, 80)));
                }
            }
            let mut out = Map::new();
            out.insert(
                "signature".into(),
                Value::String(format!("{name}({})", sig.join(", "))),
            );
            if !docs.is_empty() {
                out.insert("parameters".into(), json!(docs));
            }
            Value::Object(out)
        }
    }
}

/// `{required field: "<type>"}`: the arguments skeleton in route's nextCall.
pub(crate) fn placeholders(schema: &Value) -> Value {
    let (props, required) = properties(schema);
    let mut out = Map::new();
    for r in required {
        let t = props
            .iter()
            .find(|(k, _)| k.as_str() == r)
            .map_or("any".into(), |(_, v)| type_name(v));
        out.insert(r.to_string(), Value::String(format!("<{t}>")));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "owner": {"type": "string", "description": "Repository owner. Long text follows."},
            "labels": {"type": "array", "items": {"type": "string"}},
            "state": {"type": "string", "enum": ["open", "closed"]},
            "count": {"type": ["integer", "null"]}
        }, "required": ["owner", "state"]})
    }

    #[test]
    fn signature_puts_required_first_and_marks_optional() {
        let v = render("list_issues", &schema(), Detail::Signature);
        assert_eq!(
            v["signature"],
            "list_issues(owner: string, state: \"open\"|\"closed\", labels?: string[], count?: integer|null)"
        );
        assert_eq!(v["parameters"][0], "owner: Repository owner.");
    }

    #[test]
    fn summary_and_placeholders() {
        let v = render("t", &schema(), Detail::Summary);
        assert_eq!(v["arguments"].as_array().unwrap().len(), 4);
        assert_eq!(
            v["arguments"][0],
            json!({"name": "owner", "type": "string", "required": true})
        );
        assert_eq!(
            placeholders(&schema()),
            json!({"owner": "<string>", "state": "<\"open\"|\"closed\">"})
        );
        assert_eq!(render("t", &schema(), Detail::Full), schema());
    }
}
