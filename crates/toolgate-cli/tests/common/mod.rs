//! Shared test harness: real `toolgate` processes, real fixture upstreams (the same
//! binary's hidden `fixture` subcommand), real MCP clients (rmcp) over stdio and HTTP.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "A test binary uses a subset; `pub` is for its sibling modules"
)]

pub mod code;
pub mod raw;
pub mod skills;

#[allow(unused_imports, reason = "each test binary uses some of them")]
pub use raw::{message, post_modern, tasks_capabilities, ACCEPT};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::sync::mpsc;

pub fn toolgate() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate"))
}

/// A small catalog over two servers, written for the tests.
pub fn test_catalog() -> Value {
    let obj =
        |props: Value, req: Value| json!({"type": "object", "properties": props, "required": req});
    json!([
        {"server": "alpha", "tool": {"name": "echo", "description": "Echo the message back.",
            "inputSchema": obj(json!({"message": {"type": "string"}}), json!(["message"])),
            "annotations": {"readOnlyHint": true}}},
        {"server": "alpha", "tool": {"name": "add_numbers", "description": "Add two integers.",
            "inputSchema": obj(json!({"a": {"type": "integer"}, "b": {"type": "integer"}}), json!(["a", "b"])),
            "outputSchema": obj(json!({"sum": {"type": "integer"}}), json!(["sum"]))}},
        {"server": "alpha", "tool": {"name": "status", "description": "Report alpha status.",
            "inputSchema": {"type": "object"}}},
        {"server": "beta", "tool": {"name": "status", "description": "Report beta status.",
            "inputSchema": {"type": "object"}}},
        {"server": "beta", "tool": {"name": "get.report", "description": "Fetch the quarterly report as text.",
            "inputSchema": obj(json!({"quarter": {"type": "string", "enum": ["Q1", "Q2", "Q3", "Q4"]}}), json!(["quarter"]))}},
    ])
}

/// A temporary folder holding the catalog and configuration of one test.
pub struct TestDir {
    pub dir: tempfile::TempDir,
}

impl TestDir {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("toolgate-test-")
            .tempdir()
            .unwrap();
        let t = Self { dir };
        t.write("catalog.json", &test_catalog().to_string());
        t
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A TOML upstream table that runs the fixture for `server` as a stdio child.
    pub fn stdio_upstream(&self, name: &str, server: &str, extra: &[&str]) -> String {
        let mut args = vec![
            "fixture".to_string(),
            "--catalog".into(),
            self.path("catalog.json").display().to_string(),
        ];
        args.push("--server".into());
        args.push(server.into());
        args.extend(extra.iter().map(|s| s.to_string()));
        format!(
            "[upstreams.{name}]\ncommand = {:?}\nargs = {:?}\nconnect_timeout_secs = 10\ncall_timeout_secs = 20\n",
            toolgate().display().to_string(),
            args
        )
    }

    /// A TOML upstream table that runs `fixture --conformance` (the conformance suite's
    /// tools, resources and prompts; it samples and elicits) as a stdio child, its server
    /// named `<name>-fx`.
    pub fn conformance_upstream(&self, name: &str) -> String {
        format!(
            "[upstreams.{name}]\ncommand = {:?}\nargs = [\"fixture\", \"--conformance\", \"--server\", \"{name}-fx\"]\n",
            toolgate().display().to_string()
        )
    }

    /// Writes toolgate.toml with a `[gateway]` section and the given upstream tables. The
    /// first request waits up to 30 s for the upstreams to connect (they settle well
    /// before on an idle machine; a loaded CI machine can take more than the 1 s default)
    /// unless `gateway` sets `startup_wait_ms` itself.
    pub fn config(&self, gateway: &str, upstreams: &[String]) -> PathBuf {
        let mut text = format!("[gateway]\n{gateway}\n");
        if !gateway.contains("startup_wait_ms") {
            text.push_str("startup_wait_ms = 30000\n");
        }
        for u in upstreams {
            text.push_str(u);
            text.push('\n');
        }
        self.write("toolgate.toml", &text)
    }

    /// The processes whose command line mentions this test's folder (upstream children).
    pub fn processes(&self) -> Vec<u32> {
        processes_mentioning(&self.dir.path().display().to_string())
    }
}

/// Pids of live (non-zombie) processes whose command line contains `marker`.
pub fn processes_mentioning(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmd).contains(marker) {
            out.push(pid);
        }
    }
    out
}

