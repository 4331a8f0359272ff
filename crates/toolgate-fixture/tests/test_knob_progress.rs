//! `_progress` sends N progress notifications for a request carrying a progressToken.
mod common;

use common::{connect, demo, next_event, params_with_progress, refs, Event, TRANSPORTS};
use rmcp::model::{NumberOrString, ProgressToken};
use serde_json::json;

#[tokio::test]
async fn progress_notifications_arrive_in_order() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let mut session = connect(transport, &refs(&demo("deploy"))).await?;
        let params = params_with_progress(
            "deploy_service",
            json!({"service": "api", "version": "v1", "environment": "staging", "_progress": 5, "_delay_ms": 250}),
            42,
        );
        let result = session.client.call_tool(params).await?;
        assert_ne!(result.is_error, Some(true));
        let mut seen = Vec::new();
        while seen.len() < 5 {
            let progress = next_event(&mut session.events, |event| match event {
                Event::Progress(progress) => Some(progress),
                _ => None,
            })
            .await
            .expect("a progress notification");
            assert_eq!(
                progress.progress_token,
                ProgressToken(NumberOrString::Number(42))
            );
            assert_eq!(progress.total, Some(5.0));
            seen.push(progress.progress);
        }
        assert_eq!(seen, [1.0, 2.0, 3.0, 4.0, 5.0], "{transport:?}");
        session.close().await;
    }
    Ok(())
}
