//! The gateway's added latency: the same fixture tool called directly and through
//! toolgate, over stdio and over HTTP, in one run. Prints medians, p99 and calls per
//! second, with the ratio of each through-toolgate figure to its direct baseline.
//!
//! `cargo bench -p toolgate-cli --bench overhead` (release build). `OVERHEAD_CALLS`
//! sets the number of calls per measurement (default 2000).

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ()>;

const CATALOG: &str = r#"[{"server":"bench","tool":{"name":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}}]"#;

fn toolgate() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate"))
}

/// Starts a process and returns it with the first stdout/stderr line containing `marker`.
fn start_and_read(mut cmd: Command, marker: &str, from_stderr: bool) -> (Child, String) {
    if from_stderr {
        cmd.stderr(Stdio::piped()).stdout(Stdio::null());
    } else {
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    }
    let mut child = cmd.stdin(Stdio::null()).spawn().expect("start");
    let reader: Box<dyn std::io::Read + Send> = if from_stderr {
        Box::new(child.stderr.take().unwrap())
    } else {
        Box::new(child.stdout.take().unwrap())
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let marker = marker.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines().map_while(Result::ok) {
            if let Some(i) = line.find(&marker) {
                let url = line[i + marker.len()..]
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let _ = tx.send(url);
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("address line");
    (child, url)
}

async fn stdio_client(args: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.args(args).stderr(Stdio::null());
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("connect")
}

async fn http_client(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
        .await
        .expect("connect")
}

struct Figures {
    p50_us: f64,
    p99_us: f64,
    calls_per_sec: f64,
}

async fn measure(client: &Client, tool: &str, n: usize) -> Figures {
    let call = || {
        client.call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(json!({"message": "hello"}).as_object().unwrap().clone()),
        )
    };
    for _ in 0..50 {
        call().await.expect("warm-up call");
    }
    let mut lat = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        call().await.expect("call");
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let total = start.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    Figures {
        p50_us: lat[n / 2],
        p99_us: lat[(n * 99 / 100).min(n - 1)],
        calls_per_sec: n as f64 / total,
    }
}

fn row(label: &str, direct: &Figures, gw: &Figures) {
    println!(
        "| {label} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} µs | {:.2}× | {:.0} | {:.0} | {:.2}× |",
        direct.p50_us,
        gw.p50_us,
        direct.p99_us,
        gw.p99_us,
        gw.p50_us - direct.p50_us,
        gw.p50_us / direct.p50_us,
        direct.calls_per_sec,
        gw.calls_per_sec,
        gw.calls_per_sec / direct.calls_per_sec
    );
}

fn config(dir: &Path, upstream: &str) -> PathBuf {
    let p = dir.join("toolgate.toml");
    std::fs::write(&p, format!("[gateway]\nmode = \"direct\"\n{upstream}")).unwrap();
    p
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("OVERHEAD_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    std::fs::write(&catalog, CATALOG).unwrap();
    let cat = catalog.display().to_string();
    let exe = toolgate().display().to_string();

    // stdio: client -> fixture, and client -> toolgate -> fixture (stdio child).
    let direct = stdio_client(&["fixture", "--catalog", &cat]).await;
    let d_stdio = measure(&direct, "echo", n).await;
    let _ = direct.cancel().await;
    let up = format!(
        "[upstreams.bench]\ncommand = {exe:?}\nargs = [\"fixture\", \"--catalog\", {cat:?}]\n"
    );
    let cfg = config(dir.path(), &up);
    let gw = stdio_client(&["serve", "--stdio", "--config", cfg.to_str().unwrap()]).await;
    let g_stdio = measure(&gw, "bench_echo", n).await;
    let _ = gw.cancel().await;

    // HTTP: client -> fixture over HTTP, and client -> toolgate (HTTP) -> fixture (HTTP).
    let mut fx = Command::new(toolgate());
    fx.args(["fixture", "--catalog", &cat, "--http", "127.0.0.1:0"]);
    let (mut fixture, fx_url) = start_and_read(fx, "listening ", false);
    let direct = http_client(&fx_url).await;
    let d_http = measure(&direct, "echo", n).await;
    let _ = direct.cancel().await;
    let cfg = config(
        dir.path(),
        &format!("[upstreams.bench]\nurl = {fx_url:?}\n"),
    );
    let mut g = Command::new(toolgate());
    // The embedded store in the bench's folder, not the user's state folder.
    g.env("XDG_STATE_HOME", dir.path().join("state"));
    g.args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    let (mut gateway, gw_url) = start_and_read(g, "MCP endpoint: ", true);
    let gw = http_client(&gw_url).await;
    let g_http = measure(&gw, "bench_echo", n).await;
    let _ = gw.cancel().await;
    let _ = gateway.kill();
    let _ = fixture.kill();
    let _ = (gateway.wait(), fixture.wait());

    println!("\n{n} sequential calls each, after 50 warm-up calls; latencies in µs\n");
    println!("| transport | direct p50 | toolgate p50 | direct p99 | toolgate p99 | added p50 | p50 ratio | direct calls/s | toolgate calls/s | calls/s ratio |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    row("stdio", &d_stdio, &g_stdio);
    row("HTTP", &d_http, &g_http);
}
