//! `_log` sends a logging notification carrying the given value.
#![expect(
    deprecated,
    reason = "Logging (SEP-2577) is deprecated, yet the `_log` knob uses it"
)]
mod common;

use common::{connect, demo, next_event, refs, Event, TRANSPORTS};
use serde_json::json;

#[tokio::test]
async fn log_knob_sends_a_log_message() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let mut session = connect(transport, &refs(&demo("metrics"))).await?;
        session
            .call("list_alerts", json!({"_log": "checking alerts"}))
            .await?;
        let log = next_event(&mut session.events, |event| match event {
            Event::Log(log) => Some(log),
            _ => None,
        })
        .await
        .expect("a log message");
        assert_eq!(log.data, json!("checking alerts"), "{transport:?}");
        assert_eq!(log.logger.as_deref(), Some("toolgate-fixture"));
        session.close().await;
    }
    Ok(())
}
