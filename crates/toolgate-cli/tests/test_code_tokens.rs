//! `toolgate tokens` counts the code-mode surface as a code-mode session lists it: the
//! same tools (with skills: propose_skill too) and instructions a live session sends,
//! counted from that session's own tools/list; the simulation's code loop carries it.

mod common;
use common::skills::skills_setup;
use common::*;
use serde_json::json;
use toolgate_route::shape::openai_form;
use toolgate_route::shape::Encoding;

#[tokio::test]
async fn the_code_column_is_what_a_code_mode_session_with_skills_lists() {
    let (dir, config) = skills_setup("", "");
    let (client, _) = connect_stdio(&config, &[]).await;
    let enc = Encoding::O200k;
    let listed = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"propose_skill") && names.contains(&"execute_code"),
        "{names:?}"
    );
    let tools: usize = listed
        .iter()
        .map(|t| {
            let t = serde_json::to_value(t).unwrap();
            enc.count_json(&openai_form(
                t["name"].as_str().unwrap(),
                t["description"].as_str(),
                &t["inputSchema"],
            ))
        })
        .sum();
    let instructions = client.peer_info().unwrap().instructions.clone().unwrap();
    assert!(instructions.contains("propose_skill"), "{instructions}");
    client.cancel().await.unwrap();

    let v = tokens_json(&config, &[]);
    assert_eq!(v["code_skills"], true);
    assert_eq!(v["code_tools"].as_u64(), Some(tools as u64), "{v}");
    assert_eq!(
        v["totals"]["code"].as_u64(),
        Some((tools + enc.count(&instructions)) as u64),
        "{}",
        v["totals"]
    );
    assert!(v["totals"]["code"].as_u64() > v["totals"]["guided"].as_u64());

    // The simulation's code loop carries the same surface (instructions as a system message).
    let queries = dir.write(
        "queries.jsonl",
        "{\"query\": \"echo a message\", \"expected\": [\"alpha/echo\"]}\n",
    );
    let sim = tokens_json(&config, &["--simulate", &queries.display().to_string()]);
    let system = enc.count_json(&json!({"role": "system", "content": instructions}));
    assert_eq!(
        sim["code_surface"].as_u64(),
        Some((tools + system) as u64),
        "{sim}"
    );
}
