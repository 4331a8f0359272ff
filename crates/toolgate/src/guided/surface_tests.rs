//! The hand-written meta-tool schemas against the typed arguments the handlers parse:
//! the same property names, the same types and the same `required`, for every tool.

use super::*;
use toolgate_core::meta::args::{self, MetaArgs};

/// Each property's name, type (without "null") and item type; and the required names.
type Shape = (Vec<(String, Option<String>, Option<String>)>, Vec<String>);

fn shape(schema: &Value) -> Shape {
    let one_type = |t: &Value| match t {
        Value::String(s) => Some(s.clone()),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(str::to_string),
        _ => None,
    };
    let props = schema["properties"].as_object().expect("properties");
    let props = props
        .iter()
        .map(|(k, p)| {
            (
                k.clone(),
                one_type(&p["type"]),
                one_type(&p["items"]["type"]),
            )
        })
        .collect();
    let mut required: Vec<String> = (schema["required"].as_array().into_iter().flatten())
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    required.sort();
    (props, required)
}

fn agrees<T: MetaArgs>(listed: &[Value]) -> String {
    let tool = listed
        .iter()
        .find(|t| t["name"] == T::TOOL)
        .unwrap_or_else(|| panic!("{} is not listed", T::TOOL));
    assert_eq!(
        shape(&tool["inputSchema"]),
        shape(&args::schema_of::<T>()),
        "{}: the hand-written schema and the typed arguments differ",
        T::TOOL
    );
    T::TOOL.to_string()
}

#[test]
fn every_schema_agrees_with_its_typed_arguments() {
    let listed = session_tools("", true, true);
    let mut checked = vec![
        agrees::<args::RouteArgs>(&listed),
        agrees::<args::ExecuteArgs>(&listed),
        agrees::<args::ContinueArgs>(&listed),
        agrees::<args::ExecuteCodeArgs>(&listed),
        agrees::<args::DescribeArgs>(&listed),
        agrees::<args::ProposeArgs>(&listed),
    ];
    // Every listed meta-tool has its typed definition.
    let mut names: Vec<String> = listed
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    checked.sort();
    names.sort();
    assert_eq!(checked, names);
}

#[test]
fn a_drifted_schema_is_caught() {
    // The check itself can fail: a property missing, a type changed, `required` changed.
    let mut listed = session_tools("", true, true);
    let execute = listed.iter_mut().find(|t| t["name"] == EXECUTE).unwrap();
    let typed = shape(&args::schema_of::<args::ExecuteArgs>());
    assert_eq!(shape(&execute["inputSchema"]), typed);
    execute["inputSchema"]["required"] = serde_json::json!(["arguments"]);
    assert_ne!(shape(&execute["inputSchema"]), typed);
    let mut route = shape(&meta_tools("")[0]["inputSchema"]);
    route.0[3].1 = Some("string".into());
    assert_ne!(route, shape(&args::schema_of::<args::RouteArgs>()));
}

#[test]
fn execute_takes_arguments_optionally_in_schema_and_handler() {
    let listed = meta_tools("");
    let execute = listed.iter().find(|t| t["name"] == EXECUTE).unwrap();
    assert!(execute["inputSchema"].get("required").is_none());
    let parsed: args::ExecuteArgs =
        args::parse(serde_json::json!({"tool": "s/t"}).as_object().unwrap()).unwrap();
    assert!(parsed.arguments.is_none());
}

#[test]
fn the_three_meta_tools_ask_claude_code_to_load_them_up_front() {
    for prefix in ["", "tg_"] {
        let listed = session_tools(prefix, true, true);
        for name in [ROUTE, EXECUTE, CONTINUE] {
            let name = format!("{prefix}{name}");
            let tool = listed.iter().find(|t| t["name"] == name.as_str()).unwrap();
            assert_eq!(tool["_meta"][ALWAYS_LOAD], true, "{name}: {tool}");
        }
    }
}
