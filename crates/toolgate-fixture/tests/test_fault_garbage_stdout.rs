//! `--fault garbage-stdout` prints non-JSON lines on stdout yet still serves MCP.
mod common;

use common::{command, connect, demo, refs, text_of, Transport};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

fn args() -> Vec<String> {
    let mut args = demo("tickets");
    args.extend(["--fault".into(), "garbage-stdout".into()]);
    args
}

#[tokio::test]
async fn rmcp_client_still_works() -> anyhow::Result<()> {
    let session = connect(Transport::Stdio, &refs(&args())).await?;
    assert_eq!(session.client.list_all_tools().await?.len(), 11);
    let result = session.call("get_issue", json!({"key": "WEB-1"})).await?;
    assert!(text_of(&result).contains("WEB-1"));
    session.close().await;
    Ok(())
}

#[tokio::test]
async fn stdout_starts_with_a_non_json_banner() -> anyhow::Result<()> {
    let mut child = command(&refs(&args())).spawn()?;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next_line().await?.expect("a banner");
    assert!(serde_json::from_str::<Value>(&first).is_err(), "{first}");
    let second = lines.next_line().await?.expect("garbage");
    assert!(serde_json::from_str::<Value>(&second).is_err(), "{second}");
    child.kill().await?;
    Ok(())
}
