//! The select-or-clarify decision: exact names decide outright; otherwise the ranking's
//! calibrated confidence ([`super::calibrate`]) is compared with one threshold.
//!
//! [`assess`] does the work (exact names, ranking, features); [`route`] turns an
//! assessment into a decision. `toolgate eval route` keeps assessments to refit and
//! re-score the decision without ranking again.

use super::calibrate::{confidence, features, tool_terms, Calibration, Features, NULL_WEIGHT};
use super::text::{truncate, Analyzer, MAX_TASK_BYTES};
use super::Retriever;
use std::collections::HashSet;
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;

/// Selects when the calibrated confidence reaches this: the lowest threshold at which at
/// least 90% of selections were right on every catalog left out of the fit, on both its
/// splits (`toolgate eval route --leave-one-out`; `docs/routing.md` has the table).
pub const DEFAULT_THRESHOLD: f32 = 0.84;
/// The calibrated decision asks whether the description alone puts the top tool first
/// among this many of the best.
const DESCRIBED_AMONG: usize = 5;
/// How many of the closest tools `semantic_first` looks at for the top tool, and how
/// close to the best a cosine counts as equal (twins on two servers have one text).
const CLOSEST_AMONG: usize = 4;
const SEMANTIC_TIE: f32 = 1e-4;
/// The default when example tasks are indexed (`guided.route_examples`). The calibrated
/// model was fitted without examples, so with them the softmax confidence decides, at the
/// lowest threshold where at least 90% of selections were right with examples on a split
/// of MetaTool's tuning queries (`docs/routing.md`, "Example tasks").
pub const EXAMPLES_THRESHOLD: f32 = 0.94;
/// Most candidates in a clarifying question.
pub const DEFAULT_LIMIT: usize = 5;
/// Most results a browsing call (`detail: "names"`) lists.
pub const MAX_BROWSE: usize = 20;
/// How many ranked tools the decision looks at and returns.
pub(crate) const DEFAULT_DEPTH: usize = 10;
/// "Nothing fits" ([`Assessment::nothing_fits`]): chosen on the public sets' eval
/// features so that it fires on few tasks that have a tool (`docs/routing.md`).
pub(crate) const NOTHING_FITS_CONFIDENCE: f32 = 0.1;
pub(crate) const NOTHING_FITS_EXPLAINED: f32 = 0.3;
pub(crate) const NOTHING_FITS_COVERAGE: f32 = 0.25;
/// Positions in [`Features`] (see `calibrate::FEATURE_NAMES`).
const FEATURE_COVERAGE: usize = 2;
const FEATURE_TASK_EXPLAINED: usize = 8;
const FEATURE_SEMANTIC_FIRST: usize = 12;
/// Two tools with the same name on different servers, the second scoring at least this
/// share of the first, are the same tool twice: route asks which server.
const TWIN_SHARE: f32 = 0.95;

/// How to route one task.
#[derive(Debug, Clone, Copy)]
pub struct RouteOptions<'a> {
    /// Only consider this server's tools.
    pub server: Option<&'a str>,
    /// Most candidates in a question.
    pub limit: usize,
    /// Select when the confidence is at least this.
    pub threshold: f32,
    /// How many ranked tools to consider and return.
    pub depth: usize,
    /// The confidence model for calibrated retrievers (BM25F).
    pub calibration: Calibration,
}

impl Default for RouteOptions<'_> {
    fn default() -> Self {
        Self {
            server: None,
            limit: DEFAULT_LIMIT,
            threshold: DEFAULT_THRESHOLD,
            depth: DEFAULT_DEPTH,
            calibration: Calibration::DEFAULT,
        }
    }
}

/// A tool and its retrieval score.
pub(crate) type Ranked = Vec<(Arc<ToolRecord>, f32)>;

/// What route answers.
#[derive(Debug, Clone)]
pub enum RouteDecision {
    /// One tool is clearly meant.
    Select {
        /// The tool meant.
        tool: Arc<ToolRecord>,
        /// 1 for an exact name; else the calibrated confidence.
        confidence: f32,
        /// The ranking the decision was taken on.
        ranked: Ranked,
    },
    /// Ask which one: a short question over at most `limit` candidates (none when
    /// nothing matched at all).
    Clarify {
        /// The question for the model, naming the candidates.
        question: String,
        /// The tools the question offers, best first.
        candidates: Vec<Arc<ToolRecord>>,
        /// The top candidate's confidence (what fell short of the threshold).
        confidence: f32,
        /// The ranking the decision was taken on.
        ranked: Ranked,
        /// No candidate explains the task (`Assessment::nothing_fits`): the answer says
        /// so and offers browsing; the candidates are only the nearest names.
        nothing_fits: bool,
    },
}

