//! The select-or-clarify decision: exact names win outright; otherwise a calibrated
//! confidence over the ranking is compared with one threshold.
//!
//! The confidence is a softmax over the top scores divided by the top score, at a fixed
//! temperature: `p1 = 1 / sum_j exp((s_j / s_1 - 1) / T)`. Dividing by the top score makes
//! it independent of query length (BM25 scores grow with the number of query terms); the
//! softmax lowers it both when the runner-up is close (a small margin) and when many
//! tools crowd just below the top. One number, the threshold, then trades coverage
//! (how often route selects) against precision (how often a selection is right).

use super::Retriever;
use crate::catalog::ToolRecord;
use std::sync::Arc;

/// Selects when the confidence reaches this. Chosen on the tuning split (query index
/// mod 5 == 0) of MetaTool as the threshold where about 90% of selections are right
/// (`docs/routing.md` has the sweep); lower it to ask less often and be wrong more often.
pub const DEFAULT_THRESHOLD: f32 = 0.99;
/// The default when example tasks are indexed (`guided.route_examples`): the lowest
/// threshold where at least 90% of selections were right with examples, on a split of
/// MetaTool's tuning queries (`docs/routing.md`, "Example tasks").
pub const EXAMPLES_THRESHOLD: f32 = 0.94;
/// Most candidates in a clarifying question.
pub const DEFAULT_LIMIT: usize = 5;
/// How many ranked tools the decision looks at and returns.
pub const DEFAULT_DEPTH: usize = 10;
/// Softmax temperature on top-normalised scores: a runner-up at 90% of the top score
/// weighs e^-1 against it.
pub const TEMPERATURE: f32 = 0.1;

/// How strongly the unexplained part of a task counts against selecting (see `route`).
pub const NULL_WEIGHT: f32 = 0.1;

/// How to route one task.
#[derive(Debug, Clone, Copy)]
pub struct RouteOptions<'a> {
    /// Only consider this server's tools.
    pub server: Option<&'a str>,
    /// Most candidates in a question (1..=5 from the meta-tool's schema).
    pub limit: usize,
    /// Select when the confidence is at least this.
    pub threshold: f32,
    /// How many ranked tools to consider and return.
    pub depth: usize,
}

impl Default for RouteOptions<'_> {
    fn default() -> Self {
        Self {
            server: None,
            limit: DEFAULT_LIMIT,
            threshold: DEFAULT_THRESHOLD,
            depth: DEFAULT_DEPTH,
        }
    }
}

/// A tool and its retrieval score.
pub type Ranked = Vec<(Arc<ToolRecord>, f32)>;

/// What route answers.
#[derive(Debug, Clone)]
pub enum RouteDecision {
    /// One tool is clearly meant.
    Select {
        tool: Arc<ToolRecord>,
        /// 1 for an exact name; else the calibrated confidence.
        confidence: f32,
        ranked: Ranked,
    },
    /// Ask which one: a short question over at most `limit` candidates (none when
    /// nothing matched at all).
    Clarify {
        question: String,
        candidates: Vec<Arc<ToolRecord>>,
        /// The top candidate's confidence (what fell short of the threshold).
        confidence: f32,
        ranked: Ranked,
    },
}

impl RouteDecision {
    pub fn ranked(&self) -> &Ranked {
        match self {
            Self::Select { ranked, .. } | Self::Clarify { ranked, .. } => ranked,
        }
    }

    pub fn confidence(&self) -> f32 {
        match self {
            Self::Select { confidence, .. } | Self::Clarify { confidence, .. } => *confidence,
        }
    }

    pub fn selected(&self) -> Option<&Arc<ToolRecord>> {
        match self {
            Self::Select { tool, .. } => Some(tool),
            Self::Clarify { .. } => None,
        }
    }
}

