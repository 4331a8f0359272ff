//! The state store's cost, per backend side by side in one run: memory (no store),
//! embedded (redb in a temp folder) and Redis (a `redis-server` on loopback, started here
//! if installed). Through a real gateway (`toolgate serve --http`, the fixture as
//! upstream): `continue` latency per page, and route -> execute round trips. In a child
//! process per backend: the memory 10,000 idle cursors hold (process RSS, and Redis's
//! own `used_memory`). Medians, and each figure's ratio to memory.
//!
//! `cargo bench -p toolgate-cli --bench store` (release build). `STORE_BENCH_ROUNDS`
//! sets the route -> execute round trips per backend (default 300). Takes about a minute.

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ()>;

const CATALOG: &str = r#"[{"server":"bench","tool":{"name":"echo","description":"Echo a message back.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}}]"#;
const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const IDLE_CURSORS: usize = 10_000;

fn toolgate() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A child killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One Redis command over a plain socket (the bench needs PING and INFO only).
fn redis_cmd(port: u16, cmd: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(format!("{cmd}\r\n").as_bytes()).ok()?;
    let mut buf = vec![0u8; 65536];
    let n = s.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn start_redis(dir: &Path) -> Option<(Proc, u16)> {
    let bin = find("redis-server")?;
    let port = free_port();
    let child = Command::new(bin)
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let p = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if redis_cmd(port, "PING").is_some_and(|r| r.starts_with("+PONG")) {
            return Some((p, port));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn redis_used_memory(port: u16) -> u64 {
    let info = redis_cmd(port, "INFO memory").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `[store]` for a backend.
fn store_section(backend: &str, dir: &Path, redis_port: Option<u16>) -> String {
    match backend {
        "memory" => "[store]\nbackend = \"memory\"\n".into(),
        "embedded" => format!(
            "[store]\nbackend = \"embedded\"\npath = {:?}\n",
            dir.join("state.redb").display().to_string()
        ),
        _ => format!(
            "[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{}\"\n",
            redis_port.unwrap()
        ),
    }
}

fn start_gateway(dir: &Path, store: &str) -> (Proc, String) {
    let cat = dir.join("catalog.json");
    std::fs::write(&cat, CATALOG).unwrap();
    let cfg = dir.join("toolgate.toml");
    std::fs::write(
        &cfg,
        format!(
            "[gateway]\nmode = \"guided\"\nstartup_wait_ms = 30000\n{store}[upstreams.bench]\ncommand = {:?}\nargs = [\"fixture\", \"--catalog\", {:?}]\n",
            toolgate().display().to_string(),
            cat.display().to_string()
        ),
    )
    .unwrap();
    let mut child = Command::new(toolgate())
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&cfg)
        .env("TOOLGATE_STORE_KEY", KEY)
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolgate");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("MCP endpoint: ") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("toolgate printed its endpoint");
    (Proc(child), url)
}

async fn call(client: &Client, tool: &str, args: Value) -> Value {
    let r = client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .expect("call");
    assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
    r.structured_content.unwrap_or(Value::Null)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    backend: &'static str,
    page_us: f64,
    round_trip_us: f64,
    rss_mib: f64,
    server_mib: Option<f64>,
}

async fn latencies(client: &Client, rounds: usize) -> (f64, f64) {
    // continue: every page of 20 results of 200 kB (about 13 pages each).
    let mut pages = Vec::new();
    for _ in 0..20 {
        let s = call(
            client,
            "execute",
            json!({"tool": "bench/echo", "arguments": {"message": "m", "_result_bytes": 200_000}}),
        )
        .await;
        let mut cursor = s["nextCursor"].as_str().expect("paged").to_string();
        loop {
            let t = Instant::now();
            let s = call(client, "continue", json!({"cursor": cursor})).await;
            pages.push(t.elapsed().as_secs_f64() * 1e6);
            match s["nextCursor"].as_str() {
                Some(c) => cursor = c.to_string(),
                None => break,
            }
        }
    }
    // route -> execute of its selection, a small result.
    let mut trips = Vec::new();
    for i in 0..rounds + 20 {
        let t = Instant::now();
        let s = call(client, "route", json!({"task": "echo a message back"})).await;
        let sel = s["selectionId"].as_str().expect("selected").to_string();
        call(
            client,
            "execute",
            json!({"selectionId": sel, "arguments": {"message": "hello"}}),
        )
        .await;
        if i >= 20 {
            trips.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    (median(pages), median(trips))
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Child mode: keeps 10,000 paged results (two 1 KiB pages each) idle in a session store
/// over `backend`, and prints the RSS it grew by, in KiB.
fn idle_cursors(backend: &str, dir: &Path, redis_port: Option<u16>) {
    use toolgate_core::exec::{SessionStore, StoreLimits};
    use toolgate_core::store::Store;
    let store: Option<std::sync::Arc<dyn Store>> = match backend {
        "memory" => None,
        "embedded" => Some(std::sync::Arc::new(
            toolgate_core::store::EmbeddedStore::open(
                &dir.join("idle.redb"),
                toolgate_core::store::Sealer::new([9; 32]),
            )
            .unwrap(),
        )),
        _ => Some(std::sync::Arc::new(
            toolgate_core::store::RedisStore::open(
                &format!("redis://127.0.0.1:{}", redis_port.unwrap()),
                toolgate_core::store::Sealer::new([9; 32]),
            )
            .unwrap(),
        )),
    };
    let limits = StoreLimits {
        max_cursors: IDLE_CURSORS * 2,
        max_cursors_per_owner: IDLE_CURSORS * 2,
        max_bytes: 1 << 30,
        ..StoreLimits::default()
    };
    let s: SessionStore =
        SessionStore::new(limits).with_durable(store, tokio_util::sync::CancellationToken::new());
    let owner = toolgate_core::principal::Principal::local();
    let page = "x".repeat(1024);
    let before = rss_kib();
    let mut keep = Vec::with_capacity(IDLE_CURSORS);
    for _ in 0..IDLE_CURSORS {
        keep.push(
            s.put_pages(&owner, vec![page.clone(), page.clone()])
                .unwrap(),
        );
    }
    println!("{}", rss_kib().saturating_sub(before));
}

fn measure_idle(backend: &str, dir: &Path, redis_port: Option<u16>) -> (f64, Option<f64>) {
    let server_before = redis_port.map(redis_used_memory);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--idle-cursors", backend]).arg(dir);
    if let Some(p) = redis_port {
        cmd.arg(p.to_string());
    }
    let out = cmd.output().expect("child");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kib: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let server = redis_port
        .filter(|_| backend == "redis")
        .map(|p| (redis_used_memory(p).saturating_sub(server_before.unwrap())) as f64 / 1048576.0);
    (kib / 1024.0, server)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--idle-cursors") {
        let port = args.get(i + 3).and_then(|p| p.parse().ok());
        idle_cursors(&args[i + 1], Path::new(&args[i + 2]), port);
        return;
    }
    let rounds: usize = std::env::var("STORE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let work = tempfile::tempdir().unwrap();
    let redis = start_redis(work.path());
    let redis_port = redis.as_ref().map(|(_, p)| *p);
    if redis.is_none() {
        println!("(redis-server not installed: the redis row is skipped)");
    }
    let mut rows = Vec::new();
    for backend in ["memory", "embedded", "redis"] {
        if backend == "redis" && redis_port.is_none() {
            continue;
        }
        let dir = work.path().join(backend);
        std::fs::create_dir_all(&dir).unwrap();
        let (gw, url) = start_gateway(&dir, &store_section(backend, &dir, redis_port));
        let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await.expect("connect");
        let (page_us, round_trip_us) = latencies(&client, rounds).await;
        let _ = client.cancel().await;
        drop(gw);
        let (rss_mib, server_mib) = measure_idle(backend, &dir, redis_port);
        rows.push(Row {
            backend,
            page_us,
            round_trip_us,
            rss_mib,
            server_mib,
        });
    }
    let base = &rows[0];
    let (bp, bt, bm) = (base.page_us, base.round_trip_us, base.rss_mib);
    println!("| backend | continue per page (median) | × memory | route → execute (median) | × memory | 10,000 idle cursors: gateway RSS | store server |");
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {:.0} µs | {:.2}× | {:.0} µs | {:.2}× | {:.1} MiB ({:.2}×) | {} |",
            r.backend,
            r.page_us,
            r.page_us / bp,
            r.round_trip_us,
            r.round_trip_us / bt,
            r.rss_mib,
            r.rss_mib / bm,
            r.server_mib
                .map_or("-".to_string(), |m| format!("{m:.1} MiB")),
        );
    }
}
