use super::*;
use serde_json::json;
use toolgate_core::catalog::{ToolId, ToolRecord};

fn record(tool: Value) -> ToolRecord {
    let name = tool["name"].as_str().unwrap().to_string();
    ToolRecord {
        id: ToolId::new("srv", &name),
        exposed: name,
        tool: tool.as_object().unwrap().clone(),
    }
}

fn entry(tool: &str) -> ToolEntry {
    ToolEntry {
        server: "srv".into(),
        tool: tool.into(),
        server_ident: "srv".into(),
        tool_ident: crate::code::names::ident(tool),
    }
}

fn decl(schema: Value) -> String {
    let r =
        record(json!({"name": "t", "description": "Do the thing. More.", "inputSchema": schema}));
    declare_one(&entry("t"), &r)
}

#[test]
fn properties_optional_nullable_enum_and_docs() {
    let d = decl(json!({"type": "object", "properties": {
        "owner": {"type": "string", "description": "Who owns it"},
        "state": {"enum": ["open", "closed"]},
        "count": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "a-b": {"const": 3}
    }, "required": ["owner", "count"]}));
    assert!(d.contains("/** Do the thing. More. */"), "{d}");
    assert!(d.contains("  /** Who owns it */\n  owner: string;"), "{d}");
    assert!(d.contains("  state?: \"open\" | \"closed\";"), "{d}");
    assert!(d.contains("  count: number | null;"), "{d}");
    assert!(d.contains("  tags?: string[];"), "{d}");
    assert!(d.contains("  \"a-b\"?: 3;"), "{d}");
    assert!(d.contains("function t(args: {"), "{d}");
    assert!(d.ends_with("}): Promise<unknown>;\n"), "{d}");
}

#[test]
fn refs_become_named_types_and_cycles_end_in_a_name() {
    let d = decl(
        json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            "other": {"$ref": "https://example.com/x.json"}}}}}),
    );
    assert!(d.contains("type TNode = {"), "{d}");
    assert!(d.contains("children?: TNode[];"), "{d}");
    assert!(d.contains("root?: TNode;"), "{d}");
    assert!(d.contains("other?: unknown;"), "{d}");
    assert_eq!(d.matches("type TNode").count(), 1);
}

#[test]
fn unions_intersections_and_index_signatures() {
    let d = decl(json!({"type": "object", "properties": {
        "v": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
        "w": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                         {"type": "object", "properties": {"b": {"type": "boolean"}}}]},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        "free": {"type": "object"},
        "n": {"type": "string", "nullable": true}
    }}));
    assert!(d.contains("v?: (string | number[]);"), "{d}");
    assert!(
        d.contains("w?: {\n    a: string;\n  } & {\n    b?: boolean;\n  };"),
        "{d}"
    );
    assert!(d.contains("m?: {\n    [key: string]: number;\n  };"), "{d}");
    assert!(d.contains("free?: Record<string, unknown>;"), "{d}");
    assert!(d.contains("n?: string | null;"), "{d}");
}

#[test]
fn output_schema_and_caps() {
    let r = record(json!({"name": "add", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}}));
    let d = declare_one(&entry("add"), &r);
    assert!(d.contains("Promise<{\n  sum: number;\n}>"), "{d}");
    // Deep nesting is cut to unknown.
    let mut s = json!({"type": "string"});
    for _ in 0..20 {
        s = json!({"type": "object", "properties": {"x": s}});
    }
    let d = decl(s);
    assert!(d.contains("unknown"), "{d}");
    // A huge schema stays bounded.
    let props: serde_json::Map<String, Value> = (0..2000)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"type": "string", "description": "x".repeat(50)}),
            )
        })
        .collect();
    let d = decl(json!({"type": "object", "properties": props}));
    assert!(d.len() < MAX_CHARS * 2, "{}", d.len());
    assert!(d.contains("more properties cut"));
}

#[test]
fn declare_groups_by_server_namespace() {
    let r = record(json!({"name": "get-report", "inputSchema": {"type": "object"}}));
    let text = declare(&[(entry("get-report"), &r)]);
    assert!(
        text.starts_with("declare namespace tools.srv {\n"),
        "{text}"
    );
    assert!(
        text.contains("  function get_report(args: Record<string, unknown>)"),
        "{text}"
    );
    assert!(
        text.contains("tools.call(\"srv\", \"get-report\", args)"),
        "{text}"
    );
}
