//! The calibrated confidence: a logistic model over features of a ranking that mean the
//! same on any catalog, so that of the selections made at confidence `c`, about `c` are
//! right, also on catalogs the model never saw.
//!
//! No feature is a raw score, a term or a size of one catalog: each is a ratio of scores,
//! a share of the task's terms, a count of near-equal competitors, or whether the tools'
//! descriptions alone, or the static vectors' reading of meaning, agree with the ranking.
//! (How many tools matched and how many words the task has were features until
//! 2026-12-02: they describe a catalog's size and its users' style more than one ranking,
//! and the left-out check improved without them.) [`Calibration::fit`] fits the
//! weights (Newton's method, L2-regularised, each catalog weighing the same); the weights
//! the gateway ships ([`Calibration::DEFAULT`]) were fitted on the tuning splits of the
//! three public sets, and `toolgate eval route --leave-one-out` checks them the honest way
//! (fit on all catalogs but one, measure on that one). `docs/routing.md` has the tables.

use super::synonyms;
use super::text::Analyzer;
use std::collections::HashSet;
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;

/// Number of features (without the intercept).
pub(crate) const N_FEATURES: usize = 13;

/// What each feature is, for reports (same order as [`Features`]).
pub const FEATURE_NAMES: [&str; N_FEATURES] = [
    "softmax_logit",
    "margin",
    "coverage",
    "name_share",
    "name_share_gap",
    "near_twins",
    "server_named",
    "top_two_overlap",
    "task_explained",
    "task_explained_gap",
    "coverage_shortfall",
    "described_first",
    "semantic_first",
];

/// The features of one ranking.
pub type Features = [f32; N_FEATURES];

/// A runner-up at this share of the top score or more is a near-twin of it.
const TWIN_RATIO: f32 = 0.9;
/// The softmax feature's logit is bounded to ±this (p = 0.9975): when only one or two
/// tools match at all, the softmax is 1 whatever the match is worth, and an unbounded
/// logit let one weak shared word ("the prices of Ethereum" -> `AusPetrolPrices`) select.
/// Chosen on the leave-one-out table (bounds 2 to 8, and none; `docs/routing.md`).
const SOFTMAX_LOGIT_BOUND: f32 = 6.0;

/// The features of a ranking for `task`: `scores` best first (at least one, the first
/// positive), `ceiling` the most any tool could score, `top` and `second` the first two
/// tools. `task_terms` are the task's analysed terms (no phrase bigrams). `described_first`:
/// the top tool is also the best of the first few by its description and parameters alone
/// ([`super::Retriever::rank_described`]). `semantic_first`: the top tool is also the
/// closest in meaning of every tool, to the task read with its meanings or as typed, by
/// the static vectors ([`super::Retriever::closest_each`]). `text_of` gives a tool's
/// [`tool_terms`] (kept with the index, [`super::Retriever::text_terms`], or analysed).
#[expect(
    clippy::too_many_arguments,
    reason = "the decision's inputs, each its own kind of evidence; a struct would only name them twice"
)]
pub(crate) fn features(
    analyzer: &Analyzer,
    task_terms: &HashSet<String>,
    scores: &[f32],
    ceiling: Option<f32>,
    top: &ToolRecord,
    second: Option<&ToolRecord>,
    described_first: bool,
    semantic_first: bool,
    text_of: &dyn Fn(&ToolRecord) -> Arc<HashSet<String>>,
) -> Features {
    let s1 = scores
        .first()
        .copied()
        .unwrap_or(0.0)
        .max(f32::MIN_POSITIVE);
    let s2 = scores.get(1).copied().unwrap_or(0.0);
    // The softmax of the former decision, with "no tool" as one more competitor.
    let mut with_null: Vec<f32> = scores.to_vec();
    if let Some(c) = ceiling {
        with_null.push((NULL_WEIGHT * (c - s1)).max(0.0));
        with_null.sort_by(|a, b| b.total_cmp(a));
    }
    let p = confidence(&with_null).clamp(1e-4, 1.0 - 1e-4);
    let softmax_logit = (p / (1.0 - p))
        .ln()
        .clamp(-SOFTMAX_LOGIT_BOUND, SOFTMAX_LOGIT_BOUND);
    let coverage = ceiling.map_or(1.0, |c| if c > 0.0 { (s1 / c).min(1.0) } else { 0.0 });
    let share = |t: &ToolRecord| name_share(analyzer, task_terms, t);
    let top_share = share(top);
    let twins = scores[1..]
        .iter()
        .filter(|s| **s >= TWIN_RATIO * s1)
        .count();
    let server_terms = analyzer.analyze(&top.id.server);
    let server_named = server_terms.iter().any(|t| task_terms.contains(t));
    let top_text = text_of(top);
    let second_text = second.map(text_of).unwrap_or_default();
    let overlap = jaccard(&top_text, &second_text);
    // A task word counts as explained by its synonym too ("ticket" by "issue").
    let explained = |text: &HashSet<String>| {
        let hit = task_terms
            .iter()
            .filter(|t| text.contains(*t) || synonyms::of(t).iter().any(|s| text.contains(s)))
            .count();
        hit as f32 / task_terms.len().max(1) as f32
    };
    let top_explained = explained(&top_text);
    [
        softmax_logit,
        1.0 - s2 / s1,
        coverage,
        top_share,
        top_share - second.map_or(0.0, share),
        (1.0 + twins as f32).ln(),
        f32::from(u8::from(server_named)),
        overlap,
        top_explained,
        top_explained - explained(&second_text),
        (0.5 - coverage).max(0.0),
        f32::from(u8::from(described_first)),
        f32::from(u8::from(semantic_first)),
    ]
}