/// The records of the audit log at `<dir>/audit.jsonl`, in order (none when it is missing).
#[allow(dead_code, reason = "not every test binary reads an audit log")]
pub fn audit_records(dir: &TestDir) -> Vec<Value> {
    std::fs::read_to_string(dir.path("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each audit line is JSON"))
        .collect()
}

/// Waits (bounded) until no process mentions `marker`; returns those still alive.
pub async fn wait_no_processes(dir: &TestDir) -> Vec<u32> {
    for _ in 0..100 {
        let left = dir.processes();
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    dir.processes()
}

/// A client handler that records notifications.
pub struct TestClient {
    pub list_changed: mpsc::UnboundedSender<()>,
    pub progress: mpsc::UnboundedSender<f64>,
}

pub struct Notifications {
    pub list_changed: mpsc::UnboundedReceiver<()>,
    pub progress: mpsc::UnboundedReceiver<f64>,
}

pub fn test_client() -> (TestClient, Notifications) {
    let (a, b) = mpsc::unbounded_channel();
    let (c, d) = mpsc::unbounded_channel();
    (
        TestClient {
            list_changed: a,
            progress: c,
        },
        Notifications {
            list_changed: b,
            progress: d,
        },
    )
}

/// A client that passes the `data` of every `notifications/message` it receives to `logs`
/// (the fixture sends one for its `_log` knob).
pub struct LogWatch {
    pub logs: mpsc::UnboundedSender<Value>,
}

#[expect(
    deprecated,
    reason = "notifications/message: deprecated by SEP-2577, still what upstreams send"
)]
impl ClientHandler for LogWatch {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate-log-tests", "0"),
        )
    }
    async fn on_logging_message(
        &self,
        p: rmcp::model::LoggingMessageNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        let _ = self.logs.send(p.data);
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate-tests", "0"),
        )
    }
    async fn on_tool_list_changed(&self, _c: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }
    async fn on_progress(
        &self,
        p: rmcp::model::ProgressNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(p.progress);
    }
}

pub type Client = RunningService<RoleClient, TestClient>;

/// Starts `toolgate serve --stdio --config FILE [extra]` and connects to it.
pub async fn connect_stdio(config: &Path, extra: &[&str]) -> (Client, Notifications) {
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.arg("serve")
        .arg("--stdio")
        .arg("--config")
        .arg(config)
        .args(extra);
    cmd.stderr(Stdio::inherit());
    let (handler, notes) = test_client();
    let client = handler
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("initialize over stdio");
    (client, notes)
}

/// A `toolgate serve --http` process; SIGTERM and wait on drop.
pub struct HttpGateway {
    pub child: Child,
    pub url: String,
}

impl HttpGateway {
    /// Starts the gateway on 127.0.0.1:0 and reads its address from the banner.
    pub fn start(config: &Path, extra: &[&str]) -> Self {
        Self::start_logging(config, extra, None).0
    }

    /// `start` with `RUST_LOG=filter`; every stderr line of the gateway is also sent to
    /// the receiver, for tests that wait for what the gateway reports.
    pub fn start_logging(
        config: &Path,
        extra: &[&str],
        filter: Option<&str>,
    ) -> (Self, std::sync::mpsc::Receiver<String>) {
        Self::start_with_env(config, extra, filter, &[])
    }

    /// `start_logging` with more environment variables (a store key, say).
    pub fn start_with_env(
        config: &Path,
        extra: &[&str],
        filter: Option<&str>,
        env: &[(&str, &str)],
    ) -> (Self, std::sync::mpsc::Receiver<String>) {
        Self::start_on("127.0.0.1:0", config, extra, filter, env)
    }

