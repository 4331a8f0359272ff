//! What the worker pool saves: the round trip of `execute_code` (a program making one tool
//! call) through a gateway that starts a worker per run (`pool_size = 0`) and one that keeps
//! two waiting (`pool_size = 2`), measured in one run, the two gateways taking turns.
//! Prints medians, p90 and the ratio.
//!
//! `cargo bench -p toolgate-cli --bench code_pool` (release build). `CODE_POOL_RUNS` sets the
//! runs per gateway (default 300); `CODE_POOL_GAP_MS` the pause between two runs of one
//! gateway (default 50: a model takes seconds between turns, and the pool refills in the
//! background meanwhile). A second table has the same runs back to back, no pause: there
//! the pool is empty by the second run and each run waits for the worker it starts.

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

type Client = RunningService<RoleClient, ()>;

const CATALOG: &str = r#"[{"server":"bench","tool":{"name":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}}]"#;
const PROGRAM: &str =
    "const r = await tools.bench.echo({message: 'hi'}); return r.arguments.message";

fn toolgate() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate"))
}

async fn gateway(dir: &Path, pool_size: usize) -> Client {
    let cat = dir.join("catalog.json").display().to_string();
    let exe = toolgate().display().to_string();
    let cfg = dir.join(format!("pool{pool_size}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[gateway]\nmode = \"guided\"\n[code]\nenabled = true\npool_size = {pool_size}\n\
             [upstreams.bench]\ncommand = {exe:?}\nargs = [\"fixture\", \"--catalog\", {cat:?}]\n"
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.args(["serve", "--stdio", "--config", cfg.to_str().unwrap()])
        .stderr(Stdio::null());
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("connect")
}

/// One execute_code round trip, in µs.
async fn once(client: &Client) -> f64 {
    let args = json!({"code": PROGRAM}).as_object().unwrap().clone();
    let t = Instant::now();
    let r = client
        .call_tool(CallToolRequestParams::new("execute_code").with_arguments(args))
        .await
        .expect("execute_code");
    let us = t.elapsed().as_secs_f64() * 1e6;
    let answer = r.structured_content.unwrap_or_default();
    assert_eq!(answer["result"], "hi", "{answer}");
    us
}

struct Figures {
    p50: f64,
    p90: f64,
}

fn figures(mut lat: Vec<f64>) -> Figures {
    lat.sort_by(f64::total_cmp);
    let n = lat.len();
    Figures {
        p50: if n % 2 == 1 {
            lat[n / 2]
        } else {
            (lat[n / 2 - 1] + lat[n / 2]) / 2.0
        },
        p90: lat[(n * 9 / 10).min(n - 1)],
    }
}

fn table(title: &str, cold: &Figures, warm: &Figures) {
    println!("\n{title}\n");
    println!("| pool_size | p50 | p90 |");
    println!("|---|---|---|");
    println!(
        "| 0 (a worker started per run) | {:.0} µs | {:.0} µs |",
        cold.p50, cold.p90
    );
    println!(
        "| 2 (warm workers) | {:.0} µs | {:.0} µs |",
        warm.p50, warm.p90
    );
    println!(
        "p50 ratio (pool 2 / pool 0): {:.2}×; saved at p50: {:.0} µs",
        warm.p50 / cold.p50,
        cold.p50 - warm.p50
    );
}

#[tokio::main]
async fn main() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("CODE_POOL_RUNS", 300) as usize;
    let gap = Duration::from_millis(env("CODE_POOL_GAP_MS", 50));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("catalog.json"), CATALOG).unwrap();
    let cold = gateway(dir.path(), 0).await;
    let warm = gateway(dir.path(), 2).await;
    for _ in 0..10 {
        once(&cold).await;
        once(&warm).await;
        tokio::time::sleep(gap).await;
    }

    // Turns: cold, warm, pause; so both see the same machine.
    let (mut c, mut w) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        c.push(once(&cold).await);
        w.push(once(&warm).await);
        tokio::time::sleep(gap).await;
    }
    let paced = (figures(c), figures(w));

    // Back to back, in alternating blocks of 20.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (mut c, mut w) = (Vec::with_capacity(n), Vec::with_capacity(n));
    while c.len() < n {
        for _ in 0..20 {
            c.push(once(&cold).await);
        }
        for _ in 0..20 {
            w.push(once(&warm).await);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let burst = (figures(c), figures(w));
    let _ = cold.cancel().await;
    let _ = warm.cancel().await;

    println!(
        "\nexecute_code round trip (a program making one tool call), {n} runs per gateway, stdio"
    );
    table(
        &format!(
            "runs {} ms apart (the pool refills between runs)",
            gap.as_millis()
        ),
        &paced.0,
        &paced.1,
    );
    table("back to back (blocks of 20)", &burst.0, &burst.1);
}
