//! `toolgate eval route`: route every labelled query of a query file against a catalog file
//! and report ranking quality, the select-or-clarify trade-off and latency.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use toolgate_core::catalog::{load_catalog_file, load_queries_file, Catalog, LabelledQuery};
use toolgate_route::eval::{evaluate, summarize, sweep, sweep_thresholds, Split, Summary};
use toolgate_route::FEATURE_NAMES;
use toolgate_route::{
    Bm25fParams, Retriever, RouteExamples, RouteIndex, RouteOptions, DEFAULT_THRESHOLD,
    EXAMPLES_THRESHOLD,
};

#[derive(Subcommand)]
pub(crate) enum EvalCommand {
    /// Evaluate route (retrieval and the select-or-clarify decision) on labelled queries.
    Route(RouteArgs),
}

#[derive(Args)]
pub(crate) struct RouteArgs {
    /// A catalog file (JSON array of {"server", "tool"}).
    #[arg(long, required_unless_present = "leave_one_out")]
    catalog: Option<PathBuf>,
    /// A labelled query file (JSON lines of {"query", "expected"}).
    #[arg(long, required_unless_present = "leave_one_out")]
    queries: Option<PathBuf>,
    /// Check the calibrated decision on catalogs it was not fitted on: each folder holds
    /// catalog.json and queries.jsonl; the model is fitted on the other folders' tuning
    /// splits and measured on each one in turn (prints the tables of docs/routing.md).
    #[arg(long, num_args = 2.., value_name = "DIR", conflicts_with_all = ["catalog", "queries"])]
    leave_one_out: Vec<PathBuf>,
    /// How many ranked tools to keep per query (at least 5 for R@5 and nDCG@5).
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// One JSON line per query, then a JSON summary line.
    #[arg(long)]
    json: bool,
    /// Select when the confidence reaches this; below it, ask. Defaults to 0.84 for
    /// BM25F, calibrated (0.94 with example tasks, as in the gateway) and to the hybrid's own
    /// threshold with --embed-model.
    #[arg(long)]
    threshold: Option<f32>,
    /// Also print precision and coverage for thresholds 0.20..=1.00.
    #[arg(long)]
    sweep: bool,
    /// Which queries: all, tune (index mod 5 == 0) or test (the rest).
    #[arg(long, value_enum, default_value_t = SplitArg::All)]
    split: SplitArg,
    /// BM25F parameters as JSON, e.g. '{"k1":1.2,"weights":[3,2,1,0.4,1,0.5,0.3]}' (unset keys keep defaults).
    #[arg(long)]
    params: Option<String>,
    /// Rank with the hybrid (BM25F fused with sentence embeddings) using the model in this
    /// folder (all-MiniLM-L6-v2 in sentence-transformers layout, see
    /// scripts/fetch-embed-model.sh; needs a build with `--features embed`) or the static
    /// vectors in this file (any build; scripts/distill-vectors.sh writes one). Also read
    /// from TOOLGATE_EMBED_MODEL when `--hybrid` is given.
    #[arg(long)]
    embed_model: Option<PathBuf>,
    /// Use the hybrid with the model named by TOOLGATE_EMBED_MODEL.
    #[arg(long)]
    hybrid: bool,
    /// Fusion parameters as JSON, e.g. '{"mode":"score","weight":0.5}' (hybrid only).
    #[arg(long)]
    fusion: Option<String>,
    /// Hybrid only: embed all queries first in batches, then report each of these
    /// embedding weights (comma-separated) in one line each; latency then excludes the
    /// query embedding.
    #[arg(long, value_delimiter = ',')]
    weights: Vec<f32>,
    /// Example tasks (a labelled query file): each query is indexed as an example of the
    /// tools it expects, as `guided.route_examples` does in the gateway.
    #[arg(long)]
    examples: Option<PathBuf>,
    /// Use the tuning split of --queries (index mod 5 == 0) as example tasks; needs
    /// `--split test`, so no query is ranked against itself.
    #[arg(long)]
    examples_from_tune: bool,
    /// Replay the traffic split through route as a model would use it (clarifications
    /// answered by execute, browses), learning from each choice, then route the test split
    /// with what was learned: the learning curve, P@1 and R@5 with and without learning.
    #[arg(long)]
    replay: bool,
    /// With --replay: this share of the traffic, all from one principal, executes a wrong
    /// candidate.
    #[arg(long, requires = "replay")]
    poison: Option<f64>,
    /// Also measure the share of each task's expected tools route's answer offers, without
    /// and with the best tool of each step of a task of several steps.
    #[arg(long, conflicts_with = "replay")]
    steps: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum SplitArg {
    All,
    Tune,
    Test,
}

pub(crate) fn run(cmd: EvalCommand) -> Result<()> {
    match cmd {
        EvalCommand::Route(args) => route(args),
    }
}

fn route(args: RouteArgs) -> Result<()> {
    let params: Bm25fParams = match &args.params {
        Some(text) => serde_json::from_str(text).context("--params is not BM25F parameters")?,
        None => Bm25fParams::default(),
    };
    if !args.leave_one_out.is_empty() {
        return super::eval_loo::run(&args.leave_one_out, args.threshold, &params);
    }
    let catalog = Catalog::from_entries(load_catalog_file(catalog_path(&args)?)?);
    let examples = Arc::new(examples(&args)?);
    if !args.weights.is_empty() {
        return weight_sweep(&args, &catalog, params, examples);
    }
    let started = Instant::now();
    let (index, default_threshold): (Box<dyn Retriever>, f32) =
        if args.embed_model.is_some() || args.hybrid {
            hybrid(&args, &catalog, params, examples.clone())?
        } else {
            if args.fusion.is_some() {
                bail!("--fusion applies to the hybrid: add --embed-model DIR or --hybrid");
            }
            let index = RouteIndex::with_examples(&catalog, params, examples.clone());
            // The gateway's default: lower with example tasks (see guided.route_examples).
            let threshold = if examples.is_empty() {
                DEFAULT_THRESHOLD
            } else {
                EXAMPLES_THRESHOLD
            };
            (Box::new(index), threshold)
        };
    let build_ms = started.elapsed().as_secs_f64() * 1e3;
    let threshold = args.threshold.unwrap_or(default_threshold);
    let queries = split_queries(&args)?;
    let opts = RouteOptions {
        threshold,
        depth: args.k.max(5),
        ..RouteOptions::default()
    };
    if args.replay {
        return super::eval_replay::run(
            index.as_ref(),
            queries,
            &opts,
            args.poison.unwrap_or(0.0),
            args.json,
        );
    }
    let outcomes = evaluate(index.as_ref(), &queries, &opts);
    let summary = summarize(&outcomes, threshold);
    let steps = (args.steps)
        .then(|| super::eval_steps::measure(index.as_ref(), &queries, &outcomes, threshold));
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
            let decision = if o.selects(threshold) {
                "select"
            } else if o.nothing_fits {
                "none"
            } else {
                "clarify"
            };
            let mut line = json!({
                "query": o.query,
                "decision": decision,
                "confidence": o.confidence,
                "expected": o.expected,
                "ranked": ranked,
            });
            if let Some(x) = &o.features {
                // The calibrated decision's inputs, by name (for refitting elsewhere).
                let named: serde_json::Map<_, _> = FEATURE_NAMES
                    .iter()
                    .zip(x)
                    .map(|(n, v)| (n.to_string(), json!(v)))
                    .collect();
                line["features"] = named.into();
                line["may_select"] = json!(o.may_select);
            }
            writeln!(out, "{line}")?;
        }
        let mut line = serde_json::to_value(&summary)?;
        line["index_build_ms"] = json!(build_ms);
        line["examples"] = json!(examples.len());
        if args.sweep {
            line["sweep"] = serde_json::to_value(&rows)?;
        }
        if let Some(steps) = &steps {
            line["steps"] = serde_json::to_value(steps)?;
        }
        writeln!(out, "{line}")?;
        return Ok(());
    }
    print_table(&mut out, &summary)?;
    if let Some(s) = &steps {
        writeln!(
            out,
            "{:<20} {:>10.3}  ({:.1} tools offered)",
            "answer coverage", s.answer_coverage, s.offered
        )?;
        writeln!(
            out,
            "{:<20} {:>10.3}  ({:.1} tools offered; {} of {} tasks with steps)",
            "  with steps", s.answer_coverage_steps, s.offered_steps, s.with_steps, s.queries
        )?;
    }
    writeln!(out, "{:<20} {:>10.1}", "index build (ms)", build_ms)?;
    writeln!(out, "{:<20} {:>10}", "example tasks", examples.len())?;
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

