//! Command-line behaviour: server selection errors, clean shutdown on stdin close and SIGTERM.
mod common;

use std::process::Stdio;

use common::{command, spawn_http, temp_file};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test]
async fn an_unknown_server_lists_the_known_ones() -> anyhow::Result<()> {
    let output = command(&["--demo", "--server", "nope"])
        .stderr(Stdio::piped())
        .output()
        .await?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for server in [
        "tickets", "docs", "calendar", "mail", "files", "metrics", "deploy",
    ] {
        assert!(stderr.contains(server), "{stderr}");
    }
    Ok(())
}

#[tokio::test]
async fn colliding_names_across_servers_need_a_server() -> anyhow::Result<()> {
    let output = command(&["--demo"]).stderr(Stdio::piped()).output().await?;
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("\"search\""));
    Ok(())
}

#[tokio::test]
async fn a_missing_catalog_is_an_error() -> anyhow::Result<()> {
    let missing = temp_file("x", "").with_extension("missing");
    let status = command(&["--catalog", missing.to_str().unwrap()])
        .status()
        .await?;
    assert!(!status.success());
    let status = command(&[]).stderr(Stdio::null()).status().await?;
    assert_eq!(status.code(), Some(2), "clap usage error");
    Ok(())
}

#[tokio::test]
async fn stdio_exits_zero_when_stdin_closes() -> anyhow::Result<()> {
    let mut child = command(&["--demo", "--server", "docs"]).spawn()?;
    drop(child.stdin.take());
    assert!(child.wait().await?.success());
    Ok(())
}

#[tokio::test]
async fn http_exits_zero_on_sigterm() -> anyhow::Result<()> {
    let (mut child, url) = spawn_http(&["--demo", "--server", "docs"]).await?;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let pid = child.id().expect("running").to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await?;
    assert!(killed.success());
    assert!(child.wait().await?.success());
    Ok(())
}

#[tokio::test]
async fn stdio_exits_zero_on_sigterm_with_stdin_open() -> anyhow::Result<()> {
    let mut child = command(&["--demo", "--server", "docs"]).spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    // One answered initialize proves the fixture is up (and its signal handler installed).
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    assert!(lines
        .next_line()
        .await?
        .is_some_and(|line| line.contains("\"id\":1")));
    let pid = child.id().expect("running").to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await?;
    assert!(killed.success());
    assert!(
        child.wait().await?.success(),
        "stdin still open: SIGTERM alone ends it"
    );
    drop(stdin);
    Ok(())
}