impl RouteDecision {
    /// The ranking the decision was taken on.
    pub fn ranked(&self) -> &Ranked {
        match self {
            Self::Select { ranked, .. } | Self::Clarify { ranked, .. } => ranked,
        }
    }

    /// The decision's confidence: the selected tool's, or the top candidate's.
    pub fn confidence(&self) -> f32 {
        match self {
            Self::Select { confidence, .. } | Self::Clarify { confidence, .. } => *confidence,
        }
    }

    /// The selected tool, if route selected one.
    pub fn selected(&self) -> Option<&Arc<ToolRecord>> {
        match self {
            Self::Select { tool, .. } => Some(tool),
            Self::Clarify { .. } => None,
        }
    }
}

/// What a task is, before the threshold decides.
#[derive(Debug, Clone)]
pub(crate) enum Basis {
    /// The task is a tool's name: these visible tools have it (one selects, several ask).
    Exact(Vec<Arc<ToolRecord>>),
    /// The task is a tool name (or shaped like one) that no tool visible here has: it
    /// never selects; visible tools with similar names are offered as candidates.
    NoSuchName,
    /// Ranked by the retriever.
    Ranked {
        /// The decision's features, for calibrated retrievers.
        features: Option<Features>,
        /// The softmax confidence (the whole confidence of uncalibrated retrievers).
        softmax: f32,
        /// The top tools are one tool on several servers: ask which server.
        twins: usize,
    },
}

/// One task, assessed: how it matched and the ranking.
#[derive(Debug, Clone)]
pub(crate) struct Assessment {
    /// How the task matched: by an exact name, or by ranking.
    pub basis: Basis,
    /// The tools ranked for the task, best first.
    pub ranked: Ranked,
}

impl Assessment {
    /// The confidence under `calibration` (1 for an exact name, 0 when nothing ranked).
    pub(crate) fn confidence(&self, calibration: &Calibration) -> f32 {
        match &self.basis {
            Basis::Exact(tools) => 1.0 / tools.len().max(1) as f32,
            Basis::NoSuchName => 0.0,
            Basis::Ranked {
                features, softmax, ..
            } => match features {
                Some(x) => calibration.predict(x),
                None => *softmax,
            },
        }
    }

    /// True when no ranked tool explains the task: below `NOTHING_FITS_CONFIDENCE`, the
    /// top tool's own text explains under `NOTHING_FITS_EXPLAINED` of the task's words,
    /// scores under `NOTHING_FITS_COVERAGE` of what a tool could, and is not the closest
    /// in meaning either. Lexical and static-vector features cannot tell "no such tool"
    /// from "the tool says it in other words", so the bounds are strict; the rate at which
    /// this fires on tasks that do have a tool is in `docs/routing.md`.
    pub(crate) fn nothing_fits(&self, calibration: &Calibration) -> bool {
        match &self.basis {
            Basis::Ranked {
                features: Some(x),
                twins: 0,
                ..
            } => {
                !self.ranked.is_empty()
                    && self.confidence(calibration) < NOTHING_FITS_CONFIDENCE
                    && x[FEATURE_TASK_EXPLAINED] < NOTHING_FITS_EXPLAINED
                    && x[FEATURE_COVERAGE] < NOTHING_FITS_COVERAGE
                    && x[FEATURE_SEMANTIC_FIRST] < 0.5
            }
            _ => false,
        }
    }

    /// True when route selects at `threshold`.
    pub(crate) fn selects(&self, calibration: &Calibration, threshold: f32) -> bool {
        match &self.basis {
            Basis::Exact(tools) => tools.len() == 1,
            Basis::NoSuchName => false,
            Basis::Ranked { twins, .. } => {
                *twins == 0 && !self.ranked.is_empty() && self.confidence(calibration) >= threshold
            }
        }
    }
}