/// The example tasks from `--examples` and `--examples-from-tune`.
fn examples(args: &RouteArgs) -> Result<RouteExamples> {
    let mut labelled = Vec::new();
    if let Some(path) = &args.examples {
        labelled.extend(load_queries_file(path)?);
    }
    if args.examples_from_tune {
        if !matches!(args.split, SplitArg::Test) {
            bail!(
                "--examples-from-tune indexes the tuning split as examples: evaluate on \
                 the other queries with --split test"
            );
        }
        labelled.extend(
            load_queries_file(queries_path(args)?)?
                .into_iter()
                .enumerate()
                .filter(|(i, _)| Split::Tune.keeps(*i))
                .map(|(_, q)| q),
        );
    }
    Ok(RouteExamples::from_queries(&labelled))
}

fn catalog_path(args: &RouteArgs) -> Result<&PathBuf> {
    args.catalog.as_ref().context("--catalog FILE is required")
}

fn queries_path(args: &RouteArgs) -> Result<&PathBuf> {
    args.queries.as_ref().context("--queries FILE is required")
}

/// The labelled queries of the chosen split.
fn split_queries(args: &RouteArgs) -> Result<Vec<LabelledQuery>> {
    let split = match args.split {
        SplitArg::All => Split::All,
        SplitArg::Tune => Split::Tune,
        SplitArg::Test => Split::Test,
    };
    Ok(load_queries_file(queries_path(args)?)?
        .into_iter()
        .enumerate()
        .filter(|(i, _)| split.keeps(*i))
        .map(|(_, q)| q)
        .collect())
}

