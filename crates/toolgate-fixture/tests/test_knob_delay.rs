//! `_delay_ms` delays the answer by at least that long, and is not echoed.
mod common;

use std::time::{Duration, Instant};

use common::{connect, demo, refs, text_of, TRANSPORTS};
use serde_json::{json, Value};

#[tokio::test]
async fn a_delayed_call_takes_at_least_its_delay() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("files"))).await?;
        let started = Instant::now();
        let result = session
            .call("read_file", json!({"path": "/a.txt", "_delay_ms": 300}))
            .await?;
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "{transport:?}"
        );
        let echo: Value = serde_json::from_str(&text_of(&result))?;
        assert_eq!(echo["arguments"], json!({"path": "/a.txt"}));
        session.close().await;
    }
    Ok(())
}
