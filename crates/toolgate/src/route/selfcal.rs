//! The catalog calibrates itself, without labels: from a deterministic sample of its own
//! tools, pseudo-tasks are made from each tool's description (the name's words removed and
//! only some of the rest kept, as a paraphrase that only partly matches), routed against
//! the index, and the share of them whose own tool comes first, at each confidence, says
//! how confusable this catalog's tools are. The threshold route selects at then follows
//! the catalog: higher where tools are near-duplicates, lower where they are distinct.

use super::text::{truncate, Analyzer};
use crate::catalog::{LabelledQuery, ToolRecord};
use std::collections::HashSet;
use std::sync::Arc;

/// Most tools a self-check samples (every k-th tool in id order beyond this).
pub const MAX_PSEUDO_TASKS: usize = 300;

/// How a pseudo-task is cut from a description (prototype knobs).
#[derive(Debug, Clone, Copy)]
pub struct PseudoShape {
    /// Keep one content word in this many.
    pub stride: usize,
    /// Keep at most this many words.
    pub max_words: usize,
    /// Skip this many content words first.
    pub skip: usize,
}

impl Default for PseudoShape {
    fn default() -> Self {
        let env = |k: &str, d: usize| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d)
        };
        Self {
            stride: env("TG_PSEUDO_STRIDE", 2),
            max_words: env("TG_PSEUDO_MAX", 8),
            skip: env("TG_PSEUDO_SKIP", 0),
        }
    }
}

/// The pseudo-task of one tool: content words of its description that are not words of
/// its name, one in `stride`, at most `max_words`; `None` with fewer than two.
pub fn pseudo_task(analyzer: &Analyzer, tool: &ToolRecord, shape: PseudoShape) -> Option<String> {
    let name: HashSet<String> = if std::env::var("TG_PSEUDO_KEEPNAME").is_ok() {
        HashSet::new()
    } else {
        analyzer.analyze(&tool.id.name).into_iter().collect()
    };
    let mut seen = HashSet::new();
    let content: Vec<&str> = truncate(tool.description(), 2048)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .filter(|w| {
            let terms = analyzer.analyze(w);
            !terms.is_empty()
                && terms.iter().all(|t| !name.contains(t))
                && terms.iter().any(|t| seen.insert(t.clone()))
        })
        .collect();
    let words: Vec<&str> = content
        .into_iter()
        .skip(shape.skip)
        .step_by(shape.stride.max(1))
        .take(shape.max_words)
        .collect();
    (words.len() >= 2).then(|| words.join(" "))
}

/// The sampled tools' pseudo-tasks, each expecting its tool and the tools of the same name
/// on other servers (twins are confusable, not wrong).
pub fn pseudo_tasks<'a>(
    tools: impl Iterator<Item = &'a Arc<ToolRecord>>,
    shape: PseudoShape,
) -> Vec<LabelledQuery> {
    let mut all: Vec<&Arc<ToolRecord>> = tools.collect();
    all.sort_by(|a, b| a.id.cmp(&b.id));
    let stride = all.len().div_ceil(MAX_PSEUDO_TASKS).max(1);
    let analyzer = Analyzer::new();
    all.iter()
        .step_by(stride)
        .filter_map(|tool| {
            let query = pseudo_task(&analyzer, tool, shape)?;
            let expected = all
                .iter()
                .filter(|t| t.id.name.eq_ignore_ascii_case(&tool.id.name))
                .map(|t| t.id.to_string())
                .collect();
            Some(LabelledQuery {
                id: None,
                query,
                expected,
                ambiguous: false,
                exact: false,
            })
        })
        .collect()
}