/// `--weights`: one summary line per fusion weight over query vectors embedded once.
fn weight_sweep(
    args: &RouteArgs,
    catalog: &Catalog,
    params: Bm25fParams,
    examples: Arc<RouteExamples>,
) -> Result<()> {
    use toolgate_route::{Embedder, FusionParams, HybridIndex, PrecomputedQueries};
    let fusion: FusionParams = match &args.fusion {
        Some(text) => serde_json::from_str(text).context("--fusion is not fusion parameters")?,
        None => FusionParams::default(),
    };
    let embedder = Arc::new(Embedder::from_dir_or_env(args.embed_model.as_deref())?);
    let started = Instant::now();
    let mut index =
        HybridIndex::with_examples(catalog, params, embedder, fusion.clone(), examples)?;
    let build_ms = started.elapsed().as_secs_f64() * 1e3;
    let queries = split_queries(args)?;
    let texts: Vec<&str> = queries.iter().map(|q| q.query.as_str()).collect();
    let started = Instant::now();
    let vectors = PrecomputedQueries::embed_all(&index, &texts)?;
    let embed_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} queries; index build {build_ms:.0} ms; queries embedded in batches {embed_ms:.0} ms",
        queries.len()
    )?;
    writeln!(
        out,
        "{:>6}  {:>5}  {:>5}  {:>6}  {:>9}  {:>9}  {:>9}  (coverage at 90% precision: threshold)",
        "weight", "P@1", "R@5", "nDCG@5", "threshold", "clarify", "precision"
    )?;
    for &weight in &args.weights {
        index.set_params(FusionParams {
            weight,
            ..fusion.clone()
        });
        let retriever = PrecomputedQueries {
            index: &index,
            vectors: &vectors,
        };
        let opts = RouteOptions {
            threshold: args.threshold.unwrap_or(toolgate_route::HYBRID_THRESHOLD),
            depth: args.k.max(5),
            ..RouteOptions::default()
        };
        let outcomes = evaluate(&retriever, &queries, &opts);
        let s = summarize(&outcomes, opts.threshold);
        let rows = sweep(&outcomes, &sweep_thresholds());
        let at90 = rows.iter().find(|r| r.precision >= 0.9 && r.coverage > 0.0);
        let at90 = at90.map_or("-".to_string(), |r| {
            format!("{:.3} at {:.2}", r.coverage, r.threshold)
        });
        writeln!(
            out,
            "{weight:>6.2}  {:>5.3}  {:>5.3}  {:>6.3}  {:>9.2}  {:>9.3}  {:>9.3}  {at90}",
            s.p_at_1, s.r_at_5, s.ndcg_at_5, s.threshold, s.clarify_rate, s.selection_precision
        )?;
        if args.sweep {
            for r in &rows {
                writeln!(
                    out,
                    "        threshold {:.2}: coverage {:.3} precision {:.3}",
                    r.threshold, r.coverage, r.precision
                )?;
            }
        }
    }
    Ok(())
}

/// The hybrid index and its default threshold.
fn hybrid(
    args: &RouteArgs,
    catalog: &Catalog,
    params: Bm25fParams,
    examples: Arc<RouteExamples>,
) -> Result<(Box<dyn Retriever>, f32)> {
    use toolgate_route::{Embedder, FusionParams, HybridIndex, HYBRID_THRESHOLD};
    let fusion: FusionParams = match &args.fusion {
        Some(text) => serde_json::from_str(text).context("--fusion is not fusion parameters")?,
        None => FusionParams::default(),
    };
    let embedder = Arc::new(Embedder::from_dir_or_env(args.embed_model.as_deref())?);
    let index = HybridIndex::with_examples(catalog, params, embedder, fusion, examples)?;
    Ok((Box::new(index), HYBRID_THRESHOLD))
}

fn print_table(out: &mut impl Write, s: &Summary) -> Result<()> {
    let rows: [(&str, String); 12] = [
        ("queries", s.queries.to_string()),
        ("threshold", format!("{:.2}", s.threshold)),
        ("P@1", format!("{:.3}", s.p_at_1)),
        ("R@5", format!("{:.3}", s.r_at_5)),
        ("nDCG@5", format!("{:.3}", s.ndcg_at_5)),
        ("select rate", format!("{:.3}", 1.0 - s.clarify_rate)),
        ("clarify rate", format!("{:.3}", s.clarify_rate)),
        ("wrong-select rate", format!("{:.3}", s.wrong_select_rate)),
        (
            "selection precision",
            format!("{:.3}", s.selection_precision),
        ),
        ("nothing-fits rate", format!("{:.3}", s.nothing_fits_rate)),
        ("route p50 (us)", format!("{:.1}", s.latency_p50_us)),
        ("route p99 (us)", format!("{:.1}", s.latency_p99_us)),
    ];
    for (name, value) in rows {
        writeln!(out, "{name:<20} {value:>10}")?;
    }
    Ok(())
}
