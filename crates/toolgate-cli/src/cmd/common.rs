//! What several subcommands share: finding and loading the configuration (or the demo),
//! logging to stderr, waiting for upstreams.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use toolgate::Gateway;
use toolgate::{Config, Transport, UpstreamConfig, DEFAULT_CONFIG_FILE};

/// Where the upstreams come from.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ConfigArgs {
    /// toolgate TOML configuration (default: ./toolgate.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// An mcpServers JSON file (Claude Desktop/Code `.mcp.json`, Cursor, VS Code); repeatable.
    #[arg(long = "mcp-json", value_name = "FILE")]
    pub mcp_json: Vec<PathBuf>,
    /// Serve the built-in demo catalog even if a configuration exists.
    #[arg(long)]
    pub demo: bool,
}

impl ConfigArgs {
    /// The configuration to run: the files named, else ./toolgate.toml, else the demo.
    /// What was read but not used is logged as warnings.
    pub(crate) fn load(&self) -> Result<Config> {
        let config = self.load_quiet()?;
        warn_unused(&config);
        Ok(config)
    }

    /// [`ConfigArgs::load`] without the warnings (`serve` logs them once its logging,
    /// which the configuration's `[telemetry]` shapes, is set up).
    pub(crate) fn load_quiet(&self) -> Result<Config> {
        if self.demo {
            return demo_config();
        }
        let mut config = match &self.config {
            Some(path) => Some(Config::from_toml_file(path)?),
            None => {
                let default = PathBuf::from(DEFAULT_CONFIG_FILE);
                default
                    .exists()
                    .then(|| Config::from_toml_file(&default))
                    .transpose()?
            }
        };
        for path in &self.mcp_json {
            let imported = Config::from_mcp_json_file(path)?;
            match config.as_mut() {
                Some(c) => c.merge_upstreams(imported)?,
                None => config = Some(imported),
            }
        }
        match config {
            Some(c) => Ok(c),
            None => demo_config(),
        }
    }
}

/// What the configuration read but did not use, as warnings.
pub(crate) fn warn_unused(config: &Config) {
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
}

/// The built-in demo: the fixture server (this same binary, `toolgate fixture`) serving
/// the bundled demo catalog, one child process per demo server.
pub(crate) fn demo_config() -> Result<Config> {
    let exe = std::env::current_exe().context("cannot find this program's path for the demo")?;
    let mut config = Config::empty();
    let demo = toolgate_fixture::Catalog::parse(toolgate_fixture::DEMO_CATALOG)?;
    for server in demo.servers().keys().map(|s| s.to_string()) {
        config.upstreams.insert(
            server.clone(),
            UpstreamConfig {
                name: server.clone(),
                transport: Transport::Stdio {
                    command: exe.to_string_lossy().into_owned(),
                    args: demo_args(&server),
                    env: Default::default(),
                    inherit_env: Vec::new(),
                    cwd: None,
                },
                enabled: true,
                connect_timeout: std::time::Duration::from_secs(10),
                call_timeout: std::time::Duration::from_secs(60),
                max_message_bytes: toolgate::DEFAULT_MAX_MESSAGE_BYTES,
                protocol: Default::default(),
                prefix: server.clone(),
                rename: Default::default(),
            },
        );
    }
    Ok(config)
}

/// The arguments that run one server of the built-in demo: the fixture with the demo's
/// own answers (`--stateful`: what is created can be read back), not the tests' echoes.
pub(crate) fn demo_args(server: &str) -> Vec<String> {
    ["fixture", "--demo", "--stateful", "--server", server]
        .map(String::from)
        .to_vec()
}

/// rmcp's HTTP session manager names each session id in full (its `create new session`
/// line and the span around every session's events). A session id is a bearer of the
/// session, so that target stays at warnings whatever `RUST_LOG` says.
const QUIET_SESSION_IDS: &str = "rmcp::transport::streamable_http_server::session=warn";

/// Logs go to stderr (stdout may be the protocol). `RUST_LOG` overrides the default
/// (except [`QUIET_SESSION_IDS`]).
/// rmcp's own lines (Debug dumps of peers and errors, which toolgate reports in its own
/// words) are off unless `RUST_LOG` asks for them (`RUST_LOG=info,rmcp=debug`);
/// colour only when stderr is a terminal and `NO_COLOR` is unset, so clients that record
/// a server's stderr (Claude Code, Codex) get plain lines.
pub(crate) fn init_logging(default: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(log_layer(default))
        .try_init();
}

/// The stderr log lines of [`init_logging`], as a layer with its own filter (the spans
/// exported by `serve --features otel` are filtered apart, see `telemetry`).
///
/// Below `debug` the lines carry no span prefix (`tools/call{mcp.tool=...}:admit{...}:`):
/// the log layer then takes no spans at all, so a call's five spans cost nothing unless
/// something exports them. With `RUST_LOG=debug` (or finer) every line has its spans again.
pub(crate) fn log_layer<S>(default: &str) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use std::io::IsTerminal;
    use tracing_subscriber::filter::{FilterExt, LevelFilter};
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default},rmcp=off")))
        .add_directive(QUIET_SESSION_IDS.parse().expect("a valid directive"));
    let spans = filter
        .max_level_hint()
        .is_none_or(|max| max >= LevelFilter::DEBUG);
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .with_filter(
            filter.and(tracing_subscriber::filter::filter_fn(move |meta| {
                spans || meta.is_event()
            })),
        )
}

/// Starts the gateway and waits until every upstream has connected or failed once
/// (bounded by the longest connect timeout).
pub(crate) async fn start_and_settle(config: Config) -> Arc<Gateway> {
    start_and_settle_with(config, None).await
}

/// [`start_and_settle`] with the state store (where `toolgate auth login` keeps logins).
pub(crate) async fn start_and_settle_with(
    config: Config,
    store: Option<Arc<dyn toolgate_core::store::Store>>,
) -> Arc<Gateway> {
    let limit = config
        .enabled_upstreams()
        .map(|u| u.connect_timeout)
        .max()
        .unwrap_or_default()
        + std::time::Duration::from_millis(500);
    let gw = Gateway::start_with_store(config, store);
    gw.wait_settled(limit).await;
    // Let the catalog task fold the last status change in.
    tokio::task::yield_now().await;
    gw
}
