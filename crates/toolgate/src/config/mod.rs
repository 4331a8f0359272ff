//! Configuration: the TOML file (`raw`), the `mcpServers` JSON import (`mcp_json`), and
//! the validated `Config` every other module reads.
//!
//! Raw forms are deserialized with `deny_unknown_fields`, then normalised into one
//! internal representation here, so nothing else knows which file a setting came from.
//! Every error names the file, the key and what to do about it.

mod checks;
pub(crate) mod code;
pub(crate) mod code_flows;
pub(crate) mod code_workspace;
pub(crate) mod limits;
pub mod mcp_json;
pub(crate) mod raw;
#[cfg(test)]
mod raw_tests;
pub(crate) mod store;
pub mod telemetry;
pub(crate) mod upstream;

pub use crate::config_error::ConfigError;
pub(crate) use crate::config_error::{invalid, Result};

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use toolgate_route::shape::{LocalOptions, ShapeProfile, SlimOptions, SurfaceOptions};

/// The HTTP address `toolgate serve` listens on when none is configured.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8377";
/// The configuration file read when `--config` is not given (if it exists).
pub const DEFAULT_CONFIG_FILE: &str = "toolgate.toml";

/// Which surface a session sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The three meta-tools (route, execute, continue).
    #[default]
    Guided,
    /// Every visible tool, under its exposed name.
    Direct,
    /// Direct when the visible catalog is small (under `auto_threshold_tokens`), else guided.
    Auto,
}

impl Mode {
    /// The name as written in configuration and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Guided => "guided",
            Mode::Direct => "direct",
            Mode::Auto => "auto",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, UnknownMode> {
        match s {
            "guided" => Ok(Mode::Guided),
            "direct" => Ok(Mode::Direct),
            "auto" => Ok(Mode::Auto),
            _ => Err(UnknownMode(s.to_string())),
        }
    }
}

/// A mode name that is not `guided`, `direct` or `auto` (the text given).
#[derive(Debug, thiserror::Error)]
#[error("unknown mode {0:?}: use guided, direct or auto")]
pub struct UnknownMode(pub String);

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the configuration came from (for messages); `None` for the embedded demo.
    pub source: Option<PathBuf>,
    /// `[gateway]`: where and how the gateway serves.
    pub gateway: GatewayConfig,
    /// `[guided]`: route, execute and continue.
    pub guided: GuidedConfig,
    /// What direct mode (and route's `full` detail) shows of each tool.
    pub direct: DirectConfig,
    /// Code mode (`[code]`).
    pub code: code::CodeConfig,
    /// Upstreams by name, sorted (disabled ones included, marked).
    pub upstreams: BTreeMap<String, UpstreamConfig>,
    /// Profiles, keys, approval and audit.
    pub policy: crate::policy::PolicyConfig,
    /// Where handles are kept (`[store]`).
    pub store: store::StoreConfig,
    /// Span export (`[telemetry]`).
    pub telemetry: telemetry::TelemetryConfig,
    /// What was read but not used (keys other clients write in an mcpServers file, other
    /// folders' project entries): shown once when the configuration is loaded.
    pub warnings: Vec<String>,
}

/// Settings of the front (what clients talk to).
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// HTTP listen address; loopback unless configured otherwise.
    pub listen: SocketAddr,
    /// The surface served on `/mcp` and over stdio.
    pub mode: Mode,
    /// In `auto` mode: direct below this many o200k tokens of definitions, guided above.
    pub auto_threshold_tokens: usize,
    /// Prefix for the meta-tool names (e.g. `tg_`), for clients that already have a `route`.
    pub meta_prefix: String,
    /// How long `tools/list` waits at start for slow upstreams before answering with what is up.
    pub startup_wait: Duration,
    /// Largest request body accepted over HTTP.
    pub max_body_bytes: usize,
    /// How long a 2026-07-28 client may cache `tools/list` and the other lists (their
    /// `ttlMs`); list changes are also pushed on `subscriptions/listen`.
    pub list_ttl_ms: u64,
    /// The async runtime's worker threads (`gateway.worker_threads`); `None`: one fewer than
    /// the machine's cores, at least one (`worker_threads`).
    pub worker_threads: Option<usize>,
    /// Host names (besides loopback) accepted in the `Host` header (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// `/metrics` and `/ui` answer peers off loopback too (`gateway.admin_allow_remote`);
    /// by default they answer loopback peers only, whatever `listen` is.
    pub admin_allow_remote: bool,
    /// Timeouts, connection and session caps, the shutdown bound (`[gateway.limits]`).
    pub limits: limits::Limits,
}