/// The analysed terms of a tool's name, title and description.
pub(crate) fn tool_terms(analyzer: &Analyzer, tool: &ToolRecord) -> HashSet<String> {
    let mut out = Vec::new();
    analyzer.terms(&tool.id.name, &mut out, None);
    if let Some(t) = tool.title() {
        analyzer.terms(t, &mut out, None);
    }
    analyzer.terms(
        super::text::truncate(tool.description(), 2048),
        &mut out,
        None,
    );
    out.into_iter().collect()
}

/// Shared terms over all terms: 1 for the same text, 0 for nothing in common.
fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f32 {
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f32 / union as f32
    }
}

/// Share of the words of the tool's name that the task contains.
fn name_share(analyzer: &Analyzer, task_terms: &HashSet<String>, tool: &ToolRecord) -> f32 {
    let mut words = Vec::new();
    for part in super::text::split_identifier(&tool.id.name) {
        if let Some(w) = analyzer.word(part) {
            words.push(w);
        }
    }
    if words.is_empty() {
        return 0.0;
    }
    let hit = words
        .iter()
        .filter(|w| {
            task_terms.contains(*w) || synonyms::of(w).iter().any(|s| task_terms.contains(s))
        })
        .count();
    hit as f32 / words.len() as f32
}

/// Logistic weights over [`Features`]: `p = 1 / (1 + exp(-(bias + w . x)))`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// The intercept.
    pub bias: f32,
    /// One weight per feature.
    pub weights: Features,
}

impl Calibration {
    /// Printed by `toolgate eval route --leave-one-out`: fitted on the tuning splits (query
    /// index mod 5 == 0) of MetaTool, LiveMCPBench and bfcl, each catalog weighing the same.
    pub const DEFAULT: Calibration = Calibration {
        bias: -3.5340,
        weights: [
            1.0179, -3.3201, -1.1042, 3.3046, -1.2364, 0.3682, -0.0196, 1.6043, 0.0405, 0.6666,
            0.2999, 1.2075, 0.8594,
        ],
    };

    /// The probability that the top tool is the one meant.
    pub(crate) fn predict(&self, x: &Features) -> f32 {
        let z: f32 = self.bias + self.weights.iter().zip(x).map(|(w, x)| w * x).sum::<f32>();
        1.0 / (1.0 + (-z).exp())
    }

