//! `_error` answers a tool result with `isError: true` and the given message.
mod common;

use common::{connect, demo, refs, text_of, TRANSPORTS};
use serde_json::json;

#[tokio::test]
async fn error_knob_gives_an_error_result() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("calendar"))).await?;
        let result = session
            .call(
                "cancel_event",
                json!({"event_id": "e1", "_error": "event e1 is locked"}),
            )
            .await?;
        assert_eq!(result.is_error, Some(true), "{transport:?}");
        assert_eq!(text_of(&result), "event e1 is locked");
        // A knob with a wrong type is the caller's mistake: an error result, not a crash.
        let bad = session
            .call("cancel_event", json!({"_delay_ms": "soon"}))
            .await?;
        assert_eq!(bad.is_error, Some(true));
        assert!(text_of(&bad).contains("_delay_ms"));
        session.close().await;
    }
    Ok(())
}
