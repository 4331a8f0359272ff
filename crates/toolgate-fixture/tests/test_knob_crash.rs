//! `_crash` kills the fixture mid-call: the process exits with status 70, unanswered.
mod common;

use common::{connect, demo, params, refs, Session, Transport, TRANSPORTS};
use serde_json::json;

#[tokio::test]
async fn crash_exits_the_process_mid_call() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let Session {
            client, mut child, ..
        } = connect(transport, &refs(&demo("files"))).await?;
        let call = client.call_tool(params("read_file", json!({"path": "/a", "_crash": true})));
        tokio::pin!(call);
        // Over HTTP, rmcp's client may keep waiting for a reconnect after the server died;
        // the process exit is what proves the crash, and any answer must be an error.
        let mut answered = false;
        let status = tokio::select! {
            status = child.wait() => status?,
            answer = &mut call => {
                assert!(answer.is_err(), "{transport:?}: a crashed call has no answer: {answer:?}");
                answered = true;
                child.wait().await?
            }
        };
        assert_eq!(
            status.code(),
            Some(toolgate_fixture::server::CRASH_EXIT_CODE),
            "{transport:?}"
        );
        // (A call that already failed above is not polled again.)
        if transport == Transport::Stdio && !answered {
            assert!(call.await.is_err(), "stdio: the pending call fails");
        }
    }
    Ok(())
}
