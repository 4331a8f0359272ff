//! Command-line parsing and dispatch: one variant per subcommand, one file per
//! subcommand under `cmd/`.

use crate::cmd;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "toolgate",
    version,
    about = "An MCP gateway: one endpoint in front of many MCP servers, showing the model only what the next step needs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (Streamable HTTP by default; --stdio for one stdio session).
    /// With no configuration it serves a built-in demo.
    Serve(cmd::serve::ServeArgs),
    /// Write a minimal toolgate.toml; --from claude|cursor|vscode|codex|FILE imports the
    /// MCP servers that client already has.
    Init(cmd::init::InitArgs),
    /// List the catalog: server, tool, exposed name, status.
    Tools(cmd::tools::ToolsArgs),
    /// Connect to each upstream once: status, tool count, latency, error.
    Check(cmd::check::CheckArgs),
    /// Serve a catalog file as an MCP server (the test and demo fixture).
    #[command(hide = true)]
    Fixture(toolgate_fixture::FixtureArgs),
    /// Measure quality on labelled queries.
    #[command(subcommand)]
    Eval(cmd::eval::EvalCommand),
    /// Token cost of each surface (direct, slim, local, guided), per server.
    Tokens(cmd::tokens::Args),
    /// Find schema features that break grammar-constrained local models.
    Lint(cmd::lint::Args),
    /// The upstream client as the conformance suite's client under test.
    #[command(hide = true)]
    ConformanceClient(cmd::conformance_client::ConformanceClientArgs),
    /// The audit log: verify its hash chain.
    #[command(subcommand)]
    Audit(cmd::audit::AuditCommand),
    /// OAuth logins of the gateway at upstreams that want them (login, logout).
    #[command(subcommand)]
    Auth(cmd::auth::AuthCommand),
    /// API keys for HTTP clients.
    #[command(subcommand)]
    Key(cmd::key::KeyCommand),
    /// Skills: list them, show one, approve or reject a model's draft.
    #[command(subcommand)]
    Skill(cmd::skill::SkillCommand),
    /// Code mode's workspaces: list, print or remove the files programs keep.
    #[command(subcommand)]
    Workspace(cmd::workspace::WorkspaceCommand),
    /// The embedded state store: check its file, or move a damaged one aside.
    #[command(subcommand)]
    Store(cmd::store::StoreCommand),
    /// Route: what it learned from the models' choices (list, show, forget, export, import).
    #[command(subcommand)]
    Route(cmd::route::RouteCommand),
    /// Run one code-mode program (the gateway starts this; it speaks JSON lines on stdio).
    #[cfg(feature = "code-mode")]
    #[command(hide = true)]
    SandboxWorker,
}

/// The runtime's worker threads: `gateway.worker_threads` for `serve`, else
/// `TOKIO_WORKER_THREADS` when set, else one fewer than the cores (`default_workers`). A
/// configuration that does not load is `serve`'s to report, with the default meanwhile.
fn worker_threads(command: &Command) -> usize {
    let configured = match command {
        Command::Serve(a) => a.config.load_quiet().ok(),
        _ => None,
    };
    let from_env = || {
        let n = std::env::var("TOKIO_WORKER_THREADS").ok()?;
        n.trim().parse::<usize>().ok().filter(|&n| n > 0)
    };
    (configured.and_then(|c| c.gateway.worker_threads))
        .or_else(from_env)
        .unwrap_or_else(toolgate::default_workers)
}

pub(crate) fn run() -> ExitCode {
    let cli = Cli::parse();
    // The worker runs untrusted code: no async runtime, no threads, nothing else first.
    #[cfg(feature = "code-mode")]
    if let Command::SandboxWorker = cli.command {
        return toolgate_sandbox::worker::main();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads(&cli.command))
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("toolgate: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result: anyhow::Result<bool> = runtime.block_on(async {
        match cli.command {
            Command::Serve(a) => cmd::serve::run(a).await.map(|()| true),
            Command::Init(a) => cmd::init::run(a),
            Command::Tools(a) => cmd::tools::run(a).await,
            Command::Check(a) => cmd::check::run(a).await,
            Command::Eval(a) => cmd::eval::run(a).map(|()| true),
            Command::Tokens(a) => cmd::tokens::run(a).await.map(|()| true),
            Command::Lint(a) => cmd::lint::run(a).await.map(|()| true),
            Command::Key(a) => cmd::key::run(a).map(|()| true),
            Command::Auth(a) => cmd::auth::run(a).await,
            Command::Audit(a) => cmd::audit::run(a),
            Command::Skill(a) => cmd::skill::run(a),
            Command::Workspace(a) => cmd::workspace::run(a),
            Command::Store(a) => cmd::store::run(a),
            Command::Route(a) => cmd::route::run(a),
            Command::Fixture(a) => toolgate_fixture::run(a).await.map(|()| true),
            Command::ConformanceClient(a) => cmd::conformance_client::run(a).await,
            #[cfg(feature = "code-mode")]
            Command::SandboxWorker => unreachable!("handled before the runtime starts"),
        }
    });
    // Don't wait for stray blocking tasks (e.g. a stdin reader) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            ExitCode::from(2)
        }
    }
}
