//! What the policy tests share: a catalog with every tier, a configuration with profiles,
//! keys and shadow tools, clients that present keys and answer elicitation, and readers
//! for the audit log and the upstream processes.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "A test binary uses a subset; `pub` is for its sibling modules"
)]

use crate::common::*;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Keys of the test configuration (their hashes are what the configuration holds).
pub const READER: &str = "tg_reader_key_for_tests";
pub const WRITER: &str = "tg_writer_key_for_tests";
pub const ADMIN: &str = "tg_admin_key_for_tests";
pub const REVOKED: &str = "tg_revoked_key_for_tests";

/// One server per concern: `files` has a tool of every tier plus one the profile hides;
/// `newsrv` is being introduced in shadow mode.
pub fn policy_catalog() -> Value {
    let obj = |props: Value| json!({"type": "object", "properties": props});
    let path = json!({"path": {"type": "string"}});
    json!([
        {"server": "files", "tool": {"name": "read_file", "description": "Read a file and return its text.",
            "inputSchema": obj(path.clone()), "annotations": {"readOnlyHint": true}}},
        {"server": "files", "tool": {"name": "write_file", "description": "Write text to a file.",
            "inputSchema": obj(path.clone()), "annotations": {"readOnlyHint": false, "destructiveHint": false}}},
        {"server": "files", "tool": {"name": "delete_file", "description": "Delete a file permanently.",
            "inputSchema": obj(path.clone()), "annotations": {"destructiveHint": true}}},
        {"server": "files", "tool": {"name": "secret_dump", "description": "Dump the vault of secrets.",
            "inputSchema": obj(json!({})), "annotations": {"readOnlyHint": true}}},
        {"server": "newsrv", "tool": {"name": "forecast", "description": "Weather forecast for a city.",
            "inputSchema": obj(json!({"city": {"type": "string"}})), "annotations": {"readOnlyHint": true}}},
    ])
}

pub fn hash(key: &str) -> String {
    format!("sha256:{}", hex(&toolgate::hash_key(key)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the catalog and a configuration in `mode` with profiles, keys, shadow and audit.
pub fn policy_config(dir: &TestDir, mode: &str, extra_policy: &str) -> PathBuf {
    policy_config_with(dir, &format!("mode = {mode:?}"), "", extra_policy)
}

/// `policy_config` with the `[gateway]` lines given and more `[guided]` settings.
pub fn policy_config_with(
    dir: &TestDir,
    gateway: &str,
    guided: &str,
    extra_policy: &str,
) -> PathBuf {
    dir.write("catalog.json", &policy_catalog().to_string());
    let policy = format!(
        r#"[guided]
wait_secs = 5
{guided}
[policy]
contact = "the platform team (#platform)"
{extra_policy}
[policy.audit]
path = {audit:?}
[policy.tools."newsrv/*"]
shadow = true
[policy.profiles.reader]
tools = ["files/*", "newsrv/*", "!files/secret_dump"]
[policy.keys.reader]
hash = "{r}"
scopes = ["files/*", "newsrv/*", "!files/delete_file"]
tier = "read"
profile = "reader"
[policy.keys.writer]
hash = "{w}"
scopes = ["files/*", "!files/secret_dump"]
tier = "write"
profile = "reader"
[policy.keys.admin]
hash = "{a}"
scopes = ["*"]
tier = "destructive"
approval = true
[policy.keys.old]
hash = "{o}"
scopes = ["*"]
revoked = true
"#,
        audit = dir.path("audit.jsonl").display().to_string(),
        r = hash(READER),
        w = hash(WRITER),
        a = hash(ADMIN),
        o = hash(REVOKED),
    );
    dir.config(
        gateway,
        &[
            policy,
            dir.stdio_upstream("files", "files", &[]),
            dir.stdio_upstream("newsrv", "newsrv", &[]),
        ],
    )
}

/// The audit log's records, in order.
pub fn audit(dir: &TestDir) -> Vec<Value> {
    audit_records(dir)
}

/// The call records for `server/tool`, one per call: how it ended (a call that ran also has
/// a `phase: "start"` record, written before it ran; those are left out here).
pub fn calls(dir: &TestDir, tool: &str) -> Vec<Value> {
    audit(dir)
        .into_iter()
        .filter(|r| {
            r["type"] == "call"
                && r["phase"] != "start"
                && format!(
                    "{}/{}",
                    r["server"].as_str().unwrap(),
                    r["tool"].as_str().unwrap()
                ) == tool
        })
        .collect()
}

/// A client that may answer elicitation: `Some(action)` declares the capability and
/// answers with it; `None` declares no capability. Records each question and how many
/// allowed calls of the tool the audit log held when it was asked.
pub struct Approving {
    pub answer: Option<ElicitationAction>,
    pub audit: PathBuf,
    pub asked: Arc<Mutex<Vec<(String, usize)>>>,
}

impl ClientHandler for Approving {
    fn get_info(&self) -> ClientConfig {
        let caps: ClientCapabilities = match self.answer {
            Some(_) => serde_json::from_value(json!({"elicitation": {}})).unwrap(),
            None => ClientCapabilities::default(),
        };
        ClientConfig::new(caps, Implementation::new("toolgate-policy-tests", "0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            _ => String::new(),
        };
        let ran_before = std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                l.contains("\"delete_file\"")
                    && l.contains("\"allowed\"")
                    && !l.contains("\"phase\":\"start\"")
            })
            .count();
        self.asked.lock().unwrap().push((message, ran_before));
        Ok(ElicitResult::new(
            self.answer.clone().unwrap_or(ElicitationAction::Decline),
        ))
    }
}

pub type KeyedClient<H> = RunningService<RoleClient, H>;

/// Connects over HTTP presenting `key` (if any) as a bearer token.
pub async fn connect_keyed<H: ClientHandler>(
    url: &str,
    key: Option<&str>,
    handler: H,
) -> KeyedClient<H> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(k) = key {
        config = config.auth_header(k);
    }
    handler
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize over HTTP with a key")
}

/// A keyed client with the plain test handler.
pub async fn connect_as(url: &str, key: &str) -> KeyedClient<TestClient> {
    connect_keyed(url, Some(key), test_client().0).await
}

/// Pids of the fixture process serving `server` for this test.
pub fn upstream_pids(dir: &TestDir, server: &str) -> Vec<u32> {
    dir.processes()
        .into_iter()
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(" fixture ") && cmd.contains(&format!("--server {server}"))
        })
        .collect()
}

/// `tools/call` on any client.
pub async fn call_on<H: ClientHandler>(
    client: &KeyedClient<H>,
    name: &str,
    arguments: Value,
) -> rmcp::model::CallToolResult {
    client
        .call_tool(
            rmcp::model::CallToolRequestParams::new(name.to_string())
                .with_arguments(args(arguments)),
        )
        .await
        .unwrap_or_else(|e| panic!("calling {name}: {e}"))
}

pub fn is_error(r: &rmcp::model::CallToolResult) -> bool {
    r.is_error == Some(true)
}

/// Starts `toolgate serve --stdio --config FILE [extra]` with any client handler.
pub async fn connect_stdio_with<H: ClientHandler>(
    config: &std::path::Path,
    extra: &[&str],
    handler: H,
) -> KeyedClient<H> {
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.arg("serve")
        .arg("--stdio")
        .arg("--config")
        .arg(config)
        .args(extra);
    cmd.stderr(std::process::Stdio::inherit());
    handler
        .serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("initialize over stdio")
}
