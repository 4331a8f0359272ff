//! Policy on the direct surface, end to end: tools/list follows the profile (hidden and
//! shadow tools are not listed), tools/call follows the key, over HTTP and stdio.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use serde_json::json;

async fn reader_scenario<H: rmcp::ClientHandler>(c: &KeyedClient<H>, dir: &TestDir) {
    // Hidden (secret_dump) and shadow (forecast) tools are not listed.
    assert_eq!(
        tool_names(c).await,
        vec!["files_delete_file", "files_read_file", "files_write_file"]
    );
    // Listed, but the read-only key may not run a write tool.
    let r = call_on(c, "files_write_file", json!({"path": "/x"})).await;
    assert!(
        is_error(&r) && text(&r).contains("tier \"write\""),
        "{}",
        text(&r)
    );
    // Listed, but outside the key's scopes.
    let r = call_on(c, "files_delete_file", json!({"path": "/x"})).await;
    assert!(
        is_error(&r) && text(&r).contains("scope \"files/delete_file\""),
        "{}",
        text(&r)
    );
    // Hidden, but the key may call it: the exact name runs.
    let r = call_on(c, "files_secret_dump", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    // A near miss suggests only tools this session is shown.
    let r = call_on(c, "files_secret", json!({})).await;
    assert!(
        is_error(&r) && !text(&r).contains("secret_dump"),
        "{}",
        text(&r)
    );
    let r = call_on(c, "files_read", json!({})).await;
    assert!(text(&r).contains("files_read_file"), "{}", text(&r));
    // Shadow: not enabled, with who to ask.
    let r = call_on(c, "newsrv_forecast", json!({"city": "Oslo"})).await;
    assert!(
        is_error(&r) && text(&r).contains("#platform"),
        "{}",
        text(&r)
    );
    let r = call_on(c, "files_read_file", json!({"path": "/etc/motd"})).await;
    assert!(!is_error(&r), "{}", text(&r));

    let last = |tool: &str| {
        calls(dir, tool)
            .pop()
            .unwrap_or_else(|| panic!("{tool} not audited"))
    };
    assert_eq!(last("files/write_file")["decision"], "refused");
    assert_eq!(last("files/delete_file")["decision"], "refused");
    assert_eq!(last("newsrv/forecast")["decision"], "shadow");
    let dump = last("files/secret_dump");
    assert_eq!(
        (
            dump["decision"].as_str(),
            dump["visible"].as_bool(),
            dump["surface"].as_str()
        ),
        (Some("allowed"), Some(false), Some("direct"))
    );
    let read = last("files/read_file");
    assert_eq!(
        (read["outcome"].as_str(), read["key"].as_str()),
        (Some("ok"), Some("reader"))
    );
}

#[tokio::test]
async fn direct_over_http_with_a_read_only_key() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&policy_config(&dir, "direct", ""), &[]);
    let c = connect_as(&gw.url, READER).await;
    reader_scenario(&c, &dir).await;
    c.cancel().await.unwrap();
    // The /mcp/direct endpoint follows the same key and profile.
    let c = connect_as(&format!("{}/mcp/direct", gw.base()), READER).await;
    assert_eq!(tool_names(&c).await.len(), 3);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn direct_over_stdio_as_a_configured_key() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "direct", "");
    let (c, _n) = connect_stdio(&config, &["--key", "reader"]).await;
    reader_scenario(&c, &dir).await;
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_write_key_runs_write_tools_and_pinned_tools_follow_the_key() {
    let dir = TestDir::new();
    let pinned = r#"pinned = ["files/write_file", "files/secret_dump", "newsrv/forecast"]"#;
    let gw = HttpGateway::start(
        &policy_config_with(&dir, "mode = \"guided\"", pinned, ""),
        &[],
    );
    // Pinned tools are listed only when the profile shows them (and not in shadow)...
    let c = connect_as(&gw.url, READER).await;
    assert_eq!(
        tool_names(&c).await,
        vec!["continue", "execute", "files_write_file", "route"]
    );
    // ...and calling one directly is judged by the key like any other call.
    let r = call_on(&c, "files_write_file", json!({"path": "/x"})).await;
    assert!(
        is_error(&r) && text(&r).contains("tier \"write\""),
        "{}",
        text(&r)
    );
    assert_eq!(calls(&dir, "files/write_file")[0]["decision"], "refused");
    c.cancel().await.unwrap();
    let c = connect_as(&gw.url, WRITER).await;
    let r = call_on(&c, "files_write_file", json!({"path": "/x"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    c.cancel().await.unwrap();
    let c = connect_as(&format!("{}/mcp/direct", gw.base()), WRITER).await;
    let r = call_on(&c, "files_write_file", json!({"path": "/x"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    // The writer's scopes exclude secret_dump: an exact name does not get around that.
    let r = call_on(&c, "files_secret_dump", json!({})).await;
    assert!(
        is_error(&r) && text(&r).contains("!files/secret_dump"),
        "{}",
        text(&r)
    );
    c.cancel().await.unwrap();
}

/// `toolgate tokens --json` over the test catalog, optionally under a profile.
fn direct_tokens(dir: &TestDir, config: &std::path::Path, profile: Option<&str>) -> (u64, u64) {
    let mut cmd = std::process::Command::new(toolgate());
    cmd.args(["tokens", "--json", "--catalog"])
        .arg(dir.path("catalog.json"));
    if let Some(p) = profile {
        cmd.args(["--policy-profile", p, "--config"]).arg(config);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["tools"].as_u64().unwrap(),
        v["totals"]["direct"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn the_token_report_and_auto_mode_see_the_profile() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "auto", "");
    let (all_tools, all) = direct_tokens(&dir, &config, None);
    let (reader_tools, reader) = direct_tokens(&dir, &config, Some("reader"));
    assert_eq!(
        (all_tools, reader_tools),
        (5, 3),
        "hidden and shadow tools are not counted"
    );
    assert!(reader < all);
    // Between the two: the reader's view is small enough for direct, the whole catalog is not.
    let gateway = format!(
        "mode = \"auto\"\nauto_threshold_tokens = {}",
        (all + reader) / 2
    );
    let config = policy_config_with(&dir, &gateway, "", "");
    let gw = HttpGateway::start(&config, &[]);
    let c = connect_as(&gw.url, READER).await;
    assert_eq!(
        tool_names(&c).await.len(),
        3,
        "the reader's session is direct"
    );
    c.cancel().await.unwrap();
    let c = connect_as(&gw.url, ADMIN).await;
    assert_eq!(
        tool_names(&c).await,
        vec!["continue", "execute", "route"],
        "the whole catalog is guided"
    );
    c.cancel().await.unwrap();
}