    /// `start_with_env` listening on `listen` (e.g. `[::]:0`, dual-stack).
    pub fn start_on(
        listen: &str,
        config: &Path,
        extra: &[&str],
        filter: Option<&str>,
        env: &[(&str, &str)],
    ) -> (Self, std::sync::mpsc::Receiver<String>) {
        let mut cmd = Command::new(toolgate());
        if let Some(f) = filter {
            cmd.env("RUST_LOG", f);
        }
        cmd.envs(env.iter().copied());
        // `serve` over HTTP keeps its state in an embedded store under the user's state
        // folder unless configured: the test's own folder instead, never the user's.
        let state = config.parent().unwrap_or(Path::new(".")).join("state");
        cmd.env("XDG_STATE_HOME", state);
        let mut child = cmd
            .args(["serve", "--http", listen, "--config"])
            .arg(config)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (log_tx, log_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Keep draining stderr for the process's whole life, so it never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[toolgate] {line}");
                let _ = log_tx.send(line.clone());
                if let Some(rest) = line.strip_prefix("MCP endpoint: ") {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("toolgate printed its endpoint");
        (Self { child, url }, log_rx)
    }

    /// The process id (to kill it without a clean shutdown).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_string()
    }

    /// SIGTERM, then wait; returns the exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        for _ in 0..100 {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        self.child.wait().unwrap()
    }
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

pub async fn connect_http(url: &str) -> (Client, Notifications) {
    let (handler, notes) = test_client();
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    let client = handler
        .serve(transport)
        .await
        .expect("initialize over HTTP");
    (client, notes)
}

/// `toolgate tokens --config CONFIG --json EXTRA...`, which must succeed: its report.
pub fn tokens_json(config: &std::path::Path, extra: &[&str]) -> Value {
    let out = std::process::Command::new(toolgate())
        .arg("tokens")
        .arg("--config")
        .arg(config)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The lines of a child's stdout, read as they come.
pub type ChildLines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// `toolgate serve --stdio --config CONFIG`, spoken to line by line: the child (killed
/// when dropped), its stdin and its stdout's lines.
pub fn raw_stdio_gateway(
    config: &Path,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    ChildLines,
) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(toolgate())
        .args(["serve", "--stdio", "--config"])
        .arg(config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (child, stdin, stdout)
}

/// A direct-mode gateway over HTTP in front of the `alpha` stdio fixture, with `limits`
/// as its `[gateway.limits]` table.
pub fn limited_gateway(limits: &str) -> (TestDir, HttpGateway) {
    let dir = TestDir::new();
    let up = dir.stdio_upstream("alpha", "alpha", &[]);
    let config = dir.config(
        &format!("mode = \"direct\"\nstartup_wait_ms = 30000\n[gateway.limits]\n{limits}"),
        &[up],
    );
    let gw = HttpGateway::start(&config, &[]);
    (dir, gw)
}

pub fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

pub async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("calling {name}: {e}"))
}

/// A result's structured content (`null` when it has none).
pub fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// The text of a result without toolgate's own notes (paging hints).
pub fn body(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .filter(|t| !t.starts_with("[toolgate]"))
        .collect()
}

/// The concatenated text blocks of a result.
pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// Sorted tool names, listed by any client.
pub async fn tool_names<H: ClientHandler>(client: &RunningService<RoleClient, H>) -> Vec<String> {
    let mut n: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    n.sort();
    n
}

/// Sends any request and returns the result as JSON (errors as `{"error": message}`).
pub async fn request<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    method: &str,
    params: Value,
) -> Value {
    let r: rmcp::model::ClientRequest =
        serde_json::from_value(json!({"method": method, "params": params})).unwrap();
    match client.send_request(r).await {
        Ok(rmcp::model::ServerResult::EmptyResult(_)) => json!({}),
        Ok(v) => serde_json::to_value(v).unwrap(),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// The rule for a test that needs something optional (a dataset, a Debian program, a
/// browser) which is absent: it says `skipped: WHY` on stderr, past the test harness's
/// capture so `cargo test` shows it, and passes; with `CI` set (where `.ci/run` installs
/// everything) it fails with WHY instead. The caller returns right after.
pub fn skip(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{why} (CI is set, so this fails)"
    );
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// A dataset under `datasets/` (or `TOOLGATE_DATASETS`), or `None` after [`skip`].
pub fn dataset_or_skip(relative: &str) -> Option<std::path::PathBuf> {
    toolgate_core::catalog::dataset(relative)
        .map_err(|why| skip(&why))
        .ok()
}

/// A fixture serving `server` of `dir`'s catalog.json over HTTP on 127.0.0.1:0 (`extra`:
/// more fixture flags, e.g. `--modern-only`); killed on drop.
pub struct HttpFixture {
    pub child: Child,
    pub url: String,
}

impl HttpFixture {
    pub fn start(dir: &TestDir, server: &str) -> Self {
        Self::start_with(dir, server, &[])
    }

    pub fn start_with(dir: &TestDir, server: &str, extra: &[&str]) -> Self {
        let catalog = dir.path("catalog.json");
        let mut args = extra.to_vec();
        args.extend(["--catalog", catalog.to_str().unwrap(), "--server", server]);
        Self::spawn(&args)
    }

    /// `toolgate fixture ARGS --http 127.0.0.1:0`, its address read from its first line.
    pub fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(toolgate())
            .arg("fixture")
            .args(args)
            .args(["--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening ")
            .expect("fixture prints its address")
            .to_string();
        Self { child, url }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
