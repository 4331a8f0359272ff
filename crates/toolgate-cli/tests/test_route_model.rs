//! `guided.route_model`: route fuses BM25F with sentence embeddings in the gateway. A build
//! without the `embed` feature refuses the key with what to do; a build with it (run with
//! `cargo test --release -p toolgate-cli --features embed --test test_route_model` and
//! `TOOLGATE_EMBED_MODEL` set, see scripts/fetch-embed-model.sh) routes a paraphrase that
//! shares no word with its tool.

mod common;
use common::*;
use serde_json::json;

fn check(config: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(toolgate())
        .args(["check", "--config"])
        .arg(config)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn shop_config(dir: &TestDir, guided: &str) -> std::path::PathBuf {
    let catalog = json!([
        {"server": "shop", "tool": {"name": "get_discounts", "description": "Lists the current discounts of a store.",
            "inputSchema": {"type": "object", "properties": {"store": {"type": "string"}}, "required": ["store"]}}},
        {"server": "shop", "tool": {"name": "get_weather", "description": "Weather forecast for a city.",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"server": "shop", "tool": {"name": "track_parcel", "description": "Where a parcel is now, by tracking number.",
            "inputSchema": {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]}}},
    ]);
    dir.write("catalog.json", &catalog.to_string());
    dir.config(
        "mode = \"guided\"",
        &[
            format!("[guided]\n{guided}\n"),
            dir.stdio_upstream("shop", "shop", &[]),
        ],
    )
}

#[cfg(not(feature = "embed"))]
#[test]
fn without_the_embed_feature_the_key_says_how_to_get_it() {
    let dir = TestDir::new();
    let (ok, err) = check(&shop_config(&dir, "route_model = \"model\""));
    assert!(!ok);
    assert!(
        err.contains("guided.route_model") && err.contains("--features embed"),
        "{err}"
    );
}

#[cfg(feature = "embed")]
#[test]
fn a_missing_model_file_is_named() {
    let dir = TestDir::new();
    std::fs::create_dir(dir.path("model")).unwrap();
    let (ok, err) = check(&shop_config(&dir, "route_model = \"model\""));
    assert!(!ok);
    assert!(
        err.contains("guided.route_model") && err.contains("config.json is missing"),
        "{err}"
    );
}

#[cfg(feature = "embed")]
#[tokio::test]
async fn route_finds_a_paraphrase_with_the_model() {
    let Some(model) = std::env::var_os(toolgate_route::MODEL_ENV) else {
        return common::skip(&format!(
            "set {} to the model folder (scripts/fetch-embed-model.sh DIR prints it)",
            toolgate_route::MODEL_ENV
        ));
    };
    let task = json!({"task": "any coupons I could use at Macy's?"});
    let first = |s: &serde_json::Value| {
        s["name"]
            .as_str()
            .or(s["candidates"][0]["name"].as_str())
            .map(str::to_string)
    };
    // BM25F alone: no word of the task is in any tool.
    let dir = TestDir::new();
    let (plain, _) = connect_stdio(&shop_config(&dir, ""), &[]).await;
    let r = call(&plain, "route", task.clone()).await;
    let s = r.structured_content.clone().unwrap();
    assert_ne!(first(&s).as_deref(), Some("get_discounts"), "{s}");
    plain.cancel().await.unwrap();
    // With the model: the discounts tool comes first.
    let guided = format!("route_model = {:?}", model.to_string_lossy());
    let (hybrid, _) = connect_stdio(&shop_config(&dir, &guided), &[]).await;
    let r = call(&hybrid, "route", task).await;
    let s = r.structured_content.clone().unwrap();
    assert_eq!(first(&s).as_deref(), Some("get_discounts"), "{s}");
    hybrid.cancel().await.unwrap();
}
