//! JSON Schema to TypeScript declarations, so a model reads exactly the signatures of the
//! tools it will call from a program.
//!
//! Local `$ref`s (`#/$defs/X`, `#/definitions/X`) become named types, declared once, so a
//! recursive schema ends in a name instead of expanding forever; other refs are `unknown`.
//! `oneOf`/`anyOf` are unions, `allOf` intersections, `enum`/`const` literal types;
//! optional (`?`, not in `required`) stays distinct from nullable (`| null`);
//! `additionalProperties` becomes an index signature. Nesting and size are capped, and
//! what is cut is `unknown`.

use serde_json::Value;
use std::collections::BTreeMap;
use toolgate_core::catalog::ToolRecord;
use toolgate_sandbox::protocol::ToolEntry;

/// Nesting deeper than this is `unknown`.
const MAX_DEPTH: usize = 8;
/// Characters of one tool's declaration before the rest is cut to `unknown`.
const MAX_CHARS: usize = 6_000;
/// Enum values listed before the rest collapse to their base type.
const MAX_ENUM: usize = 40;

/// Declarations for these tools, grouped by server as `declare namespace tools.<server>`.
pub(crate) fn declare(tools: &[(ToolEntry, &ToolRecord)]) -> String {
    let mut by_server: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (entry, record) in tools {
        by_server
            .entry(entry.server_ident.as_str())
            .or_default()
            .push(declare_one(entry, record));
    }
    let mut out = String::new();
    for (server, decls) in by_server {
        out.push_str(&format!("declare namespace tools.{server} {{\n"));
        for d in decls {
            for line in d.lines() {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str("}\n");
    }
    out
}

/// The declaration of one catalog tool, named as a run over `catalog` would name it.
pub(crate) fn declare_tool(catalog: &toolgate_core::catalog::Catalog, tool: &ToolRecord) -> String {
    let (entries, _) = super::tools_for(catalog);
    match entries
        .iter()
        .find(|e| e.server == tool.id.server && e.tool == tool.id.name)
    {
        Some(e) => declare(&[(e.clone(), tool)]),
        None => String::new(),
    }
}

/// Just the input type, `type <Name>Args = ...` (where only the schema is at hand).
pub(crate) fn input_type(name: &str, schema: &Value) -> String {
    let prefix = pascal(&super::names::ident(name));
    let root = ts_root(schema);
    let mut ts = Ts::new(prefix.clone());
    let input = ts.ty(&root, &root, 0, 0);
    let mut text = String::new();
    for (n, body) in ts.finish(&root) {
        text.push_str(&format!("type {n} = {body};\n"));
    }
    text.push_str(&format!("type {prefix}Args = {input};\n"));
    text
}

/// One tool: its named types, then `function <tool>(args: Input): Promise<Output>` with
/// the description as a doc comment.
pub(crate) fn declare_one(entry: &ToolEntry, record: &ToolRecord) -> String {
    let prefix = pascal(&entry.tool_ident);
    let root = ts_root(record.input_schema());
    let mut ts = Ts::new(prefix.clone());
    let input = ts.ty(&root, &root, 0, 0);
    let mut named = ts.finish(&root);
    let output = match record.tool.get("outputSchema") {
        Some(o) if o.is_object() => {
            let mut out = Ts::new(format!("{prefix}Output"));
            let t = out.ty(o, o, 0, 0);
            named.extend(out.finish(o));
            t
        }
        _ => "unknown".into(),
    };
    let mut text = String::new();
    for (name, body) in named {
        text.push_str(&format!("type {name} = {body};\n"));
    }
    let desc = record
        .tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    text.push_str(&doc(desc, 400, 0));
    text.push_str(&format!(
        "// {}/{} — also tools.call({:?}, {:?}, args)\n",
        entry.server, entry.tool, entry.server, entry.tool
    ));
    text.push_str(&format!(
        "function {}(args: {input}): Promise<{output}>;\n",
        entry.tool_ident
    ));
    text
}

/// The input schema, or an empty object when it has none.
fn ts_root(schema: &Value) -> Value {
    if schema.is_object() {
        schema.clone()
    } else {
        serde_json::json!({"type": "object"})
    }
}

/// A `/** ... */` comment of one line, or nothing for an empty text.
fn doc(text: &str, max: usize, indent: usize) -> String {
    let line = super::clip(text, max).replace("*/", "* /");
    if line.is_empty() {
        String::new()
    } else {
        format!("{}/** {line} */\n", "  ".repeat(indent))
    }
}

fn pascal(s: &str) -> String {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn is_ident(k: &str) -> bool {
    let mut c = k.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == '$')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// One schema's conversion: the named types it refers to, and what is left of the budget.
struct Ts {
    prefix: String,
    /// Named types by name: `None` while being expanded (a cycle), then the body.
    named: BTreeMap<String, Option<String>>,
    /// Def pointers (`#/$defs/X`) by the name given to them, in the order first seen.
    refs: Vec<(String, String)>,
    left: usize,
}

impl Ts {
    fn new(prefix: String) -> Self {
        Self {
            prefix,
            named: BTreeMap::new(),
            refs: Vec::new(),
            left: MAX_CHARS,
        }
    }

    /// Expands every named type reached (including from named types), then returns them.
    fn finish(mut self, root: &Value) -> Vec<(String, String)> {
        let mut i = 0;
        while i < self.refs.len() {
            let (name, pointer) = self.refs[i].clone();
            if self.named.get(&name).is_some_and(Option::is_none) {
                let body = match root.pointer(&pointer) {
                    Some(def) => self.ty(root, def, 1, 0),
                    None => "unknown".into(),
                };
                self.named.insert(name, Some(body));
            }
            i += 1;
        }
        self.named
            .into_iter()
            .map(|(k, v)| (k, v.unwrap_or_else(|| "unknown".into())))
            .collect()
    }

    fn spend(&mut self, s: String) -> String {
        self.left = self.left.saturating_sub(s.len());
        s
    }

    /// The TypeScript type of `s` (a part of `root`), at nesting `depth`, `indent` levels in.
    fn ty(&mut self, root: &Value, s: &Value, depth: usize, indent: usize) -> String {
        if depth > MAX_DEPTH || self.left == 0 {
            return "unknown".into();
        }
        let o = match s {
            Value::Bool(true) => return "unknown".into(),
            Value::Bool(false) => return "never".into(),
            Value::Object(o) => o,
            _ => return "unknown".into(),
        };
        let mut parts: Vec<String> = Vec::new();
        if let Some(r) = o.get("$ref").and_then(Value::as_str) {
            parts.push(self.reference(r));
        }
        if let Some(values) = o.get("enum").and_then(Value::as_array) {
            if values.len() <= MAX_ENUM {
                parts.push(values.iter().map(literal).collect::<Vec<_>>().join(" | "));
            }
        } else if let Some(c) = o.get("const") {
            parts.push(literal(c));
        }
        if parts.is_empty() || o.contains_key("type") || o.contains_key("properties") {
            if let Some(base) = self.base(root, o, depth, indent) {
                if parts.is_empty() {
                    parts.push(base);
                }
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alts) = o.get(key).and_then(Value::as_array) {
                let u: Vec<String> = alts
                    .iter()
                    .map(|a| self.ty(root, a, depth + 1, indent))
                    .collect();
                parts.push(paren(&dedup(u).join(" | ")));
            }
        }
        if let Some(all) = o.get("allOf").and_then(Value::as_array) {
            for a in all {
                let t = self.ty(root, a, depth + 1, indent);
                parts.push(paren(&t));
            }
        }
        parts.retain(|p| p != "unknown");
        let mut t = match parts.len() {
            0 => "unknown".to_string(),
            1 => parts.pop().unwrap_or_default(),
            _ => parts.join(" & "),
        };
        if o.get("nullable") == Some(&Value::Bool(true)) && !t.contains("null") {
            t = format!("{} | null", paren(&t));
        }
        self.spend(t)
    }

    /// The type from `type` (and `properties`/`items`); `None` when there is neither.
    fn base(
        &mut self,
        root: &Value,
        o: &serde_json::Map<String, Value>,
        depth: usize,
        indent: usize,
    ) -> Option<String> {
        let types: Vec<&str> = match o.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if o.contains_key("properties") || o.contains_key("additionalProperties") => {
                vec!["object"]
            }
            _ if o.contains_key("items") || o.contains_key("prefixItems") => vec!["array"],
            _ => return None,
        };
        let mut alts = Vec::new();
        for t in types {
            alts.push(match t {
                "string" => "string".into(),
                "integer" | "number" => "number".into(),
                "boolean" => "boolean".into(),
                "null" => "null".into(),
                "array" => self.array(root, o, depth, indent),
                "object" => self.object(root, o, depth, indent),
                _ => "unknown".into(),
            });
        }
        Some(dedup(alts).join(" | "))
    }

    fn array(
        &mut self,
        root: &Value,
        o: &serde_json::Map<String, Value>,
        depth: usize,
        indent: usize,
    ) -> String {
        let tuple = o
            .get("prefixItems")
            .or_else(|| o.get("items").filter(|i| i.is_array()))
            .and_then(Value::as_array);
        if let Some(items) = tuple {
            let ts: Vec<String> = items
                .iter()
                .map(|i| self.ty(root, i, depth + 1, indent))
                .collect();
            return format!("[{}]", ts.join(", "));
        }
        match o.get("items") {
            Some(i) => format!("{}[]", paren(&self.ty(root, i, depth + 1, indent))),
            None => "unknown[]".into(),
        }
    }

    fn object(
        &mut self,
        root: &Value,
        o: &serde_json::Map<String, Value>,
        depth: usize,
        indent: usize,
    ) -> String {
        let required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let props = o.get("properties").and_then(Value::as_object);
        let extra = o.get("additionalProperties");
        if props.is_none_or(|p| p.is_empty()) && extra.is_none_or(|e| e == &Value::Bool(true)) {
            return "Record<string, unknown>".into();
        }
        let pad = "  ".repeat(indent + 1);
        let mut lines = Vec::new();
        for (k, v) in props.into_iter().flatten() {
            if self.left == 0 {
                lines.push(format!("{pad}// … more properties cut"));
                break;
            }
            let desc = v.get("description").and_then(Value::as_str).unwrap_or("");
            let d = doc(desc, 120, indent + 1);
            let key = if is_ident(k) {
                k.clone()
            } else {
                serde_json::to_string(k).unwrap_or_default()
            };
            let opt = if required.contains(&k.as_str()) {
                ""
            } else {
                "?"
            };
            let t = self.ty(root, v, depth + 1, indent + 1);
            lines.push(self.spend(format!("{d}{pad}{key}{opt}: {t};")));
        }
        match extra {
            Some(e) if e.is_object() => {
                let t = self.ty(root, e, depth + 1, indent + 1);
                lines.push(format!("{pad}[key: string]: {t};"));
            }
            _ => {}
        }
        format!("{{\n{}\n{}}}", lines.join("\n"), "  ".repeat(indent))
    }

    /// A named type for a local ref, registered to be declared once.
    fn reference(&mut self, r: &str) -> String {
        let Some(rest) = r.strip_prefix('#') else {
            return "unknown".into();
        };
        if rest.is_empty() {
            let name = format!("{}Input", self.prefix);
            if !self.named.contains_key(&name) {
                self.named.insert(name.clone(), None);
                self.refs.push((name.clone(), String::new()));
            }
            return name;
        }
        let last = rest.rsplit('/').next().unwrap_or("");
        let name = format!("{}{}", self.prefix, pascal(last));
        if !self.named.contains_key(&name) {
            self.named.insert(name.clone(), None);
            self.refs.push((name.clone(), rest.to_string()));
        }
        name
    }
}

fn literal(v: &Value) -> String {
    v.to_string()
}

fn paren(t: &str) -> String {
    if t.contains(" | ") || t.contains(" & ") {
        format!("({t})")
    } else {
        t.to_string()
    }
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
    v
}

#[cfg(test)]
#[path = "typescript_tests.rs"]
mod tests;
