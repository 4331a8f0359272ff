//! `toolgate eval route --leave-one-out DIR...`: checks the calibrated decision on catalogs
//! it was not fitted on. Each folder holds `catalog.json` and `queries.jsonl`. For each
//! set, the model is fitted on the tuning splits of the others and measured on that set;
//! the threshold is the lowest at which every left-out set, on each of its two splits that
//! selects anything, has at least 90% of its selections right (the rule behind
//! `route::DEFAULT_THRESHOLD`); the final model (fitted on every tuning split, the weights
//! `Calibration::DEFAULT` ships) is then reported on the test splits, with a reliability
//! table of the left-out predictions.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use toolgate_core::catalog::{load_catalog_file, load_queries_file, Catalog};
use toolgate_route::eval::{evaluate, summarize, sweep_row, QueryOutcome, Split};
use toolgate_route::{Bm25fParams, Calibration, RouteIndex, RouteOptions};
use toolgate_route::{Features, FEATURE_NAMES};

/// L2 strength of the fit (on the weights, per unit of sample weight).
const LAMBDA: f64 = 1.0;
/// Share of selections that must be right on every left-out catalog.
const TARGET_PRECISION: f32 = 0.90;

/// One labelled set, ranked once.
struct Set {
    name: String,
    tune: Vec<QueryOutcome>,
    test: Vec<QueryOutcome>,
}

fn load(dir: &Path, params: &Bm25fParams) -> Result<Set> {
    let name = dir
        .file_name()
        .map_or("set".into(), |n| n.to_string_lossy().into_owned());
    let catalog = Catalog::from_entries(
        load_catalog_file(&dir.join("catalog.json"))
            .with_context(|| format!("{}: needs catalog.json", dir.display()))?,
    );
    let queries = load_queries_file(&dir.join("queries.jsonl"))
        .with_context(|| format!("{}: needs queries.jsonl", dir.display()))?;
    let index = RouteIndex::with_params(&catalog, params.clone());
    let (mut tune, mut test) = (Vec::new(), Vec::new());
    for (i, q) in queries.into_iter().enumerate() {
        if Split::Tune.keeps(i) {
            tune.push(q);
        } else {
            test.push(q);
        }
    }
    let opts = RouteOptions::default();
    Ok(Set {
        name,
        tune: evaluate(&index, &tune, &opts),
        test: evaluate(&index, &test, &opts),
    })
}

/// The fitting samples of some sets' tuning splits, each set weighing the same in total.
fn samples<'a>(sets: impl Iterator<Item = &'a Set>) -> Vec<(Features, bool, f32)> {
    let mut out = Vec::new();
    for set in sets {
        let rows: Vec<_> = set
            .tune
            .iter()
            .filter(|o| o.may_select)
            .filter_map(|o| o.features.map(|x| (x, o.top_is_right())))
            .collect();
        let w = 1000.0 / rows.len().max(1) as f32;
        out.extend(rows.into_iter().map(|(x, y)| (x, y, w)));
    }
    out
}

fn rescored(outcomes: &[QueryOutcome], c: &Calibration) -> Vec<QueryOutcome> {
    let mut v = outcomes.to_vec();
    v.iter_mut().for_each(|o| o.rescore(c));
    v
}

/// Thresholds tried, 0.50 to 0.99 in steps of 0.01.
fn thresholds() -> impl Iterator<Item = f32> {
    (50..=99).map(|i| i as f32 / 100.0)
}