    /// Fits a weighted, L2-regularised logistic regression (`lambda` on the weights, not
    /// the intercept) by Newton's method. `samples` are (features, right, weight).
    pub fn fit(samples: &[(Features, bool, f32)], lambda: f64) -> Calibration {
        const D: usize = N_FEATURES + 1;
        let mut beta = [0f64; D];
        for _ in 0..50 {
            let mut grad = [0f64; D];
            let mut hess = [[0f64; D]; D];
            for (x, y, w) in samples {
                let xi = row(x);
                let z: f64 = beta.iter().zip(&xi).map(|(b, x)| b * x).sum();
                let p = 1.0 / (1.0 + (-z).exp());
                let w = f64::from(*w);
                let r = p - f64::from(u8::from(*y));
                for i in 0..D {
                    grad[i] += w * r * xi[i];
                    for j in 0..D {
                        hess[i][j] += w * p * (1.0 - p) * xi[i] * xi[j];
                    }
                }
            }
            for i in 1..D {
                grad[i] += lambda * beta[i];
                hess[i][i] += lambda;
            }
            hess[0][0] += 1e-9;
            let Some(step) = solve(hess, grad) else { break };
            let mut moved = 0f64;
            for i in 0..D {
                beta[i] -= step[i];
                moved = moved.max(step[i].abs());
            }
            if moved < 1e-8 {
                break;
            }
        }
        let mut weights = [0f32; N_FEATURES];
        for (w, b) in weights.iter_mut().zip(&beta[1..]) {
            *w = *b as f32;
        }
        Calibration {
            bias: beta[0] as f32,
            weights,
        }
    }
}

/// The design row: 1 for the intercept, then the features.
fn row(x: &Features) -> [f64; N_FEATURES + 1] {
    let mut r = [1f64; N_FEATURES + 1];
    for (r, x) in r[1..].iter_mut().zip(x) {
        *r = f64::from(*x);
    }
    r
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting; `None` if singular.
fn solve<const D: usize>(mut a: [[f64; D]; D], mut b: [f64; D]) -> Option<[f64; D]> {
    for col in 0..D {
        let pivot = (col..D).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (head, tail) = a.split_at_mut(col + 1);
        let pivot_row = &head[col];
        for (r, row) in tail.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[col + 1 + r] -= f * b[col];
        }
    }
    let mut x = [0f64; D];
    for r in (0..D).rev() {
        let s: f64 = (r + 1..D).map(|c| a[r][c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

/// Softmax temperature on top-normalised scores: a runner-up at 90% of the top score
/// weighs e^-1 against it (one feature of the calibrated model, and the whole confidence
/// of retrievers that are not calibrated, such as the hybrid).
pub(crate) const TEMPERATURE: f32 = 0.1;
/// How strongly the unexplained part of a task counts against selecting (see `route`).
pub(crate) const NULL_WEIGHT: f32 = 0.1;

/// The softmax confidence that the first of `scores` (sorted, best first) is meant:
/// `p1 = 1 / sum_j exp((s_j / s_1 - 1) / T)`. Dividing by `s_1` makes it independent of
/// task length; it falls both when the runner-up is close and when many tools crowd
/// below the top.
pub(crate) fn confidence(scores: &[f32]) -> f32 {
    let Some(&top) = scores.first().filter(|s| **s > 0.0) else {
        return 0.0;
    };
    let total: f32 = scores
        .iter()
        .map(|s| ((s / top - 1.0) / TEMPERATURE).exp())
        .sum();
    1.0 / total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitting_recovers_a_separating_direction() {
        // Right when the margin is large: the fitted weight on margin is positive and the
        // predictions order the samples by margin.
        let samples: Vec<(Features, bool, f32)> = (0..200)
            .map(|i| {
                let m = i as f32 / 200.0;
                let mut x = [0.0; N_FEATURES];
                x[1] = m;
                (x, (i * 7919) % 200 < i, 1.0)
            })
            .collect();
        let c = Calibration::fit(&samples, 1e-3);
        assert!(c.weights[1] > 1.0, "{c:?}");
        let mut lo = [0.0; N_FEATURES];
        let mut hi = [0.0; N_FEATURES];
        lo[1] = 0.1;
        hi[1] = 0.9;
        assert!(c.predict(&hi) > 0.7 && c.predict(&lo) < 0.3, "{c:?}");
    }

    #[test]
    fn solve_inverts_a_small_system() {
        let x = solve([[2.0, 1.0], [1.0, 3.0]], [3.0, 5.0]).unwrap();
        assert!(
            (x[0] - 0.8).abs() < 1e-9 && (x[1] - 1.4).abs() < 1e-9,
            "{x:?}"
        );
    }
}