/// Exact names, then the ranking and its features.
pub(crate) fn assess<R: Retriever + ?Sized>(
    retriever: &R,
    task: &str,
    opts: &RouteOptions,
) -> Assessment {
    let exact = retriever.exact(task, opts.server);
    if !exact.is_empty() {
        let ranked = exact.iter().map(|t| (t.clone(), 1.0)).collect();
        return Assessment {
            basis: Basis::Exact(exact),
            ranked,
        };
    }
    if looks_like_name(task) || retriever.is_name(task, opts.server) {
        // Similar visible names may be offered, never selected.
        let ranked = retriever.rank(task, opts.server, opts.limit);
        return Assessment {
            basis: Basis::NoSuchName,
            ranked,
        };
    }
    let super::Described {
        ranked,
        by_description: described,
        ceiling,
    } = retriever.rank_described(task, opts.server, opts.depth.max(opts.limit));
    let scores: Vec<f32> = ranked.iter().map(|(_, s)| *s).collect();
    let Some((top, _)) = ranked.first() else {
        return Assessment {
            basis: Basis::Ranked {
                features: None,
                softmax: 0.0,
                twins: 0,
            },
            ranked,
        };
    };
    let mut with_null = scores.clone();
    if let Some(c) = ceiling {
        // "No tool": the share of the task the best tool leaves unexplained competes
        // with it like one more candidate.
        with_null.push((NULL_WEIGHT * (c - scores[0])).max(0.0));
        with_null.sort_by(|a, b| b.total_cmp(a));
    }
    let softmax = if with_null[0] == scores[0] {
        confidence(&with_null)
    } else {
        0.0
    };
    let twins = ranked[1..]
        .iter()
        .take_while(|(t, s)| {
            *s >= TWIN_SHARE * scores[0] && t.id.name.eq_ignore_ascii_case(&top.id.name)
        })
        .count();
    let features = retriever.calibrated().then(|| {
        let analyzer = Analyzer::new();
        let task = truncate(task, MAX_TASK_BYTES);
        let mut terms: HashSet<String> = analyzer.analyze(task).into_iter().collect();
        terms.extend(super::synonyms::phrases(&analyzer, task));
        let second = ranked.get(1).map(|(t, _)| t.as_ref());
        // The description alone puts the top tool first among the first few (the first
        // of equal scores wins, none when no description matches).
        let mut best: Option<usize> = None;
        for (i, &d) in described.iter().take(DESCRIBED_AMONG).enumerate() {
            if d > 0.0 && best.is_none_or(|b| d > described[b]) {
                best = Some(i);
            }
        }
        let described_first = best == Some(0);
        // Of every tool, the static vectors put the top one closest in meaning (or a
        // tool as close, such as its twin on another server), to the task read with its
        // meanings or as typed. Vectors without an opinion (none, or a task mostly outside
        // their vocabulary) do not count against it.
        let reading = super::synonyms::with_meanings(task);
        let readings: &[&str] = if reading == task {
            &[task]
        } else {
            &[&reading, task]
        };
        let semantic_first = retriever
            .closest_each(readings, opts.server, CLOSEST_AMONG)
            .iter()
            .any(|closest| {
                closest.first().is_none_or(|(_, best)| {
                    closest
                        .iter()
                        .any(|(t, c)| t.id == top.id && *c >= best - SEMANTIC_TIE)
                })
            });
        // The top tools' own terms, kept with the index when it keeps them.
        let text_of = |t: &ToolRecord| {
            retriever
                .text_terms(t)
                .unwrap_or_else(|| Arc::new(tool_terms(&analyzer, t)))
        };
        features(
            &analyzer,
            &terms,
            &scores,
            ceiling,
            top,
            second,
            described_first,
            semantic_first,
            &text_of,
        )
    });
    Assessment {
        basis: Basis::Ranked {
            features,
            softmax,
            twins,
        },
        ranked,
    }
}

/// A single word joined like an identifier (`create_issue`, `github/list`, `getUser`):
/// a name the caller typed, never prose to rank.
pub(crate) fn looks_like_name(task: &str) -> bool {
    let t = task
        .trim()
        .trim_matches(|c| matches!(c, '`' | '"' | '\''))
        .trim();
    if t.len() < 3 || t.len() > 128 || t.contains("//") {
        return false;
    }
    let ident = t
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
    let joined = t.contains('_') || t.contains('/');
    let camel = t
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    ident && (joined || camel) && t.chars().next().is_some_and(char::is_alphabetic)
}

