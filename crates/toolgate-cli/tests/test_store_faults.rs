//! Faults of the embedded state store, injected into a real gateway's file: a damaged,
//! truncated or empty file at start, pages overwritten while it runs, a key file removed,
//! a small tmpfs that fills and is freed. For each, a guided call that needs nothing stored
//! keeps working, one that needs the store gets a clear error naming it, no call is
//! answered "a bug" (-32603), and the store serves again once the fault is gone, without
//! a restart. `toolgate store check` and `toolgate store reset` are the operator's tools.

mod common;
#[allow(dead_code, reason = "each test binary uses a part of these helpers")]
mod fleet;

use common::*;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A guided gateway with code mode on an embedded store at `store`.
fn store_config(dir: &TestDir, store: &Path) -> PathBuf {
    let extra = format!(
        "[code]\nenabled = true\n[store]\nbackend = \"embedded\"\npath = {:?}\n",
        store.display().to_string()
    );
    dir.config(
        "mode = \"guided\"",
        &[extra, dir.stdio_upstream("alpha", "alpha", &[])],
    )
}

/// Overwrites 4 KiB of every other 8 KiB past redb's header.
fn damage(path: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    let size = std::fs::metadata(path).unwrap().len();
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let mut at = 4096;
    while at < size {
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&[0xA5; 4096]).unwrap();
        at += 8192;
    }
    f.sync_all().unwrap();
}

