//! Misbehaviours on demand (`--fault KIND`), for the gateway's supervision tests.

use std::time::Duration;

use clap::ValueEnum;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Exit status of `--fault exit-at-start`.
pub const EXIT_AT_START_CODE: i32 = 3;

/// Lines `flood-stderr` writes at once before slowing to a trickle.
pub const FLOOD_LINES: usize = 10_000;

/// A way to misbehave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "kebab-case")]
pub enum Fault {
    /// Exit with status 3 before reading anything.
    ExitAtStart,
    /// Read the input (stdin, or HTTP requests) but never answer.
    NoInitialize,
    /// Print a non-JSON banner and garbage lines on stdout before and between the
    /// protocol's messages (stdio mode), then serve normally.
    GarbageStdout,
    /// Write 10,000 stderr lines at once, then one every 100 ms, while serving normally.
    FloodStderr,
    /// Serve normally, but every `tools/list` page also lists three tools no client can
    /// use: `malformed_schema` (an `inputSchema` that is a string), one with an empty
    /// name, and a second copy of the page's first tool (see [`malformed_tools`]).
    MalformedTools,
    /// Serve normally, but before answering each `tools/call` send 5,000 log messages
    /// (1 KiB of data each), 500 `tools/list_changed` and 500 `resources/list_changed`
    /// (see [`flood_notifications`]).
    FloodNotifications,
    /// At start, leave two `sleep` grandchildren (shells named `group-grandchild` and
    /// `escaped-grandchild`, the catalog path as their argument): one in the fixture's
    /// process group, one in a session of its own (`setsid`); then serve normally.
    SpawnGrandchildren,
}

/// Starts the `spawn-grandchildren` shells, each marked with `marker` (the catalog path).
pub fn spawn_grandchildren(marker: &str) -> std::io::Result<()> {
    let sleeper = ["-c", "sleep 600; :"];
    std::process::Command::new("/bin/sh")
        .args(sleeper)
        .args(["group-grandchild", marker])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    // setsid(1): the grandchild leaves the fixture's process group and session.
    std::process::Command::new("setsid")
        .arg("/bin/sh")
        .args(sleeper)
        .args(["escaped-grandchild", marker])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    Ok(())
}

/// Log messages `flood-notifications` sends per call.
pub const FLOOD_LOGS: usize = 5_000;
/// `list_changed` notifications of each kind `flood-notifications` sends per call.
pub const FLOOD_LIST_CHANGES: usize = 500;

/// The `flood-notifications` burst, sent on `peer` before a call's answer.
#[expect(
    deprecated,
    reason = "Logging is deprecated by SEP-2577; hostile servers still send it"
)]
pub async fn flood_notifications(peer: &rmcp::Peer<rmcp::RoleServer>) {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    let filler = "x".repeat(1024);
    for i in 0..FLOOD_LOGS {
        let data = serde_json::json!({"flood": i, "filler": filler});
        let p = LoggingMessageNotificationParam::new(LoggingLevel::Info, data)
            .with_logger("toolgate-fixture-flood");
        if peer.notify_logging_message(p).await.is_err() {
            return;
        }
        if i % 10 == 0 {
            let _ = peer.notify_tool_list_changed().await;
            let _ = peer.notify_resource_list_changed().await;
        }
    }
}

/// The tools `malformed-tools` adds to a `tools/list` page whose first tool is `first`.
pub fn malformed_tools(first: Option<&serde_json::Value>) -> Vec<serde_json::Value> {
    let mut bad = vec![
        serde_json::json!({"name": "malformed_schema", "description": "inputSchema is a string",
            "inputSchema": "not an object"}),
        serde_json::json!({"name": "", "description": "empty name",
            "inputSchema": {"type": "object"}}),
    ];
    if let Some(first) = first {
        let mut copy = first.clone();
        copy["description"] = "a second tool with the first tool's name".into();
        bad.push(copy);
    }
    bad
}

/// The banner `garbage-stdout` prints first, in the style of servers that greet on stdout.
pub const GARBAGE_BANNER: &str =
    "Azure MCP Server 0.0.0-fixture starting (transport: stdio) - not JSON";

/// The garbage line written after the `n`th protocol message.
pub fn garbage_line(n: u64) -> String {
    format!("[fixture] garbage line {n}: {{this is not json")
}

/// Writes the `flood-stderr` lines until the process ends.
pub async fn flood_stderr() {
    let mut stderr = tokio::io::stderr();
    let mut n = 0u64;
    loop {
        n += 1;
        let line = format!("[fixture] flood-stderr line {n}: lorem ipsum dolor sit amet\n");
        if stderr.write_all(line.as_bytes()).await.is_err() {
            // Nobody reads stderr any more; flooding further is pointless.
            return;
        }
        if n as usize >= FLOOD_LINES {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `no-initialize` on stdio: consume stdin until it closes, answering nothing.
pub async fn swallow_stdin() -> std::io::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        tracing::debug!(bytes = line.len(), "no-initialize: ignoring a message");
    }
    Ok(())
}