/// Settings of guided mode (route, execute, continue).
#[derive(Debug, Clone)]
pub struct GuidedConfig {
    /// Default output budget of one execute/continue answer, in o200k tokens.
    pub budget_tokens: usize,
    /// Tokens one session (a 2026-07-28 client: one principal) may be sent in results and
    /// definitions before execute's answers shrink (`guided.session_budget_tokens`).
    pub session_budget_tokens: Option<usize>,
    /// Budgets for particular tools, by `server/tool`.
    pub tool_budgets: HashMap<String, usize>,
    /// How long execute waits for a call before answering with an operationId.
    pub wait: Duration,
    /// How long cursors and finished operations are kept after last use.
    pub result_ttl: Duration,
    /// Route selects when its confidence reaches this; below, it asks.
    pub route_threshold: f32,
    /// Tools (`server/tool`) listed directly beside the meta-tools.
    pub pinned: Vec<String>,
    /// Add a tool chosen by route to that session's tools/list.
    pub expand_selected: bool,
    /// Example tasks per tool, indexed by route (`guided.route_examples`).
    pub route_examples: Arc<toolgate_route::RouteExamples>,
    /// A sentence-embedding model folder: route fuses BM25F with it (`guided.route_model`,
    /// builds with the `embed` feature).
    pub route_model: Option<PathBuf>,
    /// A question about a task of several steps also lists each step's best tool
    /// (`guided.route_steps`; off by default: measured, it costs more tokens than it saves).
    pub route_steps: bool,
    /// What route learns from the models' choices (`[guided.learning]`).
    pub learning: toolgate_route::LearningSettings,
}

impl Default for GuidedConfig {
    fn default() -> Self {
        Self {
            budget_tokens: toolgate_core::exec::DEFAULT_BUDGET,
            session_budget_tokens: None,
            tool_budgets: HashMap::new(),
            wait: Duration::from_secs(10),
            result_ttl: Duration::from_secs(600),
            route_threshold: toolgate_route::DEFAULT_THRESHOLD,
            pinned: Vec::new(),
            expand_selected: false,
            route_examples: Arc::default(),
            route_model: None,
            route_steps: false,
            learning: toolgate_route::LearningSettings::default(),
        }
    }
}

/// Settings of the direct surface: which profile the model sees, with its options.
/// Validation and the upstream call always use the original schema.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectConfig {
    /// raw (as the upstreams sent it), slim, or local (slim plus the grammar-safe rewrite).
    pub profile: ShapeProfile,
    /// `[direct.slim]`; also used by `local`, and its per-tool `name`s rename tools everywhere.
    pub slim: SlimOptions,
    /// `[direct.local]`.
    pub local: LocalOptions,
    /// `direct.max_result_tokens`: a direct call's result past this (o200k tokens) is cut
    /// at a clean boundary with a note; `guided.tool_budgets` overrides it per tool.
    pub max_result_tokens: usize,
}

/// `direct.max_result_tokens` unless configured.
pub(crate) const DIRECT_MAX_RESULT_TOKENS: usize = 25_000;

impl Default for DirectConfig {
    fn default() -> Self {
        Self {
            profile: ShapeProfile::default(),
            slim: SlimOptions::default(),
            local: LocalOptions::default(),
            max_result_tokens: DIRECT_MAX_RESULT_TOKENS,
        }
    }
}

impl DirectConfig {
    /// The shape module's options for this configuration (`meta_prefix` names the meta-tools).
    pub fn surface_options(&self, meta_prefix: &str) -> SurfaceOptions {
        SurfaceOptions {
            slim: self.slim.clone(),
            local: self.local.clone(),
            guided_prefix: meta_prefix.to_string(),
        }
    }
}

