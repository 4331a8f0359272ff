//! Skills on the direct surface: a caller with code mode sees each skill it is offered as a
//! tool `skills_<name>` with the skill's input schema, and calling it runs the skill (input
//! validated, tool calls under the caller's authorization); a caller without code mode sees
//! and runs none.

mod common;
use common::code::*;
use common::skills::*;
use common::*;
use serde_json::json;

#[tokio::test]
async fn skills_are_tools_on_the_direct_surface_for_callers_with_code_mode() {
    let (_dir, config) = skills_setup(
        "profiles = [\"coders\"]",
        "[policy.profiles.coders]\ntools = [\"*\"]\n",
    );
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("mode = \"guided\"", "mode = \"direct\""),
    )
    .unwrap();

    let (coder, _) = connect_stdio(&config, &["--profile", "coders"]).await;
    let listed = coder.list_all_tools().await.unwrap();
    let greet = listed
        .iter()
        .find(|t| t.name == "skills_greet")
        .expect("the skill is listed");
    assert_eq!(
        greet.input_schema.get("required"),
        Some(&json!(["who"])),
        "{greet:?}"
    );
    assert!(listed.iter().any(|t| t.name == "alpha_echo"), "tools stay");

    let r = call(&coder, "skills_greet", json!({"who": "ann"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(structured(&r)["result"], json!({"said": "hi ann"}), "{r:?}");
    assert_eq!(structured(&r)["skill"], "greet");
    let bad = call(&coder, "skills_greet", json!({"who": 7})).await;
    assert_eq!(bad.is_error, Some(true));
    assert!(text_of(&bad).contains("/who"), "{}", text_of(&bad));

    // Without code mode (no profile here), no skill is listed or run.
    let (plain, _) = connect_stdio(&config, &[]).await;
    let names = tool_names(&plain).await;
    assert!(names.iter().all(|n| !n.starts_with("skills_")), "{names:?}");
    assert!(names.iter().any(|n| n == "alpha_echo"));
    let r = call(&plain, "skills_greet", json!({"who": "ann"})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(!text_of(&r).contains("hi ann"), "{}", text_of(&r));
    coder.cancel().await.unwrap();
    plain.cancel().await.unwrap();
}

fn text_of(r: &rmcp::model::CallToolResult) -> String {
    text(r)
}
