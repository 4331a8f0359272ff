//! The `toolgate` command. Everything happens in `cli::run`.
#![forbid(unsafe_code)]

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod cli;
mod cmd;

fn main() -> std::process::ExitCode {
    cli::run()
}
