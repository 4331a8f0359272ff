//! `_delay_ms` holds the answer back, and is not echoed.
//!
//! Shown by order, not by a stopwatch: a call delayed by a minute and a plain call sent
//! after it, side by side on one session; the plain one answers first, and the delayed one
//! is still unanswered then. (The delay's length is checked on tokio's paused clock, in
//! `server.rs`.)
mod common;

use common::{connect, demo, refs, text_of, TRANSPORTS};
use serde_json::{json, Value};

#[tokio::test]
async fn a_delayed_call_answers_after_a_plain_one_sent_later() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("files"))).await?;
        {
            let delayed = session.call("read_file", json!({"path": "/a.txt", "_delay_ms": 60_000}));
            tokio::pin!(delayed);
            let plain = session.call("read_file", json!({"path": "/a.txt"}));
            tokio::pin!(plain);
            let plain_result = tokio::select! {
                biased;
                r = &mut delayed => panic!("{transport:?}: the delayed call answered first: {r:?}"),
                r = &mut plain => r?,
            };
            let echo: Value = serde_json::from_str(&text_of(&plain_result))?;
            assert_eq!(
                echo["arguments"],
                json!({"path": "/a.txt"}),
                "{transport:?}"
            );
            // Two more round trips, and the delayed call is still unanswered.
            for _ in 0..2 {
                session.call("read_file", json!({"path": "/a.txt"})).await?;
            }
            assert!(
                futures::poll!(&mut delayed).is_pending(),
                "{transport:?}: the delayed call answered without its delay"
            );
        }
        session.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn the_delay_is_not_echoed() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("files"))).await?;
        let result = session
            .call("read_file", json!({"path": "/a.txt", "_delay_ms": 1}))
            .await?;
        let echo: Value = serde_json::from_str(&text_of(&result))?;
        assert_eq!(
            echo["arguments"],
            json!({"path": "/a.txt"}),
            "{transport:?}"
        );
        session.close().await;
    }
    Ok(())
}
