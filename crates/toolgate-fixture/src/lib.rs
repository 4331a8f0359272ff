//! toolgate-fixture: serves any catalog file as a real MCP server, over stdio or
//! Streamable HTTP, for toolgate's tests, benchmarks and built-in demo.
//!
//! `tools/list` answers the catalog's tool objects exactly as the file holds them (every
//! key, in file order, paged with `--page-size`). `tools/call` answers deterministically:
//! one text block holding `{"server":..,"tool":..,"arguments":{..}}`, and
//! `structuredContent` that is a minimal instance of the tool's `outputSchema` when it
//! declares one, otherwise the same echo object. An unknown tool is a JSON-RPC
//! invalid-params error naming it.
//!
//! # Command line
//!
//! `toolgate-fixture --catalog FILE [--server NAME] [--http ADDR] [--knobs FILE]
//! [--page-size N] [--demo] [--fault KIND]`, or `toolgate-fixture --conformance [--http ADDR]
//! [--max-protocol VERSION]` (see [`conformance`]); see [`FixtureArgs`]. With `--http ADDR` the
//! only stdout line is `listening http://IP:PORT/mcp`; logs go to stderr.
//!
//! # Knobs
//!
//! Reserved call arguments, stripped before the arguments are echoed. The same keys can be
//! set per tool with `--knobs FILE`, a JSON object `{"tool_name": {"_delay_ms": 200}}`;
//! a call's own arguments override the file.
//!
//! | knob | value | effect |
//! |---|---|---|
//! | `_delay_ms` | integer | sleep this long before answering |
//! | `_result_bytes` | integer | the text block is exactly N bytes of numbered readable lines (no echo `structuredContent` unless an `outputSchema` asks for one); at most 64 MiB |
//! | `_error` | string | answer `isError: true` with this message |
//! | `_progress` | integer | send N `notifications/progress` spread over `_delay_ms`, when the request carries a `progressToken` |
//! | `_list_changed` | bool | send `notifications/tools/list_changed`, after toggling `_toggle_tool` if given |
//! | `_toggle_tool` | string | with `_list_changed`: hide that tool if shown, show it if hidden (for every session) |
//! | `_crash` | bool | the process exits at once (status 70) mid-call, without answering |
//! | `_log` | any | send a `notifications/message` at level `info` with this value as `data` (none while `logging/setLevel` asked for a level above info) |
//! | `_log_after_ms` | integer | with `_log`: send it this long after the answer, outside the call |
//! | `_ask_roots` | bool | ask the client `roots/list` first and go on whatever it answers |
//!
//! Side effects run in this order: `_crash`, `_log`, `_ask_roots`, delay with progress, list change,
//! then the answer (`_error`, else the result).
//!
//! # Faults
//!
//! `--fault exit-at-start` (exit status 3 before reading anything), `no-initialize` (read
//! the input, never answer), `garbage-stdout` (a non-JSON banner and garbage lines on
//! stdout before and between messages, in stdio mode; serves normally otherwise),
//! `flood-stderr` (10,000 stderr lines at once, then one every 100 ms, serving normally),
//! `malformed-tools` (every `tools/list` page also lists a tool whose `inputSchema` is a
//! string, one with an empty name, and a copy of the page's first tool),
//! `flood-notifications` (before each call's answer: 5,000 log messages of 1 KiB, 500
//! `tools/list_changed` and 500 `resources/list_changed`), `spawn-grandchildren` (two
//! `sleep` shells at start, one in the fixture's process group, one `setsid` out of it).
//!
//! # Layout
//!
//! - [`catalog`]: the catalog file format and the choice of tools to serve.
//! - [`conformance`]: `--conformance`, the official conformance suite's fixture names.
//! - [`demo`]: `--demo --stateful`, the built-in demo's answers: a small world in memory
//!   (`demo::more` for most servers, `demo::time` for the clock).
//! - [`server`]: the hand-written `ServerHandler`.
//! - [`knobs`]: reserved arguments and the knobs file.
//! - [`instance`]: minimal instances of output schemas.
//! - [`payload`]: the echo object and exact-size text.
//! - [`faults`]: misbehaviours on demand.
//! - [`stdio`], [`http`]: the transports; [`wire`] restores raw tools on both.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod catalog;
pub mod conformance;
pub mod demo;
pub mod faults;
pub mod http;
pub mod instance;
pub mod knobs;
pub mod payload;
pub mod server;
pub mod stdio;
pub mod wire;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use tokio_util::sync::CancellationToken;

pub use catalog::Catalog;
pub use faults::Fault;
pub use server::FixtureServer;

/// The demo catalog built into the binary: realistic tools over several servers.
pub const DEMO_CATALOG: &str = include_str!("../demo/catalog.json");

