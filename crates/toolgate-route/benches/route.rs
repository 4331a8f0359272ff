//! Route latency on a 10,000-tool catalog (realcat repeated under new server names), side
//! by side with realcat itself: index build time, route p50/p99, one server's re-index;
//! each without task-side synonyms (`synonyms` 0) and with the default weight, same run;
//! then the large catalog again with 10,000 learned examples (`learned`: the examples'
//! votes and route together, as the gateway routes a caller).
//!
//! Run: `cargo bench -p toolgate-route --bench route`. Reads the repository's `datasets/` (or
//! `TOOLGATE_DATASETS`); exits non-zero when they are missing.
//!
//! Options after `--`: `--last` measures only the last row (10,000 tools with 10,000 learned
//! examples, where route's p99 goal of 1 ms is measured), `--passes N` times every task N times (default 3; the
//! best-of column is each task's best of them). On a shared VM the raw p99 of one run moves by
//! a fifth; `-- --last --passes 10`, repeated, tells a 5% change apart.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use toolgate_core::catalog::{
    datasets_dir, load_catalog_file, load_queries_file, Catalog, CatalogEntry,
};
use toolgate_route::eval::percentile;
use toolgate_route::route_with;
use toolgate_route::{
    route, Bm25fParams, Learned, LearnedExample, LearningMode, LearningSettings, RouteIndex,
    RouteOptions,
};

/// Tools in the large catalog (at least), and learned examples in its last row.
const LARGE: usize = 10_000;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("route bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The command line after `--` (cargo adds `--bench`, which is ignored).
struct Args {
    last: bool,
    passes: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut out = Args {
        last: false,
        passes: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--last" => out.last = true,
            "--passes" => {
                let n = it.next().unwrap_or_default();
                out.passes = match n.parse() {
                    Ok(n) if n > 0 => n,
                    _ => anyhow::bail!("--passes {n:?}: give a whole number of passes, at least 1"),
                };
            }
            "--bench" => {}
            other => {
                anyhow::bail!("unknown option {other:?}: the options are --last and --passes N")
            }
        }
    }
    Ok(out)
}

