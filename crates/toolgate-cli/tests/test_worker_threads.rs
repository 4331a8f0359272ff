//! The async runtime's worker threads: `gateway.worker_threads` when configured, else
//! `TOKIO_WORKER_THREADS` when set, else one fewer than the machine's cores (at least one).
//! Read from the serving process's own banner, which reports what its runtime runs.

mod common;

use common::*;
use std::time::Duration;

/// The worker count the banner of a gateway started with `gateway` keys and `env` reports.
fn workers_reported(gateway: &str, env: &[(&str, &str)]) -> usize {
    let dir = TestDir::new();
    let up = dir.stdio_upstream("alpha", "alpha", &[]);
    let config = dir.config(&format!("mode = \"direct\"\n{gateway}"), &[up]);
    let (mut gw, log) = HttpGateway::start_with_env(&config, &[], None, env);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let n = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = log
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no worker count in the banner: {seen:#?}"));
        if let Some(n) = line
            .strip_suffix(" worker threads")
            .and_then(|l| l.rsplit("; ").next())
        {
            break n.parse().unwrap();
        }
        seen.push(line);
    };
    assert!(gw.stop().success());
    n
}

#[test]
fn the_configured_count_wins_over_the_environment() {
    let env = [("TOKIO_WORKER_THREADS", "2")];
    assert_eq!(workers_reported("worker_threads = 3\n", &env), 3);
}

#[test]
fn tokio_worker_threads_applies_when_nothing_is_configured() {
    let env = [("TOKIO_WORKER_THREADS", "2")];
    assert_eq!(workers_reported("", &env), 2);
}

#[test]
fn by_default_one_core_is_left_to_the_upstreams() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The test runner's own TOKIO_WORKER_THREADS, if any, must not decide this one.
    let env = [("TOKIO_WORKER_THREADS", "")];
    assert_eq!(workers_reported("", &env), cores.saturating_sub(1).max(1));
}
