//! `--fault exit-at-start` exits with status 3 before reading anything.
mod common;

use common::{command, connect, demo, refs, Transport};

#[tokio::test]
async fn exits_with_status_3() -> anyhow::Result<()> {
    let status = command(&["--demo", "--server", "mail", "--fault", "exit-at-start"])
        .status()
        .await?;
    assert_eq!(status.code(), Some(3));
    Ok(())
}

#[tokio::test]
async fn a_client_cannot_initialize() -> anyhow::Result<()> {
    let mut args = demo("mail");
    args.extend(["--fault".into(), "exit-at-start".into()]);
    assert!(connect(Transport::Stdio, &refs(&args)).await.is_err());
    Ok(())
}
