//! Shared test helpers: spawn the real fixture binary and connect rmcp's client to it over
//! stdio or Streamable HTTP, recording the notifications it sends.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "Each test binary uses a different subset; `pub` is for its modules"
)]
#![expect(
    deprecated,
    reason = "Logging (SEP-2577) is deprecated, yet the `_log` knob uses it"
)]

use std::future::Future;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, RequestMetaObject,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// The fixture binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_toolgate-fixture");

/// Both transports, so each behaviour is checked over each.
pub const TRANSPORTS: [Transport; 2] = [Transport::Stdio, Transport::Http];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

/// A notification the fixture sent.
#[derive(Debug, Clone)]
pub enum Event {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
    ToolListChanged,
}

/// A client handler that forwards notifications to a channel.
#[derive(Clone)]
pub struct Recorder {
    events: mpsc::UnboundedSender<Event>,
}

impl ClientHandler for Recorder {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        let _ = self.events.send(Event::Progress(params));
        std::future::ready(())
    }

    #[expect(
        deprecated,
        reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
    )]
    fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        let _ = self.events.send(Event::Log(params));
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        let _ = self.events.send(Event::ToolListChanged);
        std::future::ready(())
    }
}

/// A connected client, the fixture process behind it, and its notifications.
pub struct Session {
    pub client: RunningService<RoleClient, Recorder>,
    /// Killed on drop, so no test leaves a fixture behind.
    pub child: Child,
    pub events: mpsc::UnboundedReceiver<Event>,
}

impl Session {
    /// Calls `tool` with `arguments` (a JSON object).
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<CallToolResult, ServiceError> {
        self.client.call_tool(params(tool, arguments)).await
    }

    /// Closes the client and waits for the fixture to be gone.
    pub async fn close(mut self) {
        let _ = self.client.cancel().await;
        let _ = self.child.kill().await;
    }
}

/// `tools/call` parameters for `tool` with `arguments`.
pub fn params(tool: &str, arguments: Value) -> CallToolRequestParams {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)
}

/// `params` carrying a progress token.
pub fn params_with_progress(tool: &str, arguments: Value, token: i64) -> CallToolRequestParams {
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::Number(token),
    ));
    let mut params = params(tool, arguments);
    params.meta = Some(meta);
    params
}

/// The fixture command with `args`, every stream piped, killed on drop.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Starts the fixture with `args` and connects rmcp's client over `transport`.
pub async fn connect(transport: Transport, args: &[&str]) -> anyhow::Result<Session> {
    let (events_tx, events) = mpsc::unbounded_channel();
    let recorder = Recorder { events: events_tx };
    match transport {
        Transport::Stdio => {
            let mut child = command(args).spawn()?;
            let stdout = child.stdout.take().expect("piped stdout");
            let stdin = child.stdin.take().expect("piped stdin");
            let client = recorder.serve((stdout, stdin)).await?;
            Ok(Session {
                client,
                child,
                events,
            })
        }
        Transport::Http => {
            let (child, url) = spawn_http(args).await?;
            let client = recorder
                .serve(StreamableHttpClientTransport::from_uri(url))
                .await?;
            Ok(Session {
                client,
                child,
                events,
            })
        }
    }
}

/// Starts the fixture on `--http 127.0.0.1:0` and returns it with the URL it printed.
pub async fn spawn_http(args: &[&str]) -> anyhow::Result<(Child, String)> {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--http", "127.0.0.1:0"]);
    let mut child = command(&all).spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = lines
        .next_line()
        .await?
        .ok_or_else(|| anyhow::anyhow!("the fixture printed nothing"))?;
    let url = line
        .strip_prefix("listening ")
        .ok_or_else(|| anyhow::anyhow!("unexpected first line {line:?}"))?
        .to_owned();
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, url))
}

/// Arguments serving one server of the embedded demo catalog.
pub fn demo(server: &str) -> Vec<String> {
    vec!["--demo".into(), "--server".into(), server.into()]
}

/// Borrowed form of owned arguments.
pub fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A file in the temp directory, removed when dropped (keep it alive while it is used).
pub struct TempFile(PathBuf);

impl std::ops::Deref for TempFile {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempFile {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes `contents` to a fresh file in the temp directory.
pub fn temp_file(name: &str, contents: &str) -> TempFile {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "toolgate-fixture-{}-{n}-{name}",
        std::process::id()
    ));
    std::fs::write(&path, contents).expect("write temp file");
    TempFile(path)
}

/// A small catalog with two servers, an output schema and keys rmcp does not model.
pub const SMALL_CATALOG: &str = r#"[
 {"server": "alpha", "tool": {"name": "echo_me", "description": "Echo.", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}, "execution": {"taskSupport": "optional"}, "annotations": {"readOnlyHint": true, "category": "demo"}, "_meta": {"x": 1}}},
 {"server": "alpha", "tool": {"name": "typed", "description": "Typed output.", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}, "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2}}, "required": ["n", "tags"]}}},
 {"server": "alpha", "tool": {"name": "third", "inputSchema": {"type": "object"}}},
 {"server": "beta", "tool": {"name": "other", "description": "Beta's tool.", "inputSchema": {"type": "object"}}}
]"#;

/// The text of a result's first content block.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// Waits for the next event matching `pick`, skipping others; `None` if the channel closes.
pub async fn next_event<T>(
    events: &mut mpsc::UnboundedReceiver<Event>,
    mut pick: impl FnMut(Event) -> Option<T>,
) -> Option<T> {
    while let Some(event) = events.recv().await {
        if let Some(found) = pick(event) {
            return Some(found);
        }
    }
    None
}
