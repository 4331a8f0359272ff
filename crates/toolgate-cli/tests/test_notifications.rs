//! Notifications through the gateway: an upstream's tools/list_changed refreshes the
//! catalog and reaches the client; progress of a call reaches the caller.

mod common;
use common::*;
use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn upstream_list_changed_refreshes_and_is_passed_on() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let (client, mut notes) = connect_stdio(&config, &[]).await;
    assert!(tool_names(&client)
        .await
        .contains(&"alpha_status".to_string()));
    while notes.list_changed.try_recv().is_ok() {}

    let r = call(
        &client,
        "alpha_echo",
        json!({"message": "m", "_list_changed": true, "_toggle_tool": "status"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true));
    // A notification from the upstream's first connection may still arrive after the
    // drain above, so wait for one after which the list has changed.
    let mut names = Vec::new();
    for _ in 0..5 {
        tokio::time::timeout(Duration::from_secs(10), notes.list_changed.recv())
            .await
            .expect("tools/list_changed reached the client");
        names = tool_names(&client).await;
        if !names.contains(&"alpha_status".to_string()) {
            break;
        }
    }
    assert!(!names.contains(&"alpha_status".to_string()), "{names:?}");
    assert!(names.contains(&"alpha_echo".to_string()));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn progress_reaches_the_caller() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"direct\"",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let (client, mut notes) = connect_stdio(&config, &[]).await;
    let mut params = CallToolRequestParams::new("alpha_echo").with_arguments(args(
        json!({"message": "slow", "_delay_ms": 300, "_progress": 3}),
    ));
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::String("p1".into()),
    )));
    let r = client.call_tool(params).await.unwrap();
    assert_ne!(r.is_error, Some(true));
    let mut seen = Vec::new();
    while let Ok(Some(p)) =
        tokio::time::timeout(Duration::from_secs(2), notes.progress.recv()).await
    {
        seen.push(p);
        if seen.len() == 3 {
            break;
        }
    }
    assert_eq!(seen.len(), 3, "progress notifications: {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "progress increases: {seen:?}"
    );
    client.cancel().await.unwrap();
}
