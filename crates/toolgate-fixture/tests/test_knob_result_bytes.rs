//! `_result_bytes` answers one text block of exactly N bytes of deterministic lines.
mod common;

use common::{connect, demo, refs, text_of, TRANSPORTS};
use serde_json::json;

#[tokio::test]
async fn text_has_exactly_the_requested_size() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("deploy"))).await?;
        for bytes in [0u64, 1, 100, 65_537, 1_000_000] {
            let result = session
                .call(
                    "get-logs",
                    json!({"service": "api", "_result_bytes": bytes}),
                )
                .await?;
            assert_eq!(result.content.len(), 1);
            let text = text_of(&result);
            assert_eq!(text.len() as u64, bytes, "{transport:?}");
            assert_eq!(
                result.structured_content, None,
                "no echo object for sized results"
            );
            if bytes >= 100 {
                assert!(
                    text.starts_with("000001 get-logs: "),
                    "readable numbered lines"
                );
            }
            let again = session
                .call(
                    "get-logs",
                    json!({"service": "other", "_result_bytes": bytes}),
                )
                .await?;
            assert_eq!(text_of(&again), text, "deterministic");
        }
        session.close().await;
    }
    Ok(())
}