/// The calibrated confidence that the first of `scores` (sorted, best first) is meant.
pub fn confidence(scores: &[f32]) -> f32 {
    let Some(&top) = scores.first().filter(|s| **s > 0.0) else {
        return 0.0;
    };
    let total: f32 = scores
        .iter()
        .map(|s| ((s / top - 1.0) / TEMPERATURE).exp())
        .sum();
    1.0 / total
}

/// Routes `task`: an exact name selects with confidence 1 (several servers sharing a bare
/// name is a question); otherwise rank and select when the confidence reaches the threshold.
pub fn route<R: Retriever + ?Sized>(
    retriever: &R,
    task: &str,
    opts: &RouteOptions,
) -> RouteDecision {
    let limit = opts.limit.max(1);
    let exact = retriever.exact(task, opts.server);
    match exact.len() {
        0 => {}
        1 => {
            let tool = exact.into_iter().next().expect("one exact match");
            return RouteDecision::Select {
                ranked: vec![(tool.clone(), 1.0)],
                tool,
                confidence: 1.0,
            };
        }
        n => {
            let ranked: Ranked = exact.iter().map(|t| (t.clone(), 1.0)).collect();
            let candidates: Vec<_> = exact.into_iter().take(limit).collect();
            return RouteDecision::Clarify {
                question: format!(
                    "Several servers have a tool named {}. Which one: {}?",
                    task.trim(),
                    choice_list(&candidates)
                ),
                candidates,
                confidence: 1.0 / n as f32,
                ranked,
            };
        }
    }
    let ranked = retriever.rank(task, opts.server, opts.depth.max(limit));
    let mut scores: Vec<f32> = ranked.iter().map(|(_, s)| *s).collect();
    if let (Some(ceiling), Some(&top)) = (retriever.ceiling(task), scores.first()) {
        // "No tool": the share of the task the best tool leaves unexplained competes
        // with it like one more candidate.
        scores.push((NULL_WEIGHT * (ceiling - top)).max(0.0));
        scores.sort_by(|a, b| b.total_cmp(a));
    }
    let conf = if scores.first() == ranked.first().map(|(_, s)| s) {
        confidence(&scores)
    } else {
        0.0
    };
    if conf >= opts.threshold && !ranked.is_empty() {
        return RouteDecision::Select {
            tool: ranked[0].0.clone(),
            confidence: conf,
            ranked,
        };
    }
    let candidates: Vec<_> = ranked.iter().take(limit).map(|(t, _)| t.clone()).collect();
    let question = if candidates.is_empty() {
        "No tool matches that task. Describe it in other words, or name the server to look in."
            .to_string()
    } else {
        format!("Which of these do you mean: {}?", choice_list(&candidates))
    };
    RouteDecision::Clarify {
        question,
        candidates,
        confidence: conf,
        ranked,
    }
}

/// `a (summary), b (summary) or c (summary)`, with short summaries so the model can choose.
fn choice_list(tools: &[Arc<ToolRecord>]) -> String {
    let items: Vec<String> = tools
        .iter()
        .map(|t| {
            let summary = t.summary(60);
            if summary.is_empty() {
                t.exposed.clone()
            } else {
                format!("{} ({})", t.exposed, summary.trim_end_matches('.'))
            }
        })
        .collect();
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_falls_with_close_and_crowded_runners_up() {
        assert_eq!(confidence(&[]), 0.0);
        assert_eq!(confidence(&[3.0]), 1.0);
        let clear = confidence(&[10.0, 5.0, 4.0]);
        let close = confidence(&[10.0, 9.5, 4.0]);
        let crowded = confidence(&[10.0, 9.5, 9.5, 9.5]);
        assert!(
            clear > 0.98 && close < 0.7 && crowded < close,
            "{clear} {close} {crowded}"
        );
        // Scale-free: longer queries (larger scores) give the same confidence.
        assert!((confidence(&[20.0, 19.0]) - confidence(&[10.0, 9.5])).abs() < 1e-6);
    }
}