/// Command-line arguments of the fixture; also embeddable as a `toolgate` subcommand.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "toolgate-fixture",
    version,
    about = "Serves a toolgate catalog file as a real MCP server"
)]
pub struct FixtureArgs {
    /// Catalog file: a JSON array of {"server": NAME, "tool": {MCP Tool}}.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present_any = ["demo", "conformance"],
        conflicts_with_all = ["demo", "conformance"]
    )]
    pub catalog: Option<PathBuf>,
    /// Serve only this catalog server's tools (default: all, if their names are distinct).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:0).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Per-tool default knobs: a JSON object {"tool_name": {"_delay_ms": 100, ...}}.
    #[arg(long, value_name = "FILE")]
    pub knobs: Option<PathBuf>,
    /// Tools per tools/list page (default: all in one page).
    #[arg(long, value_name = "N")]
    pub page_size: Option<usize>,
    /// Serve the embedded demo catalog instead of --catalog.
    #[arg(long)]
    pub demo: bool,
    /// With --demo: answer with the demo's made-up world, kept in memory (a ticket created
    /// can be read back), instead of echoing the arguments.
    #[arg(long, requires = "demo")]
    pub stateful: bool,
    /// Misbehave on purpose, for fault tests.
    #[arg(long, value_enum, value_name = "KIND")]
    pub fault: Option<Fault>,
    /// Serve the conformance suite's fixture tools, resources and prompts instead of a catalog.
    #[arg(long, conflicts_with = "demo")]
    pub conformance: bool,
    /// With --conformance: the newest protocol revision to agree to (e.g. 2024-11-05, to
    /// play an old server).
    #[arg(long, value_name = "VERSION", requires = "conformance")]
    pub max_protocol: Option<String>,
    /// Speak only MCP 2026-07-28: refuse `initialize` (-32022), serve `server/discover` and
    /// per-request metadata, to play a modern-only server.
    #[arg(long, conflicts_with = "max_protocol")]
    pub modern_only: bool,
}

/// Runs the fixture until its input closes (stdio), or SIGTERM/SIGINT arrives.
///
/// Initialises a stderr `tracing` subscriber unless the caller already set one. In stdio
/// mode the caller should exit the process when this returns.
pub async fn run(args: FixtureArgs) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,toolgate_fixture=info")
            }),
        )
        .try_init();
    if args.fault == Some(Fault::ExitAtStart) {
        eprintln!("toolgate-fixture: exit-at-start fault, exiting with status 3");
        std::process::exit(faults::EXIT_AT_START_CODE);
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    if args.conformance {
        let name = args.server.clone().unwrap_or_else(|| "conformance".into());
        let max = args.max_protocol.clone();
        return conformance::serve(name, max, args.modern_only, args.http, shutdown).await;
    }
    let server = build_server(&args)?;
    if args.fault == Some(Fault::FloodStderr) {
        tokio::spawn(faults::flood_stderr());
    }
    if args.fault == Some(Fault::SpawnGrandchildren) {
        let marker = args.catalog.as_ref().map(|p| p.display().to_string());
        faults::spawn_grandchildren(marker.as_deref().unwrap_or("demo"))
            .context("spawn-grandchildren")?;
    }
    let hang = args.fault == Some(Fault::NoInitialize);
    match args.http {
        Some(addr) => http::serve_http(server, addr, hang, shutdown).await,
        None if hang => {
            tokio::select! {
                read = faults::swallow_stdin() => read.context("reading stdin")?,
                _ = shutdown.cancelled() => {}
            }
            Ok(())
        }
        None => {
            let garbage = args.fault == Some(Fault::GarbageStdout);
            stdio::serve_stdio(server, garbage, shutdown).await
        }
    }
}

/// Loads the catalog, picks the tools and reads the knobs file.
pub fn build_server(args: &FixtureArgs) -> anyhow::Result<FixtureServer> {
    let text = match (&args.catalog, args.demo) {
        (_, true) => DEMO_CATALOG.to_owned(),
        (Some(path), false) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read catalog {}", path.display()))?,
        (None, false) => bail!("pass --catalog FILE or --demo"),
    };
    let catalog = Catalog::parse(&text)?;
    let tools = catalog.select(args.server.as_deref())?;
    let knobs = match &args.knobs {
        Some(path) => knobs::KnobsFile::load(path)?,
        None => knobs::KnobsFile::default(),
    };
    let name = args
        .server
        .clone()
        .unwrap_or_else(|| "toolgate-fixture".to_owned());
    tracing::info!(server = %name, tools = tools.len(), "catalog loaded");
    Ok(FixtureServer::new(name, tools, knobs, args.page_size)
        .modern_only(args.modern_only)
        .malformed_tools(args.fault == Some(Fault::MalformedTools))
        .flood_notifications(args.fault == Some(Fault::FloodNotifications))
        .stateful(args.stateful))
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn cancel_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            tracing::warn!("cannot listen for SIGTERM");
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("signal received, shutting down");
    shutdown.cancel();
}
