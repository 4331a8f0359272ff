//! Evaluation over labelled queries: ranking metrics (P@1, R@5, nDCG@5), the decision's
//! clarify rate and selection precision, route latency, and a threshold sweep.

use super::calibrate::{Calibration, Features};
use super::decide::{assess, Basis, RouteOptions};
use super::Retriever;
use serde::Serialize;
use std::time::Instant;
use toolgate_core::catalog::LabelledQuery;

/// Which queries to evaluate. Parameters are tuned on `Tune` (query index mod 5 == 0) and
/// reported on `Test` (the other four fifths), so the reported figures are not fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Every query.
    All,
    /// The fifth parameters are tuned on (index mod 5 == 0).
    Tune,
    /// The other four fifths, where figures are reported.
    Test,
}

impl Split {
    /// True when the query at `index` belongs to this split.
    pub fn keeps(self, index: usize) -> bool {
        match self {
            Split::All => true,
            Split::Tune => index.is_multiple_of(5),
            Split::Test => !index.is_multiple_of(5),
        }
    }
}

/// What route did with one labelled query.
#[derive(Debug, Clone)]
pub struct QueryOutcome {
    /// The task as the dataset words it.
    pub query: String,
    /// Acceptable tools as `server/name`, deduplicated.
    pub expected: Vec<String>,
    /// The ranking as `(server, name, score)`, best first.
    pub ranked: Vec<(String, String, f32)>,
    /// The decision's confidence; the query is a selection when it reaches the threshold.
    pub confidence: f32,
    /// The calibrated decision's features (for refitting without ranking again).
    pub features: Option<Features>,
    /// False where the decision asks whatever the confidence (twins on several servers,
    /// a name no tool has, a bare name several servers share).
    pub may_select: bool,
    /// Wall time of the route call, in microseconds.
    pub latency_us: f64,
    /// Route would say that nothing fits (`Assessment::nothing_fits` in the decision).
    pub nothing_fits: bool,
}

impl QueryOutcome {
    fn is_expected(&self, rank: usize) -> bool {
        self.ranked
            .get(rank)
            .is_some_and(|(s, n, _)| self.expected.iter().any(|e| is_id(e, s, n)))
    }

    /// True when route selects (rather than asks) at `threshold`.
    pub fn selects(&self, threshold: f32) -> bool {
        self.may_select && !self.ranked.is_empty() && self.confidence >= threshold
    }

    /// Recomputes the confidence under another calibration.
    pub fn rescore(&mut self, calibration: &Calibration) {
        if let Some(x) = &self.features {
            self.confidence = calibration.predict(x);
        }
    }

    /// True when the first ranked tool is an expected one.
    pub fn top_is_right(&self) -> bool {
        self.is_expected(0)
    }

    /// 1 when the first ranked tool is an expected one, else 0.
    pub(crate) fn precision_at_1(&self) -> f32 {
        f32::from(u8::from(self.is_expected(0)))
    }

    /// Share of the expected tools found in the first `k`.
    pub(crate) fn recall_at(&self, k: usize) -> f32 {
        if self.expected.is_empty() {
            return 0.0;
        }
        let found = (0..k.min(self.ranked.len()))
            .filter(|&i| self.is_expected(i))
            .count();
        found as f32 / self.expected.len() as f32
    }

    /// nDCG at `k` with binary relevance: 1/log2(rank+1) per expected tool found, over
    /// the same for an ideal ranking of min(|expected|, k) relevant tools.
    pub(crate) fn ndcg_at(&self, k: usize) -> f32 {
        let gain = |i: usize| 1.0 / ((i + 2) as f32).log2();
        let dcg: f32 = (0..k.min(self.ranked.len()))
            .filter(|&i| self.is_expected(i))
            .map(gain)
            .sum();
        let ideal: f32 = (0..k.min(self.expected.len())).map(gain).sum();
        if ideal > 0.0 {
            dcg / ideal
        } else {
            0.0
        }
    }
}

/// `expected` (`server/name`, the server being everything before the first `/`) names
/// the tool (server, name).
fn is_id(expected: &str, server: &str, name: &str) -> bool {
    expected.split_once('/') == Some((server, name))
}