/// How to reach an upstream.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        /// The program to start (after `${VAR}` substitution).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Set for the child on top of its minimal environment.
        env: BTreeMap<String, String>,
        /// Names of the gateway's own variables passed to the child besides the minimal
        /// ones (`upstream::environment::BASE`); nothing else of the gateway's
        /// environment reaches it.
        inherit_env: Vec<String>,
        /// Its working directory (default: the gateway's).
        cwd: Option<PathBuf>,
    },
    /// An HTTP endpoint: Streamable HTTP, or the legacy HTTP+SSE transport.
    Http {
        /// The endpoint's URL.
        url: String,
        /// `upstreams.NAME.transport`: which HTTP transport the server speaks.
        style: HttpStyle,
        /// Headers sent with every request (e.g. `Authorization`).
        headers: BTreeMap<String, String>,
        /// `[upstreams.NAME.oauth]`: the gateway's own token for this server.
        oauth: Option<upstream::UpstreamOAuth>,
    },
}

/// Which HTTP transport an upstream speaks (`upstreams.NAME.transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpStyle {
    /// Streamable HTTP, falling back to HTTP+SSE when the URL refuses a `POST` (4xx) and
    /// answers a `GET` with an event stream, as the specification's compatibility note
    /// says a client should.
    Auto,
    /// Streamable HTTP only (`transport = "streamable-http"`).
    Streamable,
    /// The legacy HTTP+SSE transport of protocol 2024-11-05 (`transport = "sse"`).
    Sse,
}

/// Default of `upstreams.NAME.max_message_bytes` (16 MiB, rmcp's own default).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// One upstream server.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// The name it is configured under (`[upstreams.NAME]`), the prefix of its tools' exposed names.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// A disabled upstream is kept in the configuration but never started.
    pub enabled: bool,
    /// Limit on spawning/connecting plus `initialize` plus the first `tools/list`.
    pub connect_timeout: Duration,
    /// Limit on one `tools/call`.
    pub call_timeout: Duration,
    /// The largest message accepted from this upstream (a stdio line, an HTTP body or SSE
    /// event); a larger answer fails its call at once, saying so (`max_message_bytes`).
    pub max_message_bytes: usize,
    /// The era the handshake tries first (`protocol`), for servers that speak both.
    pub protocol: UpstreamProtocol,
    /// Prefix of this upstream's exposed tool names (default: its name).
    pub prefix: String,
    /// Exposed-name overrides: upstream tool name -> exposed name.
    pub rename: HashMap<String, String>,
}

/// `upstreams.NAME.protocol`: which revision toolgate speaks to a server that offers both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpstreamProtocol {
    /// `initialize` at 2025-11-25 first (resource subscriptions and log levels pass
    /// through); `server/discover` when the server refuses it.
    #[default]
    Auto,
    /// `server/discover` at 2026-07-28 first (per-request `_meta`; the upstream's
    /// `input_required` reaches the client by MRTR); `initialize` when it is refused.
    Modern,
    /// `initialize` only.
    Legacy,
}

impl Config {
    /// A configuration with no upstreams and every default.
    pub fn empty() -> Self {
        Self {
            source: None,
            gateway: GatewayConfig::default(),
            guided: GuidedConfig::default(),
            direct: DirectConfig::default(),
            code: code::CodeConfig::default(),
            upstreams: BTreeMap::new(),
            policy: Default::default(),
            store: Default::default(),
            telemetry: Default::default(),
            warnings: Vec::new(),
        }
    }

