//! Helpers shared by the integration tests.
#![expect(unreachable_pub, reason = "`pub` is for the test binary's own modules")]
#![allow(dead_code, reason = "each test binary uses a part of it")]
pub mod inproc;
pub mod instances;
pub mod raw_http;

/// The rule for a test that needs something optional (a dataset, a Debian program, a
/// browser) which is absent: it says `skipped: WHY` on stderr, past the test harness's
/// capture so `cargo test` shows it, and passes; with `CI` set (where `.ci/run` installs
/// everything) it fails with WHY instead. The caller returns right after.
pub fn skip(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{why} (CI is set, so this fails)"
    );
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// A dataset under `datasets/` (or `TOOLGATE_DATASETS`), or `None` after [`skip`].
pub fn dataset_or_skip(relative: &str) -> Option<std::path::PathBuf> {
    toolgate_core::catalog::dataset(relative)
        .map_err(|why| skip(&why))
        .ok()
}