/// Routes every query (one at a time, timed) and records the outcome.
pub fn evaluate<R: Retriever + ?Sized>(
    retriever: &R,
    queries: &[LabelledQuery],
    opts: &RouteOptions,
) -> Vec<QueryOutcome> {
    queries
        .iter()
        .map(|q| {
            let start = Instant::now();
            let a = assess(retriever, &q.query, opts);
            let confidence = a.confidence(&opts.calibration);
            let may_select = match &a.basis {
                Basis::Exact(tools) => tools.len() == 1,
                Basis::NoSuchName => false,
                Basis::Ranked { twins, .. } => *twins == 0,
            };
            let features = match &a.basis {
                Basis::Ranked { features, .. } => *features,
                _ => None,
            };
            let nothing_fits =
                !a.selects(&opts.calibration, opts.threshold) && a.nothing_fits(&opts.calibration);
            let latency_us = start.elapsed().as_secs_f64() * 1e6;
            let mut expected = q.expected.clone();
            expected.sort();
            expected.dedup();
            QueryOutcome {
                query: q.query.clone(),
                expected,
                ranked: a
                    .ranked
                    .iter()
                    .map(|(t, s)| (t.id.server.clone(), t.id.name.clone(), *s))
                    .collect(),
                confidence,
                features,
                may_select,
                latency_us,
                nothing_fits,
            }
        })
        .collect()
}

/// The figures for one run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Number of queries evaluated.
    pub queries: usize,
    /// The decision's threshold the figures were taken at.
    pub threshold: f32,
    /// Mean precision at 1.
    pub p_at_1: f32,
    /// Mean recall at 5.
    pub r_at_5: f32,
    /// Mean nDCG at 5.
    pub ndcg_at_5: f32,
    /// Share of queries answered with a question.
    pub clarify_rate: f32,
    /// Share of queries where route selected a tool that is not an expected one.
    pub wrong_select_rate: f32,
    /// Correct selections among selections (1 when nothing was selected).
    pub selection_precision: f32,
    /// Share of queries answered "nothing fits" (every labelled query has a tool, so each
    /// is a miss of that answer).
    pub nothing_fits_rate: f32,
    /// Median time to route one query, in microseconds.
    pub latency_p50_us: f64,
    /// 99th percentile of the time to route one query, in microseconds.
    pub latency_p99_us: f64,
}

/// Summarises outcomes with the decision taken at `threshold`.
pub fn summarize(outcomes: &[QueryOutcome], threshold: f32) -> Summary {
    let n = outcomes.len().max(1) as f32;
    let mean = |f: &dyn Fn(&QueryOutcome) -> f32| outcomes.iter().map(f).sum::<f32>() / n;
    let row = sweep_row(outcomes, threshold);
    let mut lat: Vec<f64> = outcomes.iter().map(|o| o.latency_us).collect();
    lat.sort_by(f64::total_cmp);
    Summary {
        queries: outcomes.len(),
        threshold,
        p_at_1: mean(&|o| o.precision_at_1()),
        r_at_5: mean(&|o| o.recall_at(5)),
        ndcg_at_5: mean(&|o| o.ndcg_at(5)),
        clarify_rate: 1.0 - row.coverage,
        wrong_select_rate: row.wrong_select_rate,
        selection_precision: row.precision,
        nothing_fits_rate: mean(&|o| f32::from(u8::from(o.nothing_fits))),
        latency_p50_us: percentile(&lat, 0.50),
        latency_p99_us: percentile(&lat, 0.99),
    }
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The decision's trade-off at one threshold.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SweepRow {
    /// The threshold of this row.
    pub threshold: f32,
    /// Share of queries where route selects.
    pub coverage: f32,
    /// Correct selections among selections (1 when nothing was selected).
    pub precision: f32,
    /// Wrong selections among all queries.
    pub wrong_select_rate: f32,
}

/// The decision's trade-off over `outcomes` at `threshold`.
pub fn sweep_row(outcomes: &[QueryOutcome], threshold: f32) -> SweepRow {
    let n = outcomes.len().max(1) as f32;
    let selected = outcomes.iter().filter(|o| o.selects(threshold));
    let (mut sel, mut right) = (0usize, 0usize);
    for o in selected {
        sel += 1;
        right += usize::from(o.is_expected(0));
    }
    SweepRow {
        threshold,
        coverage: sel as f32 / n,
        precision: if sel == 0 {
            1.0
        } else {
            right as f32 / sel as f32
        },
        wrong_select_rate: (sel - right) as f32 / n,
    }
}

/// The trade-off over a range of thresholds (confidences are in [0, 1]).
pub fn sweep(outcomes: &[QueryOutcome], thresholds: &[f32]) -> Vec<SweepRow> {
    thresholds.iter().map(|&t| sweep_row(outcomes, t)).collect()
}

/// The thresholds `--sweep` prints: 0.20 to 0.90 in steps of 0.05, then finer up to 0.99
/// (where precision climbs fastest), and 1.0.
pub fn sweep_thresholds() -> Vec<f32> {
    let coarse = (4..=18).map(|i| i as f32 * 0.05);
    let fine = [0.92, 0.94, 0.96, 0.97, 0.98, 0.99, 1.0];
    coarse.chain(fine).collect()
}
