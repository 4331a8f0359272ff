//! Helpers shared by the integration tests.
#![allow(unreachable_pub)] // `pub` is for the test binary's own modules.
#![allow(dead_code)] // each test binary uses a part of it
pub mod inproc;
pub mod instances;
pub mod raw_http;

/// A shared dataset, or `None` (after saying why on stderr, past the test harness's capture,
/// so `cargo test` shows it) when it is missing outside CI; in CI (`CI` set) a missing
/// dataset fails the test.
pub fn dataset_or_skip(relative: &str) -> Option<std::path::PathBuf> {
    match toolgate_core::catalog::file::dataset(relative) {
        Ok(path) => Some(path),
        Err(why) if std::env::var_os("CI").is_none() => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "skipped: {why}");
            None
        }
        Err(why) => panic!("{why}"),
    }
}
