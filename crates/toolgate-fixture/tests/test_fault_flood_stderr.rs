//! `--fault flood-stderr` writes at least 10,000 stderr lines while serving normally.
mod common;

use std::process::Stdio;

use common::{command, demo, refs};
use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn serves_while_flooding_stderr() -> anyhow::Result<()> {
    let mut args = demo("calendar");
    args.extend(["--fault".into(), "flood-stderr".into()]);
    let mut child = command(&refs(&args)).stderr(Stdio::piped()).spawn()?;
    let stderr = child.stderr.take().unwrap();
    let (reached_tx, reached) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        let mut flood = 0usize;
        let mut reached_tx = Some(reached_tx);
        // Keeps draining after the count is reached, so the fixture never blocks on the pipe.
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("flood-stderr line") {
                flood += 1;
                if flood >= toolgate_fixture::faults::FLOOD_LINES {
                    if let Some(tx) = reached_tx.take() {
                        let _ = tx.send(flood);
                    }
                }
            }
        }
    });
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client = ().serve((stdout, stdin)).await?;
    assert_eq!(client.list_all_tools().await?.len(), 9);
    assert!(reached.await? >= toolgate_fixture::faults::FLOOD_LINES);
    // Still serving after the flood.
    assert_eq!(client.list_all_tools().await?.len(), 9);
    let _ = client.cancel().await;
    child.kill().await?;
    Ok(())
}
