//! `[direct] profile = "slim"` end to end: the direct surface lists slimmed definitions,
//! route's `full` detail shows the same, and calls are checked and forwarded with the
//! original schema.

mod common;
use common::*;
use serde_json::{json, Value};

const LONG: &str = "Write a note to the journal. The note is stored with a timestamp and \
the author's name. Notes can be read back later with the read tool. This paragraph goes on \
to explain storage details that the model does not need to choose arguments.";

fn catalog() -> Value {
    json!([
        {"server": "alpha", "tool": {"name": "write_note", "description": LONG,
            "title": "Write note",
            "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object", "additionalProperties": false,
                "properties": {"text": {"type": "string", "examples": ["hello"]},
                    "tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["text"]}}},
        {"server": "alpha", "tool": {"name": "echo", "description": "Echo the message back.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                "required": ["message"]}}},
    ])
}

fn config(dir: &TestDir, mode: &str) -> std::path::PathBuf {
    dir.write("catalog.json", &catalog().to_string());
    let direct = "[direct]\nprofile = \"slim\"\n[direct.slim]\ndescription_max = 100\n".to_string();
    dir.config(
        &format!("mode = {mode:?}"),
        &[dir.stdio_upstream("alpha", "alpha", &[]), direct],
    )
}

#[tokio::test]
async fn slim_profile_lists_slimmed_tools_and_calls_with_the_original() {
    let dir = TestDir::new();
    let (client, _n) = connect_stdio(&config(&dir, "direct"), &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    let note = tools
        .iter()
        .find(|t| t.name == "alpha_write_note")
        .expect("listed");
    let listed = serde_json::to_value(note).unwrap();
    assert!(listed["inputSchema"].get("$schema").is_none(), "{listed}");
    assert!(listed["inputSchema"].get("additionalProperties").is_none());
    assert!(listed["inputSchema"]["properties"]["text"]
        .get("examples")
        .is_none());
    assert!(listed.get("title").is_none(), "{listed}");
    let description = listed["description"].as_str().unwrap();
    assert_eq!(
        description,
        "Write a note to the journal. The note is stored with a timestamp and the author's name."
    );

    // Valid for the original schema: forwarded unchanged under the upstream's own name.
    let r = call(
        &client,
        "alpha_write_note",
        json!({"text": "hi", "tags": ["a"]}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let echoed: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(echoed["tool"], "write_note");
    assert_eq!(echoed["arguments"], json!({"text": "hi", "tags": ["a"]}));
    client.cancel().await.unwrap();
    assert!(wait_no_processes(&dir).await.is_empty());
}

#[tokio::test]
async fn route_full_detail_shows_the_profile_and_execute_validates_the_original() {
    let dir = TestDir::new();
    let (client, _n) = connect_stdio(&config(&dir, "guided"), &[]).await;
    let r = call(
        &client,
        "route",
        json!({"task": "alpha/write_note", "detail": "full"}),
    )
    .await;
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["decision"], "select", "{s}");
    assert!(s["inputSchema"].get("$schema").is_none(), "{s}");
    assert!(s["inputSchema"].get("additionalProperties").is_none());
    assert_eq!(s["inputSchema"]["required"], json!(["text"]));
    let sel = s["selectionId"].as_str().unwrap().to_string();

    // The slim schema dropped `additionalProperties: false`; the original still refuses.
    let bad = call(
        &client,
        "execute",
        json!({"selectionId": sel, "arguments": {"text": "x", "colour": "red"}}),
    )
    .await;
    assert_eq!(bad.is_error, Some(true), "{bad:?}");
    assert!(text(&bad).contains("colour"), "{}", text(&bad));
    let ok = call(
        &client,
        "execute",
        json!({"selectionId": sel, "arguments": {"text": "x"}}),
    )
    .await;
    assert_ne!(ok.is_error, Some(true), "{ok:?}");
    assert!(text(&ok).contains("write_note"), "{}", text(&ok));
    client.cancel().await.unwrap();
    assert!(wait_no_processes(&dir).await.is_empty());
}