pub(crate) fn run(dirs: &[PathBuf], fixed: Option<f32>, params: &Bm25fParams) -> Result<()> {
    if dirs.len() < 2 {
        bail!("--leave-one-out needs at least two set folders (each with catalog.json and queries.jsonl)");
    }
    let sets: Vec<Set> = dirs
        .iter()
        .map(|d| load(d, params))
        .collect::<Result<_>>()?;
    let mut out = std::io::stdout().lock();
    // Each set's tuning and test outcomes under the model fitted without it.
    let held: Vec<(Vec<QueryOutcome>, Vec<QueryOutcome>, Calibration)> = sets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let c = Calibration::fit(
                &samples(
                    sets.iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .map(|(_, s)| s),
                ),
                LAMBDA,
            );
            (rescored(&s.tune, &c), rescored(&s.test, &c), c)
        })
        .collect();
    let chosen = fixed.unwrap_or_else(|| {
        thresholds()
            .find(|&t| {
                held.iter()
                    .flat_map(|(tune, test, _)| [tune, test])
                    .all(|o| holds(o, t))
            })
            .unwrap_or(0.99)
    });
    writeln!(
        out,
        "Left-out tuning splits, per threshold (coverage / selections right):\n"
    )?;
    write!(out, "| threshold |")?;
    for s in &sets {
        write!(out, " {} |", s.name)?;
    }
    writeln!(out, "\n|---|{}", "---|".repeat(sets.len()))?;
    for t in thresholds().step_by(5).chain([0.97, 0.98, 0.99]) {
        write!(out, "| {t:.2} |")?;
        for (tune, _, _) in &held {
            let r = sweep_row(tune, t);
            write!(out, " {:.3} / {:.3} |", r.coverage, r.precision)?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    writeln!(out, "Leave one catalog out: fitted on the others' tuning splits, measured on the left-out set; threshold {chosen:.2}")?;
    match fixed {
        Some(_) => writeln!(out, "(given by --threshold)\n")?,
        None => writeln!(out, "(chosen: the lowest where every left-out set, on each split that selects anything, has >= {TARGET_PRECISION:.2} of its selections right)\n")?,
    }
    writeln!(out, "| left out | split | queries | P@1 | R@5 | select rate | selections right | clarify rate |")?;
    writeln!(out, "|---|---|---|---|---|---|---|---|")?;
    for (s, (tune, test, _)) in sets.iter().zip(&held) {
        for (split, o) in [("tune", tune), ("test", test)] {
            let m = summarize(o, chosen);
            writeln!(
                out,
                "| {} | {split} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                s.name,
                m.queries,
                m.p_at_1,
                m.r_at_5,
                1.0 - m.clarify_rate,
                m.selection_precision,
                m.clarify_rate
            )?;
        }
    }
    let all = Calibration::fit(&samples(sets.iter()), LAMBDA);
    writeln!(
        out,
        "\nFitted on every tuning split (Calibration::DEFAULT):"
    )?;
    writeln!(out, "  bias: {:.4}", all.bias)?;
    for (n, w) in FEATURE_NAMES.iter().zip(all.weights) {
        writeln!(out, "  {n}: {w:.4}")?;
    }
    writeln!(
        out,
        "\nThat model on the test splits at threshold {chosen:.2}:\n"
    )?;
    writeln!(
        out,
        "| set | queries | P@1 | R@5 | nDCG@5 | select rate | selections right | clarify rate |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|")?;
    for s in &sets {
        let m = summarize(&rescored(&s.test, &all), chosen);
        writeln!(
            out,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            s.name,
            m.queries,
            m.p_at_1,
            m.r_at_5,
            m.ndcg_at_5,
            1.0 - m.clarify_rate,
            m.selection_precision,
            m.clarify_rate
        )?;
    }
    needed(&mut out, &sets, &held)?;
    reliability(&mut out, &sets, &held)?;
    Ok(())
}

/// Per left-out set, the lowest threshold at which its own selections are at least
/// [`TARGET_PRECISION`] right, and how many tasks select there: what one shared threshold
/// gives up on each catalog.
fn needed(
    out: &mut impl Write,
    sets: &[Set],
    held: &[(Vec<QueryOutcome>, Vec<QueryOutcome>, Calibration)],
) -> Result<()> {
    writeln!(
        out,
        "\nThe threshold each left-out set needs for >= {TARGET_PRECISION:.2} of its selections right (select rate there):\n"
    )?;
    writeln!(out, "| left out | tune | test |")?;
    writeln!(out, "|---|---|---|")?;
    for (s, (tune, test, _)) in sets.iter().zip(held) {
        let cell = |o: &[QueryOutcome]| {
            (30..=99)
                .map(|i| i as f32 / 100.0)
                .map(|t| (t, sweep_row(o, t)))
                .find(|(_, r)| r.coverage > 0.0 && r.precision >= TARGET_PRECISION)
                .map_or("none".to_string(), |(t, r)| {
                    format!("{t:.2} ({:.3})", r.coverage)
                })
        };
        writeln!(out, "| {} | {} | {} |", s.name, cell(tune), cell(test))?;
    }
    Ok(())
}

/// True when the selections at `t` are at least [`TARGET_PRECISION`] right, or there are
/// none.
fn holds(outcomes: &[QueryOutcome], t: f32) -> bool {
    let r = sweep_row(outcomes, t);
    r.coverage == 0.0 || r.precision >= TARGET_PRECISION
}

/// Confidence bins against accuracy, over the left-out test predictions of every set.
fn reliability(
    out: &mut impl Write,
    sets: &[Set],
    held: &[(Vec<QueryOutcome>, Vec<QueryOutcome>, Calibration)],
) -> Result<()> {
    writeln!(
        out,
        "\nReliability (left-out test splits; top tool right, by confidence bin):\n"
    )?;
    write!(out, "| confidence |")?;
    for s in sets {
        write!(out, " {} n | mean conf | right |", s.name)?;
    }
    writeln!(out)?;
    writeln!(out, "|---|{}", "---|---|---|".repeat(sets.len()))?;
    for bin in 0..10 {
        let (lo, hi) = (bin as f32 / 10.0, (bin + 1) as f32 / 10.0);
        write!(out, "| {lo:.1}-{hi:.1} |")?;
        for (_, test, _) in held {
            let inside: Vec<&QueryOutcome> = test
                .iter()
                .filter(|o| o.features.is_some() && !o.ranked.is_empty())
                .filter(|o| o.confidence >= lo && (o.confidence < hi || bin == 9))
                .collect();
            if inside.is_empty() {
                write!(out, " 0 | - | - |")?;
                continue;
            }
            let n = inside.len() as f32;
            let conf = inside.iter().map(|o| o.confidence).sum::<f32>() / n;
            let right = inside.iter().filter(|o| o.top_is_right()).count() as f32 / n;
            write!(out, " {} | {conf:.2} | {right:.2} |", inside.len())?;
        }
        writeln!(out)?;
    }
    Ok(())
}
