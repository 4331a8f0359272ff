//! The `toolgate` command. Everything happens in `cli::run`.
#![forbid(unsafe_code)]

mod cli;
mod cmd;

fn main() -> std::process::ExitCode {
    cli::run()
}
