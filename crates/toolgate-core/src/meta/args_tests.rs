//! Unit tests of the typed meta-tool arguments: what is accepted, and what each mistake says.

use super::*;
use serde_json::json;

fn args(v: Value) -> Map<String, Value> {
    v.as_object().expect("an object").clone()
}

#[test]
fn well_formed_arguments_parse_with_null_as_left_out() {
    let a: ExecuteArgs = parse(&args(json!({
        "selectionId": "s1", "arguments": {"q": 1}, "fields": ["a"], "max_tokens": 500, "tool": null
    })))
    .unwrap();
    assert_eq!(a.selection_id.as_deref(), Some("s1"));
    assert_eq!(a.tool, None);
    assert_eq!(a.arguments.unwrap()["q"], 1);
    assert_eq!(a.fields.unwrap(), vec!["a".to_string()]);
    assert_eq!(a.max_tokens, Some(500));
    // `arguments` may be left out (a tool that takes none).
    let a: ExecuteArgs = parse(&args(json!({"tool": "s/t"}))).unwrap();
    assert!(a.arguments.is_none());
    let c: ExecuteCodeArgs = parse(&args(json!({"code": "return 1"}))).unwrap();
    assert_eq!((c.code.as_str(), &c.input), ("return 1", &Value::Null));
}

#[test]
fn an_unknown_key_names_the_allowed_ones() {
    let e = parse::<ExecuteArgs>(&args(json!({"tool": "s/t", "q": 1})))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "unknown argument \"q\": execute takes selectionId, tool, arguments, fields and \
         max_tokens; the tool's own arguments go inside \"arguments\""
    );
    let e = parse::<ContinueArgs>(&args(json!({"page": 2})))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "unknown argument \"page\": continue takes cursor, operationId and cancel"
    );
}

#[test]
fn a_wrong_type_names_the_key_and_what_it_must_be() {
    for (v, says) in [
        (json!({"task": 5}), "\"task\" must be a string, got 5"),
        (
            json!({"task": "x", "limit": -1}),
            "\"limit\" must be a non-negative integer, got -1",
        ),
        (
            json!({"task": "x", "limit": "3"}),
            "\"limit\" must be a non-negative integer, got \"3\"",
        ),
    ] {
        assert_eq!(parse::<RouteArgs>(&args(v)).unwrap_err().to_string(), says);
    }
    let e = parse::<ExecuteArgs>(&args(json!({"tool": "s/t", "arguments": [1]})))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "\"arguments\" must be an object, got [1]");
    let e = parse::<ExecuteArgs>(&args(json!({"tool": "s/t", "fields": ["a", 2]})))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "\"fields\" must be a list of strings, got [\"a\",2]");
    let e = parse::<ContinueArgs>(&args(json!({"operationId": "o", "cancel": "yes"})))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "\"cancel\" must be true or false, got \"yes\"");
    // A long wrong value is cut in the message.
    let e = parse::<RouteArgs>(&args(json!({"server": ["x".repeat(500)]})))
        .unwrap_err()
        .to_string();
    assert!(e.len() < 200 && e.ends_with("..."), "{e}");
}

#[test]
fn a_missing_required_key_says_what_it_is() {
    let e = parse::<ExecuteCodeArgs>(&args(json!({"input": 1})))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "\"code\" is required: A JavaScript program (a body that may await and return, or an \
         async function of input)"
    );
    let e = parse::<ExecuteCodeArgs>(&args(json!({"code": null})))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("\"code\" is required"), "{e}");
    let e = parse::<ProposeArgs>(&args(json!({"runId": "r", "name": "n"})))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("\"description\" is required: what the skill does"),
        "{e}"
    );
}

#[test]
fn serde_itself_refuses_unknown_keys() {
    // deny_unknown_fields: the types refuse a key even where `parse`'s check is skipped.
    let r: Result<ContinueArgs, _> = serde_json::from_value(json!({"cursor": "c", "x": 1}));
    assert!(r.unwrap_err().to_string().contains("unknown field `x`"));
}