fn toolgate_cmd(args: &[&str], config: &Path) -> (bool, String) {
    let out = Command::new(toolgate())
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// `serve` on `config` that must stop at start; what it said.
fn refused(config: &Path) -> String {
    let out = Command::new(toolgate())
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(config)
        .env_remove("TOOLGATE_STORE_KEY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "serve started on a bad store");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A call that needs nothing stored: a small tool by name.
async fn echo_works(client: &Client) {
    let r = call(
        client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "still-here"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("still-here"), "{}", text(&r));
}

/// `state.set` then `state.get` of `key` (calls that need the store); `Ok` if both worked,
/// else the error the program was given.
async fn state_round_trip(client: &Client, key: &str, bytes: usize) -> Result<(), String> {
    let code = format!(
        "const v = 'x'.repeat({bytes}); await state.set('{key}', v); const back = await state.get('{key}'); return back === v ? 'same' : 'differs'"
    );
    let r = call(client, "execute_code", json!({ "code": code })).await;
    let says = text(&r);
    assert!(!says.contains("a bug"), "{says}");
    if structured(&r)["result"] == "same" {
        Ok(())
    } else {
        Err(says)
    }
}

/// Retries the round trip (the store reopens after a backoff of at most 2 s), up to 60 s.
async fn heals(client: &Client, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match state_round_trip(client, key, 10).await {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("the store did not heal: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_or_empty_file_or_a_missing_key_is_refused_at_start_with_what_to_do() {
    let dir = TestDir::new();
    let store = dir.path("state.redb");
    let config = store_config(&dir, &store);
    {
        let mut gw = HttpGateway::start(&config, &[]);
        let (client, _) = connect_http(&gw.url).await;
        state_round_trip(&client, "a", 40_000).await.unwrap();
        let _ = client.cancel().await;
        assert!(gw.stop().success());
    }
    let (ok, said) = toolgate_cmd(&["store", "check"], &config);
    assert!(ok && said.contains("every page whole"), "{said}");

    // The key file gone: refused, not a new key.
    let key = dir.path("state.redb.key");
    std::fs::rename(&key, dir.path("key.kept")).unwrap();
    let err = refused(&config);
    assert!(
        err.contains("state.redb.key") && err.contains("missing"),
        "{err}"
    );
    assert!(!key.exists(), "no new key was made");
    std::fs::rename(dir.path("key.kept"), &key).unwrap();

    // Damaged pages: refused with the path and how to move it aside; check says so.
    std::fs::copy(&store, dir.path("good.redb")).unwrap();
    damage(&store);
    let err = refused(&config);
    assert!(
        err.contains("damaged") && err.contains("state.redb") && err.contains("store reset"),
        "{err}"
    );
    let (ok, said) = toolgate_cmd(&["store", "check"], &config);
    assert!(!ok && said.contains("damaged"), "{said}");

    // Half of it: refused too.
    std::fs::copy(dir.path("good.redb"), &store).unwrap();
    let size = std::fs::metadata(&store).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&store)
        .unwrap()
        .set_len(size / 2)
        .unwrap();
    let err = refused(&config);
    assert!(
        err.contains("state.redb") && err.contains("store reset"),
        "{err}"
    );

    // Reset moves it aside (never deletes), then a start begins a new store.
    let (ok, said) = toolgate_cmd(&["store", "reset"], &config);
    assert!(ok && said.contains("damaged-"), "{said}");
    assert!(!store.exists());
    let aside: Vec<_> = std::fs::read_dir(dir.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("state.redb.damaged-"))
        .collect();
    assert_eq!(aside.len(), 2, "the file and its key copy: {aside:?}");

    // An empty file is not a new store.
    std::fs::write(&store, b"").unwrap();
    let err = refused(&config);
    assert!(err.contains("empty (0 bytes)"), "{err}");
    std::fs::remove_file(&store).unwrap();

    let mut gw = HttpGateway::start(&config, &[]);
    let (client, _) = connect_http(&gw.url).await;
    state_round_trip(&client, "b", 10).await.unwrap();
    let _ = client.cancel().await;
    assert!(gw.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_overwritten_while_running_cost_only_the_calls_that_need_the_store() {
    let dir = TestDir::new();
    let store = dir.path("state.redb");
    let config = store_config(&dir, &store);
    {
        let mut gw = HttpGateway::start(&config, &[]);
        let (client, _) = connect_http(&gw.url).await;
        for i in 0..20 {
            state_round_trip(&client, &format!("k{i}"), 30_000)
                .await
                .unwrap();
        }
        let _ = client.cancel().await;
        assert!(gw.stop().success());
    }
    std::fs::copy(&store, dir.path("good.redb")).unwrap();
    // A new process, whose cache has not read the values yet.
    let mut gw = HttpGateway::start(&config, &[]);
    let (client, _) = connect_http(&gw.url).await;
    // The key file removed while running: the running gateway holds its key.
    std::fs::rename(dir.path("state.redb.key"), dir.path("key.kept")).unwrap();
    damage(&store);
    let mut failed = Vec::new();
    for i in 0..20 {
        echo_works(&client).await;
        let r = call(
            &client,
            "execute_code",
            json!({"code": format!("const v = await state.get('k{i}'); return v === null ? 'none' : v.length")}),
        )
        .await;
        let says = text(&r);
        assert!(!says.contains("a bug"), "{says}");
        if structured(&r)["result"] != 30_000 {
            failed.push(says);
        }
    }
    assert!(!failed.is_empty(), "the damage was met by some read");
    for e in &failed {
        assert!(
            e.contains("state store") && e.contains("state.redb") && e.contains("store reset"),
            "{e}"
        );
    }
    // The good file (and key) back: served again without a restart.
    std::fs::copy(dir.path("good.redb"), &store).unwrap();
    std::fs::rename(dir.path("key.kept"), dir.path("state.redb.key")).unwrap();
    heals(&client, "after").await;
    echo_works(&client).await;
    let _ = client.cancel().await;
    assert!(gw.stop().success());
}

/// Unmounts the tmpfs when dropped.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_costs_only_the_writes_and_heals_when_space_is_freed() {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    });
    if !root {
        skip("mounting a small tmpfs needs root (CI runs as root)");
        return;
    }
    let dir = TestDir::new();
    let mount = dir.path("small");
    std::fs::create_dir(&mount).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&mount)
        .status()
        .unwrap()
        .success();
    if !ok {
        skip("mount -t tmpfs failed (a container without CAP_SYS_ADMIN?)");
        return;
    }
    let _mounted = Tmpfs(mount.clone());
    let store = mount.join("state.redb");
    let config = store_config(&dir, &store);
    let mut gw = HttpGateway::start(&config, &[]);
    let (client, _) = connect_http(&gw.url).await;
    state_round_trip(&client, "before", 10).await.unwrap();

    // Fill the disk.
    let filler = mount.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[0u8; 16 << 10]).is_ok() {}
        let _ = f.sync_all();
    }
    let mut full = None;
    for i in 0..60 {
        echo_works(&client).await;
        if let Err(e) = state_round_trip(&client, &format!("big{i}"), 60_000).await {
            full = Some(e);
            break;
        }
    }
    let e = full.expect("a write failed once the disk was full");
    assert!(
        e.contains("state.redb") && (e.contains("full") || e.contains("not answering")),
        "{e}"
    );
    echo_works(&client).await;

    // Space freed: writes work again, no restart.
    std::fs::remove_file(&filler).unwrap();
    heals(&client, "after").await;
    let _ = client.cancel().await;
    assert!(gw.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_at_maxmemory_or_a_value_over_its_limit_costs_only_those_calls() {
    let Some(program) = fleet::find("redis-server") else {
        skip("redis-server not installed (apt-get install redis-server; .ci/run does)");
        return;
    };
    let dir = TestDir::new();
    let port = fleet::free_port();
    let _redis = fleet::redis_with(
        &program,
        port,
        dir.dir.path(),
        &[
            "--maxmemory",
            "64mb",
            "--maxmemory-policy",
            "noeviction",
            "--proto-max-bulk-len",
            "1mb",
        ],
    );
    let extra = format!(
        "[code]\nenabled = true\n[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\n"
    );
    let config = dir.config(
        "mode = \"guided\"",
        &[extra, dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let key = "ab".repeat(32);
    let (mut gw, _) =
        HttpGateway::start_with_env(&config, &[], None, &[("TOOLGATE_STORE_KEY", &key)]);
    let (client, _) = connect_http(&gw.url).await;
    state_round_trip(&client, "before", 10).await.unwrap();

    // A result whose pages are over Redis's bulk limit: that call says so (its first page
    // is still given).
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha_echo", "arguments": {"message": "m", "_result_bytes": 3_000_000}}),
    )
    .await;
    let says = text(&r);
    assert!(!says.contains("a bug"), "{says}");
    assert!(
        says.contains("redis")
            && says.contains("larger than the state store")
            && says.contains("proto-max-bulk-len"),
        "{says}"
    );
    echo_works(&client).await;

    // At maxmemory: writes get "full", calls that need nothing stored still work.
    let used = fleet::command(port, "CONFIG SET maxmemory 1");
    assert!(used.starts_with("+OK"), "{used}");
    let e = state_round_trip(&client, "at-oom", 100).await.unwrap_err();
    assert!(e.contains("full") && e.contains("maxmemory"), "{e}");
    echo_works(&client).await;

    // Room again: served without a restart.
    assert!(fleet::command(port, "CONFIG SET maxmemory 0").starts_with("+OK"));
    heals(&client, "after").await;
    let _ = client.cancel().await;
    assert!(gw.stop().success());
}
