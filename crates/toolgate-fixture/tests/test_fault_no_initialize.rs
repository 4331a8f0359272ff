//! `--fault no-initialize` reads its input but never answers, on stdio and on HTTP.
mod common;

use std::time::Duration;

use common::{command, connect, demo, refs, TRANSPORTS};
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn initialize_never_completes() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let mut args = demo("mail");
        args.extend(["--fault".into(), "no-initialize".into()]);
        let attempt =
            tokio::time::timeout(Duration::from_secs(2), connect(transport, &refs(&args))).await;
        assert!(
            attempt.is_err(),
            "{transport:?}: initialize must not complete"
        );
    }
    Ok(())
}

#[tokio::test]
async fn stdio_exits_cleanly_when_stdin_closes() -> anyhow::Result<()> {
    let mut child = command(&["--demo", "--server", "mail", "--fault", "no-initialize"]).spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n")
        .await?;
    drop(stdin);
    assert!(child.wait().await?.success());
    Ok(())
}
