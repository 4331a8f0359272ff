//! The `toolgate-fixture` binary: parses [`FixtureArgs`] and calls [`toolgate_fixture::run`].
#![forbid(unsafe_code)]

use clap::Parser;
use toolgate_fixture::FixtureArgs;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let result = toolgate_fixture::run(FixtureArgs::parse()).await;
    // Exit explicitly: a stdin reader thread must not keep the process alive after shutdown.
    match result {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("toolgate-fixture: {error:#}");
            std::process::exit(1)
        }
    }
}