/// Routes `task`: an exact name selects with confidence 1 (several servers sharing a bare
/// name is a question); a name no visible tool has says so; otherwise rank and select
/// when the confidence reaches the threshold.
pub fn route<R: Retriever + ?Sized>(
    retriever: &R,
    task: &str,
    opts: &RouteOptions,
) -> RouteDecision {
    decide(assess(retriever, task, opts), task, opts)
}

/// The decision for an assessment.
pub(crate) fn decide(a: Assessment, task: &str, opts: &RouteOptions) -> RouteDecision {
    let limit = opts.limit.max(1);
    let conf = a.confidence(&opts.calibration);
    let selects = a.selects(&opts.calibration, opts.threshold);
    let nothing_fits = !selects && a.nothing_fits(&opts.calibration);
    let Assessment { basis, ranked } = a;
    match basis {
        Basis::Exact(mut tools) if tools.len() == 1 => RouteDecision::Select {
            tool: tools.remove(0),
            confidence: 1.0,
            ranked,
        },
        Basis::Exact(tools) => {
            let candidates: Vec<_> = tools.into_iter().take(limit).collect();
            RouteDecision::Clarify {
                question: format!(
                    "Several servers have a tool named {}. Which one: {}?",
                    task.trim(),
                    choice_list(&candidates)
                ),
                candidates,
                confidence: conf,
                ranked,
                nothing_fits: false,
            }
        }
        Basis::NoSuchName => {
            let candidates: Vec<_> = ranked.iter().take(limit).map(|(t, _)| t.clone()).collect();
            // The name is not echoed: the answer says nothing of what the caller cannot see.
            let mut question = "No tool of that name is visible to this caller. Check the name, or describe the task in words".to_string();
            question.push_str(if candidates.is_empty() {
                "."
            } else {
                "; or pick one of these."
            });
            RouteDecision::Clarify {
                question,
                candidates,
                confidence: 0.0,
                ranked,
                nothing_fits: false,
            }
        }
        Basis::Ranked { .. } if selects => RouteDecision::Select {
            tool: ranked[0].0.clone(),
            confidence: conf,
            ranked,
        },
        Basis::Ranked { twins, .. } => {
            let candidates: Vec<_> = ranked.iter().take(limit).map(|(t, _)| t.clone()).collect();
            let question = if candidates.is_empty() {
                "No tool matches that task. Describe it in other words, or name the server to look in."
                    .to_string()
            } else if nothing_fits {
                format!(
                    "None of the tools seems to fit that task (the nearest: {}). Browse instead: route with {{\"server\": ...}}, or with the task and {{\"detail\": \"names\"}}; or describe it in other words.",
                    choice_list(&candidates)
                )
            } else if twins > 0 {
                let servers: Vec<&str> = ranked[..=twins]
                    .iter()
                    .map(|(t, _)| t.id.server.as_str())
                    .collect();
                format!(
                    "{} is on {} servers: {}. Which server do you mean?",
                    ranked[0].0.id.name,
                    servers.len(),
                    servers.join(", ")
                )
            } else {
                format!("Which of these do you mean: {}?", choice_list(&candidates))
            };
            RouteDecision::Clarify {
                question,
                candidates,
                confidence: conf,
                ranked,
                nothing_fits,
            }
        }
    }
}

/// `a, b or c`: the candidates' exposed names (each candidate carries its own summary).
pub(crate) fn choice_list(tools: &[Arc<ToolRecord>]) -> String {
    let items: Vec<String> = tools.iter().map(|t| t.exposed.clone()).collect();
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

    #[test]
    fn names_are_told_from_prose() {
        for name in [
            "create_issue",
            "github/list_issues",
            "getUser",
            "`kubectl_scale`",
        ] {
            assert!(looks_like_name(name), "{name}");
        }
        for prose in [
            "search",
            "list my issues",
            "https://example.com/a_b",
            "e.g.",
            "3_items",
        ] {
            assert!(!looks_like_name(prose), "{prose}");
        }
    }
}
