//! `_progress` sends N progress notifications for a request carrying a progressToken.
mod common;

use common::{connect, demo, next_event, params_with_progress, refs, Event, TRANSPORTS};
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
        let mut first_token = None;
        while seen.len() < 5 {
            let progress = next_event(&mut session.events, |event| match event {
                Event::Progress(progress) => Some(progress),
                _ => None,
            })
            .await
            .expect("a progress notification");
            // rmcp's client assigns its own token to each request; it stays the same per call.
            let token = first_token.get_or_insert_with(|| progress.progress_token.clone());
            assert_eq!(&progress.progress_token, token);
            assert_eq!(progress.total, Some(5.0));
            seen.push(progress.progress);
        }
        assert_eq!(seen, [1.0, 2.0, 3.0, 4.0, 5.0], "{transport:?}");
        session.close().await;
    }
    Ok(())
}
