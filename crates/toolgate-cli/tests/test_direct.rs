//! Direct mode end to end: a real client, a real gateway, real fixture upstreams (one a
//! stdio child, one over HTTP), over both front transports.

mod common;
use common::*;
use serde_json::json;

fn config(dir: &TestDir, beta_url: &str) -> std::path::PathBuf {
    let beta = format!("[upstreams.beta]\nurl = {beta_url:?}\n");
    dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[]), beta],
    )
}

async fn scenario(client: &Client) {
    let names = tool_names(client).await;
    assert_eq!(names.len(), 5, "{names:?}");
    for n in [
        "alpha_add_numbers",
        "alpha_echo",
        "alpha_status",
        "beta_status",
    ] {
        assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
    }
    // `get.report` has a character models reject, so its name carries a stable hash.
    let report = names
        .iter()
        .find(|n| n.starts_with("beta_get_report_"))
        .expect("hashed name");
    assert!(report.len() <= 64);

    let r = call(client, "alpha_echo", json!({"message": "hi there"})).await;
    assert_ne!(r.is_error, Some(true));
    let echoed: serde_json::Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(echoed["tool"], "echo");
    assert_eq!(echoed["server"], "alpha");
    assert_eq!(echoed["arguments"], json!({"message": "hi there"}));
    assert_eq!(
        r.structured_content.as_ref().unwrap()["arguments"]["message"],
        "hi there"
    );

    // structuredContent follows the tool's outputSchema.
    let r = call(client, "alpha_add_numbers", json!({"a": 2, "b": 3})).await;
    assert!(
        r.structured_content.as_ref().unwrap()["sum"].is_i64(),
        "{r:?}"
    );

    // The upstream's HTTP transport works for the other server.
    let r = call(client, report, json!({"quarter": "Q3"})).await;
    assert!(text(&r).contains("get.report"), "{}", text(&r));

    // isError and its message come through untouched.
    let r = call(client, "beta_status", json!({"_error": "disk on fire"})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("disk on fire"));

    // An unknown name is a clear tool error that suggests the right one.
    let r = call(client, "alpha_ech", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).contains("Unknown tool") && text(&r).contains("alpha_echo"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn direct_over_stdio() {
    let dir = TestDir::new();
    let beta = HttpFixture::start(&dir, "beta");
    let (client, _n) = connect_stdio(&config(&dir, &beta.url), &[]).await;
    scenario(&client).await;
    client.cancel().await.unwrap();
    drop(beta);
    assert!(
        wait_no_processes(&dir).await.is_empty(),
        "upstream processes left behind"
    );
}

#[tokio::test]
async fn direct_over_http() {
    let dir = TestDir::new();
    let beta = HttpFixture::start(&dir, "beta");
    let mut gw = HttpGateway::start(&config(&dir, &beta.url), &[]);
    let (client, _n) = connect_http(&gw.url).await;
    scenario(&client).await;
    // The direct endpoint exists beside /mcp whatever the configured mode.
    let (direct, _n2) = connect_http(&format!("{}/mcp/direct", gw.base())).await;
    assert_eq!(tool_names(&direct).await.len(), 5);
    client.cancel().await.unwrap();
    direct.cancel().await.unwrap();
    assert!(gw.stop().success());
    drop(beta);
    assert!(
        wait_no_processes(&dir).await.is_empty(),
        "upstream processes left behind"
    );
}
