//! Code mode's worker pool: workers started ahead wait for a run; a run takes a warm one,
//! which serves only that run; a used or killed worker is replaced in the background; the
//! gateway's shutdown leaves no worker behind. Workers run through a link in the test's
//! folder, so only this test's workers match.

mod common;
use common::code::*;
use common::*;
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// A gateway over HTTP with code mode, `pool_size` workers, its workers run through a link
/// named by the returned marker, and every stderr line (pool debug logs on) on a channel.
fn start(
    pool_size: usize,
) -> (
    TestDir,
    tempfile::TempDir,
    String,
    HttpGateway,
    Receiver<String>,
) {
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("toolgate-pool-link");
    std::os::unix::fs::symlink(toolgate(), &link).unwrap();
    let marker = link.display().to_string();
    let (dir, config) = setup_with(
        10_000,
        &format!("pool_size = {pool_size}\nworker = [{marker:?}, \"sandbox-worker\"]"),
    );
    let (gw, lines) =
        HttpGateway::start_logging(&config, &[], Some("info,toolgate::code::pool=debug"));
    (dir, links, marker, gw, lines)
}

/// Waits (bounded) for the pool to report itself full; returns the pid that filled it.
fn full(lines: &Receiver<String>, size: usize) -> u32 {
    let needle = format!(" ready ({size} of {size} idle)");
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the pool did not fill up");
        if let Some(i) = line.find(&needle) {
            let head = &line[..i];
            let pid = head.rsplit(' ').next().unwrap();
            return pid.parse().unwrap_or_else(|_| panic!("{line}"));
        }
    }
}

fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty()
        && !stat
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
}

#[tokio::test]
async fn runs_take_warm_workers_that_are_replaced_and_shutdown_leaves_none() {
    let (_dir, _links, marker, mut gw, lines) = start(2);
    full(&lines, 2);
    let warm = processes_mentioning(&marker);
    assert_eq!(warm.len(), 2, "two workers wait before any run: {warm:?}");
    let (client, _) = connect_http(&gw.url).await;

    // A run takes one of the waiting workers (no new process is started for it), and that
    // worker is gone once the run has answered: it served exactly one run.
    healthy(&client).await;
    let left: Vec<u32> = warm.iter().copied().filter(|p| alive(*p)).collect();
    assert_eq!(
        left.len(),
        1,
        "the run used a warm worker: {warm:?} -> {left:?}"
    );
    // Its replacement is started in the background.
    let new = full(&lines, 2);
    assert!(!warm.contains(&new), "{new} is new");
    assert!(alive(left[0]), "the other warm worker still waits");

    // A waiting worker that is killed is replaced too, and runs go on.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(left[0] as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let replacement = full(&lines, 2);
    assert!(!alive(left[0]) && replacement != new && replacement != left[0]);
    let s = expect(&client, "return [1, 2].map(x => x * 2)", "ok").await;
    assert_eq!(s["result"], serde_json::json!([2, 4]));

    // Shutdown kills every waiting worker.
    full(&lines, 2);
    assert_eq!(processes_mentioning(&marker).len(), 2);
    drop(client);
    let status = gw.stop();
    assert!(status.success(), "{status:?}");
    let mut rest = processes_mentioning(&marker);
    for _ in 0..50 {
        if rest.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        rest = processes_mentioning(&marker);
    }
    assert!(rest.is_empty(), "workers outlived the gateway: {rest:?}");
}

#[tokio::test]
async fn without_a_pool_each_run_starts_its_own_worker() {
    let (_dir, _links, marker, _gw, _lines) = start(0);
    let (client, _) = connect_http(&_gw.url).await;
    healthy(&client).await;
    assert!(
        processes_mentioning(&marker).is_empty(),
        "pool_size = 0 keeps no worker waiting"
    );
}
