//! Tasks of several steps: "read the papers, then write a comparison report" names a tool
//! per step, and a question about the whole task offers the tools of its strongest step.
//! [`step_tools`] ranks each clear step of a task on its own and keeps, per step, the best
//! tool the answer does not already offer, so route's answer can list it (with its own
//! selectionId) beside the candidates. It never selects: the model chooses, and every call
//! still passes the gate.

use crate::text::clauses;
use crate::Retriever;
use std::sync::Arc;
use toolgate_core::catalog::{ToolId, ToolRecord};

/// At most this many steps are ranked (and listed): a long task stays within the answer's
/// token bound.
pub const MAX_STEPS: usize = 4;

/// A step shorter than this many words is a fragment ("and dogs"), not a step.
const MIN_WORDS: usize = 2;

/// A step's text is shown up to this many characters.
const SHOWN_CHARS: usize = 80;

/// One step of a task and the best tool for it that the answer did not already offer.
#[derive(Debug, Clone)]
pub struct StepTool {
    /// The step, as the task words it (trimmed, cut to 80 characters).
    pub step: String,
    /// The tool ranked first for the step alone, among those not offered yet.
    pub tool: Arc<ToolRecord>,
}

/// The clear steps of `task`: its clauses (at sentence and clause punctuation, "and",
/// "then") of two words or more, when there are at least two; empty for a one-step task.
pub fn steps(task: &str) -> Vec<&str> {
    let steps: Vec<&str> = clauses(task)
        .into_iter()
        .map(str::trim)
        .filter(|c| c.split_whitespace().count() >= MIN_WORDS)
        .take(MAX_STEPS)
        .collect();
    if steps.len() < 2 {
        return Vec::new();
    }
    steps
}

/// For each step of `task` ([`steps`]), the best tool for it alone (only from `server`
/// when given) that is not in `offered` nor already listed for an earlier step. A step
/// whose first few tools are all offered adds nothing.
pub fn step_tools<R: Retriever + ?Sized>(
    retriever: &R,
    task: &str,
    server: Option<&str>,
    offered: &[ToolId],
) -> Vec<StepTool> {
    let mut taken: Vec<ToolId> = offered.to_vec();
    let mut out = Vec::new();
    for step in steps(task) {
        let best = retriever
            .rank(step, server, 3)
            .into_iter()
            .map(|(tool, _)| tool)
            .find(|tool| !taken.contains(&tool.id));
        if let Some(tool) = best {
            taken.push(tool.id.clone());
            out.push(StepTool {
                step: shown(step),
                tool,
            });
        }
    }
    out
}

fn shown(step: &str) -> String {
    match step.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &step[..cut]),
        None => step.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::steps;

    #[test]
    fn a_task_of_clear_steps_splits_and_a_single_step_does_not() {
        assert_eq!(
            steps("Read the papers in /root/papers, then write a comparison report"),
            [
                "Read the papers in /root/papers",
                "write a comparison report"
            ]
        );
        assert!(steps("list the open issues").is_empty());
        // A fragment is not a step.
        assert!(steps("search for cats and dogs").is_empty());
    }
}
