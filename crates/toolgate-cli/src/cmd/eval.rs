//! `toolgate eval route`: route every labelled query of a query file against a catalog file
//! and report ranking quality, the select-or-clarify trade-off and latency.

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use toolgate::catalog::{load_catalog_file, load_queries_file, Catalog};
use toolgate::route::eval::{evaluate, summarize, sweep, sweep_thresholds, Split, Summary};
use toolgate::route::{Bm25fParams, RouteIndex, RouteOptions, DEFAULT_THRESHOLD};

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Evaluate route (retrieval and the select-or-clarify decision) on labelled queries.
    Route(RouteArgs),
}

#[derive(Args)]
pub struct RouteArgs {
    /// A catalog file (JSON array of {"server", "tool"}).
    #[arg(long)]
    catalog: PathBuf,
    /// A labelled query file (JSON lines of {"query", "expected"}).
    #[arg(long)]
    queries: PathBuf,
    /// How many ranked tools to keep per query (at least 5 for R@5 and nDCG@5).
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// One JSON line per query, then a JSON summary line.
    #[arg(long)]
    json: bool,
    /// Select when the confidence reaches this; below it, ask.
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    threshold: f32,
    /// Also print precision and coverage for thresholds 0.20..=1.00.
    #[arg(long)]
    sweep: bool,
    /// Which queries: all, tune (index mod 5 == 0) or test (the rest).
    #[arg(long, value_enum, default_value_t = SplitArg::All)]
    split: SplitArg,
    /// BM25F parameters as JSON, e.g. '{"k1":1.2,"weights":[3,2,1,0.4,1]}' (unset keys keep defaults).
    #[arg(long)]
    params: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum SplitArg {
    All,
    Tune,
    Test,
}

pub fn run(cmd: EvalCommand) -> Result<()> {
    match cmd {
        EvalCommand::Route(args) => route(args),
    }
}

fn route(args: RouteArgs) -> Result<()> {
    let params: Bm25fParams = match &args.params {
        Some(text) => serde_json::from_str(text).context("--params is not BM25F parameters")?,
        None => Bm25fParams::default(),
    };
    let catalog = Catalog::from_entries(load_catalog_file(&args.catalog)?);
    let index = RouteIndex::with_params(&catalog, params);
    let split = match args.split {
        SplitArg::All => Split::All,
        SplitArg::Tune => Split::Tune,
        SplitArg::Test => Split::Test,
    };
    let queries: Vec<_> = load_queries_file(&args.queries)?
        .into_iter()
        .enumerate()
        .filter(|(i, _)| split.keeps(*i))
        .map(|(_, q)| q)
        .collect();
    let opts = RouteOptions {
        threshold: args.threshold,
        depth: args.k.max(5),
        ..RouteOptions::default()
    };
    let outcomes = evaluate(&index, &queries, &opts);
    let summary = summarize(&outcomes, args.threshold);
    let rows = if args.sweep {
        sweep(&outcomes, &sweep_thresholds())
    } else {
        Vec::new()
    };
    // Written through a locked handle so a closed pipe (`| head`) is an error, not a panic.
    let mut out = std::io::stdout().lock();
    if args.json {
        for o in &outcomes {
            let ranked: Vec<_> = o
                .ranked
                .iter()
                .take(args.k)
                .map(|(s, n, score)| json!({"server": s, "name": n, "score": score}))
                .collect();
            let decision = if o.selects(args.threshold) {
                "select"
            } else {
                "clarify"
            };
            let line = json!({
                "query": o.query,
                "decision": decision,
                "confidence": o.confidence,
                "expected": o.expected,
                "ranked": ranked,
            });
            writeln!(out, "{line}")?;
        }
        let mut line = serde_json::to_value(&summary)?;
        if args.sweep {
            line["sweep"] = serde_json::to_value(&rows)?;
        }
        writeln!(out, "{line}")?;
        return Ok(());
    }
    print_table(&mut out, &summary)?;
    if args.sweep {
        writeln!(
            out,
            "\n{:>9}  {:>8}  {:>9}  {:>12}",
            "threshold", "coverage", "precision", "wrong-select"
        )?;
        for r in &rows {
            writeln!(
                out,
                "{:>9.2}  {:>8.3}  {:>9.3}  {:>12.3}",
                r.threshold, r.coverage, r.precision, r.wrong_select_rate
            )?;
        }
    }
    Ok(())
}

fn print_table(out: &mut impl Write, s: &Summary) -> Result<()> {
    let rows: [(&str, String); 10] = [
        ("queries", s.queries.to_string()),
        ("threshold", format!("{:.2}", s.threshold)),
        ("P@1", format!("{:.3}", s.p_at_1)),
        ("R@5", format!("{:.3}", s.r_at_5)),
        ("nDCG@5", format!("{:.3}", s.ndcg_at_5)),
        ("clarify rate", format!("{:.3}", s.clarify_rate)),
        ("wrong-select rate", format!("{:.3}", s.wrong_select_rate)),
        (
            "selection precision",
            format!("{:.3}", s.selection_precision),
        ),
        ("route p50 (us)", format!("{:.1}", s.latency_p50_us)),
        ("route p99 (us)", format!("{:.1}", s.latency_p99_us)),
    ];
    for (name, value) in rows {
        writeln!(out, "{name:<20} {value:>10}")?;
    }
    Ok(())
}
