//! `toolgate eval route --steps`: how much of a task's expected tools route's answer offers,
//! with and without the best tool of each step of a task of several steps
//! (`toolgate_route::step_tools`, what a guided question lists under "For its steps").
//!
//! The answer offers what the gateway's answer would: a selection its one tool; a question
//! its first `DEFAULT_LIMIT` candidates, and with steps each step's best tool not among
//! them; "nothing fits" the nearest names (no steps).

use serde::Serialize;
use toolgate_core::catalog::{LabelledQuery, ToolId};
use toolgate_route::eval::QueryOutcome;
use toolgate_route::{step_tools, Retriever, DEFAULT_LIMIT};

/// The share of expected tools an answer offers, averaged over queries.
#[derive(Debug, Serialize)]
pub(crate) struct StepsSummary {
    /// Queries measured.
    pub queries: usize,
    /// Queries with steps (two or more clear steps).
    pub with_steps: usize,
    /// Mean share of a query's expected tools the answer offers, without steps.
    pub answer_coverage: f64,
    /// The same, with each step's best tool.
    pub answer_coverage_steps: f64,
    /// Mean tools offered per answer, without and with steps.
    pub offered: f64,
    /// Mean tools offered per answer with steps.
    pub offered_steps: f64,
}

pub(crate) fn measure<R: Retriever + ?Sized>(
    retriever: &R,
    queries: &[LabelledQuery],
    outcomes: &[QueryOutcome],
    threshold: f32,
) -> StepsSummary {
    let (mut plain, mut stepped, mut offered, mut offered_steps) = (0.0, 0.0, 0.0, 0.0);
    let mut with_steps = 0;
    let measured = outcomes
        .iter()
        .zip(queries)
        .filter(|(o, _)| !o.expected.is_empty());
    let mut n = 0;
    for (o, q) in measured {
        n += 1;
        let shown = if o.selects(threshold) {
            1
        } else {
            DEFAULT_LIMIT
        };
        let mut ids: Vec<ToolId> = (o.ranked.iter().take(shown))
            .map(|(s, t, _)| ToolId::new(s, t))
            .collect();
        let share = |ids: &[ToolId]| {
            let hit = (o.expected.iter())
                .filter(|e| {
                    ids.iter()
                        .any(|id| e.split_once('/') == Some((&id.server, &id.name)))
                })
                .count();
            hit as f64 / o.expected.len() as f64
        };
        plain += share(&ids);
        offered += ids.len() as f64;
        if !o.selects(threshold) && !o.nothing_fits {
            let steps = step_tools(retriever, &q.query, None, &ids);
            with_steps += usize::from(!steps.is_empty());
            ids.extend(steps.into_iter().map(|s| s.tool.id.clone()));
        }
        stepped += share(&ids);
        offered_steps += ids.len() as f64;
    }
    let mean = |x: f64| if n == 0 { 0.0 } else { x / n as f64 };
    StepsSummary {
        queries: n,
        with_steps,
        answer_coverage: mean(plain),
        answer_coverage_steps: mean(stepped),
        offered: mean(offered),
        offered_steps: mean(offered_steps),
    }
}