    /// Reads a toolgate TOML file.
    pub fn from_toml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::read(
                format!("cannot read configuration file {}", path.display()),
                e,
            )
        })?;
        Self::from_toml_str(&text, path)
    }

    /// Parses toolgate TOML; `path` is used in messages only.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Self> {
        let raw: raw::RawConfig = toml::from_str(text).map_err(|e| {
            ConfigError::from_reader(format!(
                "{}: {}",
                path.display(),
                human_serde(e.to_string().trim_end()).replace('\n', "\n  ")
            ))
        })?;
        let config = raw.validate(path)?;
        config.check_names()?;
        Ok(config)
    }

    /// Reads an `mcpServers` JSON file (Claude Desktop, Claude Code `.mcp.json`, Cursor, VS Code).
    pub fn from_mcp_json_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::read(format!("cannot read {}", path.display()), e))?;
        mcp_json::parse(&text, path)
    }

    /// Adds the upstreams of `other` (e.g. an imported mcpServers file); a name defined in
    /// both is an error.
    pub fn merge_upstreams(&mut self, other: Config) -> Result<()> {
        let other_name = other.source_name();
        for (name, up) in other.upstreams {
            if self.code.skills_dir.is_some() && name == crate::skills::SKILLS_SERVER {
                invalid!(
                    "upstream {name:?} in {other_name}: that name is reserved for skills while code.skills_dir is set: rename it"
                );
            }
            if self.upstreams.contains_key(&name) {
                invalid!(
                    "upstream {name:?} is defined in {} and in {}: rename one of them",
                    self.source_name(),
                    other
                        .source
                        .as_deref()
                        .map_or("?".into(), |p| p.display().to_string())
                );
            }
            self.upstreams.insert(name, up);
        }
        self.warnings.extend(other.warnings);
        self.check_names()
    }

    /// The configuration's file for messages, or "the built-in demo".
    pub fn source_name(&self) -> String {
        self.source
            .as_deref()
            .map_or("the built-in demo".into(), |p| p.display().to_string())
    }

    /// True for the reserved server name of skills, while skills are on.
    pub fn is_skills_server(&self, name: &str) -> bool {
        self.code.skills_dir.is_some() && name == crate::skills::SKILLS_SERVER
    }

    /// The upstreams that are switched on.
    pub fn enabled_upstreams(&self) -> impl Iterator<Item = &UpstreamConfig> {
        self.upstreams.values().filter(|u| u.enabled)
    }
}

/// One fewer worker thread than the machine has cores, at least one: the stdio upstreams,
/// whose processes spend CPU on every call, and local clients keep a core. On 2 cores, one
/// worker spent about 30% less CPU a call than two, with 4–16% more calls/s at 8 and 64
/// connections (docs/performance.md, "Worker threads").
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.parse().expect("valid default address"),
            mode: Mode::default(),
            auto_threshold_tokens: 2000,
            meta_prefix: String::new(),
            startup_wait: Duration::from_millis(1000),
            max_body_bytes: 4 * 1024 * 1024,
            list_ttl_ms: 60_000,
            worker_threads: None,
            allowed_hosts: Vec::new(),
            admin_allow_remote: false,
            limits: limits::Limits::default(),
        }
    }
}

/// `path` from a configuration key, relative to the configuration file's folder (absolute
/// paths as they are), so the gateway finds it from any working directory.
pub(crate) fn relative_to_config(file: &Path, path: &Path) -> PathBuf {
    match file.parent() {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    }
}

pub use toolgate_core::ids::is_simple_name;

/// An upstream name is a config key, a log field and a name prefix: keep it simple.
pub(crate) fn check_upstream_name(name: &str, file: &Path) -> Result<()> {
    if !is_simple_name(name) {
        invalid!(
            "{}: upstream name {name:?} is not allowed: use 1 to 48 letters, digits, '_', '-' or '.'",
            file.display()
        );
    }
    Ok(())
}

/// serde's words for a wrong type, in the words a person writing the file uses
/// (`expected f64` -> `expected a number`; under a `*_secs` key, a number of seconds).
pub(crate) fn human_serde(message: &str) -> String {
    let seconds = message.contains("_secs");
    let mut out = message.to_string();
    for (serde, human) in [
        ("expected a sequence", "expected an array of strings"),
        ("expected a map", "expected a table of keys and values"),
        ("expected a boolean", "expected true or false"),
        ("expected usize", "expected a whole number"),
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected u16", "expected a whole number"),
        ("expected u8", "expected a whole number"),
        ("expected i64", "expected a whole number"),
    ] {
        out = out.replace(serde, human);
    }
    let number = if seconds {
        "expected a number of seconds"
    } else {
        "expected a number"
    };
    out.replace("expected f64", number)
        .replace("expected f32", number)
}

/// A number of seconds from `v` (else `default`): above 0, at most a day.
pub(super) fn secs(v: Option<f64>, default: f64, file: &Path, key: &str) -> Result<Duration> {
    let v = v.unwrap_or(default);
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        invalid!(
            "{}: {key} = {v}: use a number of seconds above 0 and at most 86400",
            file.display()
        );
    }
    Ok(Duration::from_secs_f64(v))
}
