//! Command-line parsing and dispatch: one variant per subcommand, one file per
//! subcommand under `cmd/`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "toolgate", version, about = "An MCP gateway: one endpoint in front of many MCP servers, showing the model only what the next step needs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the version.
    Version,
    /// Token cost of each surface (direct, slim, local, guided), per server.
    Tokens(crate::cmd::tokens::Args),
    /// Find schema features that break grammar-constrained local models.
    Lint(crate::cmd::lint::Args),
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        Command::Version => {
            println!("toolgate {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Tokens(args) => crate::cmd::tokens::run(args),
        Command::Lint(args) => crate::cmd::lint::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            ExitCode::from(2)
        }
    }
}