fn run() -> anyhow::Result<()> {
    let args = args()?;
    let dir = datasets_dir();
    let realcat = dir.join("realcat/catalog.json");
    if !realcat.exists() {
        anyhow::bail!(
            "datasets not found at {} (the repository's datasets/ folder, or set TOOLGATE_DATASETS)",
            dir.display()
        );
    }
    let entries = load_catalog_file(&realcat)?;
    // Task texts: LiveMCPBench's long multi-step tasks and a slice of MetaTool's requests.
    let mut tasks: Vec<String> = Vec::new();
    for (set, take) in [("livemcpbench", usize::MAX), ("metatool", 2000)] {
        let q = load_queries_file(&dir.join(set).join("queries.jsonl"))?;
        tasks.extend(q.into_iter().take(take).map(|q| q.query));
    }
    // Learned examples: MetaTool requests not among the tasks, each taught for one tool.
    let example_tasks: Vec<String> = load_queries_file(&dir.join("metatool/queries.jsonl"))?
        .into_iter()
        .skip(2000)
        .take(LARGE)
        .map(|q| q.query)
        .collect();
    println!("{} tasks; times in microseconds unless marked", tasks.len());
    println!(
        "{:>8} {:>9} {:>8} {:>10} {:>9} {:>9} {:>13} {:>12}",
        "tools",
        "synonyms",
        "learned",
        "build ms",
        "p50",
        "p99",
        format!("p99 best-of-{}", args.passes),
        "reindex ms"
    );
    let default_sw = Bm25fParams::default().synonym_weight;
    let copies = LARGE.div_ceil(entries.len());
    let rows = [
        (1, 0.0, false),
        (1, default_sw, false),
        (copies, 0.0, false),
        (copies, default_sw, false),
        (copies, default_sw, true),
    ];
    let rows = if args.last {
        &rows[rows.len() - 1..]
    } else {
        &rows[..]
    };
    for &(n, sw, learned) in rows {
        let big: Vec<CatalogEntry> = (0..n)
            .flat_map(|i| {
                entries.iter().map(move |e| CatalogEntry {
                    server: if i == 0 {
                        e.server.clone()
                    } else {
                        format!("{}-{i}", e.server)
                    },
                    tool: e.tool.clone(),
                })
            })
            .collect();
        let catalog = Catalog::from_entries(big);
        let start = Instant::now();
        let params = Bm25fParams {
            synonym_weight: sw,
            ..Bm25fParams::default()
        };
        let mut index = RouteIndex::with_params(&catalog, params);
        let build_ms = start.elapsed().as_secs_f64() * 1e3;
        let opts = RouteOptions::default();
        let settings = LearningSettings {
            mode: LearningMode::Shared,
            max_per_principal: LARGE,
            ..LearningSettings::default()
        };
        let mut set = Learned::new(settings.clone());
        if learned {
            let tools = catalog.tools();
            set.replace(
                example_tasks
                    .iter()
                    .enumerate()
                    .map(|(i, task)| LearnedExample {
                        task: task.clone(),
                        server: tools[i % tools.len()].id.server.clone(),
                        name: tools[i % tools.len()].id.name.clone(),
                        principal: ["a", "b", "c"][i % 3].into(),
                        profile: String::new(),
                        at_ms: 0,
                    })
                    .collect(),
            );
        }
        let never = |_: &toolgate_core::catalog::ToolRecord| false;
        let route_one = |t: &str| {
            if learned {
                let evidence = set.evidence(t, "a", "");
                route_with(&index, t, &opts, &evidence, &settings, &never)
            } else {
                route(&index, t, &opts)
            }
        };
        // One warm-up pass, then the measured passes.
        for t in &tasks {
            std::hint::black_box(route_one(t));
        }
        let mut lat = Vec::with_capacity(tasks.len() * args.passes);
        for _ in 0..args.passes {
            for t in &tasks {
                let start = Instant::now();
                std::hint::black_box(route_one(t));
                lat.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
        // Each task's best of its runs: filters out preemption on a shared machine.
        let mut best: Vec<f64> =
            lat.chunks(tasks.len())
                .fold(vec![f64::MAX; tasks.len()], |mut m, run| {
                    m.iter_mut().zip(run).for_each(|(m, &v)| *m = m.min(v));
                    m
                });
        best.sort_by(f64::total_cmp);
        lat.sort_by(f64::total_cmp);
        let github: Vec<Arc<_>> = catalog
            .tools()
            .iter()
            .filter(|t| t.id.server == "github")
            .cloned()
            .collect();
        let start = Instant::now();
        index.replace_server("github", github);
        let reindex_ms = start.elapsed().as_secs_f64() * 1e3;
        println!(
            "{:>8} {:>9} {:>8} {:>10.1} {:>9.1} {:>9.1} {:>13.1} {:>12.2}",
            catalog.len(),
            sw,
            set.len(),
            build_ms,
            percentile(&lat, 0.50),
            percentile(&lat, 0.99),
            percentile(&best, 0.99),
            reindex_ms
        );
        if learned {
            // The examples' votes alone (`Learned::evidence`), what learning adds per call.
            let mut alone = Vec::with_capacity(tasks.len() * args.passes);
            for _ in 0..args.passes {
                for t in &tasks {
                    let start = Instant::now();
                    std::hint::black_box(set.evidence(t, "a", ""));
                    alone.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
            alone.sort_by(f64::total_cmp);
            println!(
                "{:>8} {:>9} {:>8} {:>10} {:>9.1} {:>9.1}   (the learned examples' votes alone)",
                "",
                "",
                set.len(),
                "",
                percentile(&alone, 0.50),
                percentile(&alone, 0.99),
            );
        }
    }
    Ok(())
}
