//! `_list_changed` (with `_toggle_tool`) hides or shows a tool and notifies the client.
mod common;

use common::{connect, demo, next_event, refs, Event, TRANSPORTS};
use serde_json::json;

#[tokio::test]
async fn toggling_a_tool_changes_the_list_and_notifies() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let mut session = connect(transport, &refs(&demo("docs"))).await?;
        let before = session.client.list_all_tools().await?.len();
        session
            .call(
                "search",
                json!({"query": "x", "_list_changed": true, "_toggle_tool": "delete_page"}),
            )
            .await?;
        next_event(&mut session.events, |event| {
            matches!(event, Event::ToolListChanged).then_some(())
        })
        .await
        .expect("tools/list_changed");
        let after = session.client.list_all_tools().await?;
        assert_eq!(after.len(), before - 1, "{transport:?}");
        assert!(after.iter().all(|tool| tool.name != "delete_page"));
        assert!(
            session
                .call("delete_page", json!({"path": "/a"}))
                .await
                .is_err(),
            "hidden tools cannot be called"
        );

        session
            .call(
                "search",
                json!({"query": "x", "_list_changed": true, "_toggle_tool": "delete_page"}),
            )
            .await?;
        next_event(&mut session.events, |event| {
            matches!(event, Event::ToolListChanged).then_some(())
        })
        .await
        .expect("tools/list_changed");
        assert_eq!(session.client.list_all_tools().await?.len(), before);

        // Without a tool to toggle, it simply notifies.
        session
            .call("search", json!({"query": "x", "_list_changed": true}))
            .await?;
        next_event(&mut session.events, |event| {
            matches!(event, Event::ToolListChanged).then_some(())
        })
        .await
        .expect("tools/list_changed");
        session.close().await;
    }
    Ok(())
}
