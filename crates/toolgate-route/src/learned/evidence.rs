//! What the learned examples say about one task ([`Evidence`]: the nearest examples'
//! votes, worked out by [`super::Learned::evidence`]) and how it moves route's decision
//! ([`route_with`]): the bounds on moving a tool first and on selecting it.

use super::{LearningMode, LearningSettings};
use crate::decide::RouteDecision;
use toolgate_core::catalog::ToolRecord;

/// The first tool of the votes moves to the front of the candidates with at least this
/// share of the votes and an example at least this similar.
const RANK_SHARE: f32 = 0.5;
const RANK_SIMILARITY: f32 = 0.4;
/// Route selects on agreed evidence (see [`Evidence::agreed`]) when the votes' first tool
/// is route's own first with this share...
const CONFIRM_SHARE: f32 = 0.7;
const CONFIRM_SIMILARITY: f32 = 0.1;
/// ...or, whatever route ranked first, with this share and an example this similar.
const ALONE_SHARE: f32 = 0.8;
const ALONE_SIMILARITY: f32 = 0.3;
// The six bounds above were chosen on MetaTool's traffic half split again in two (examples
// from one quarter, tested on another; docs/routing.md), as the setting whose selections were
// at least 93% right with the most selected; bfcl and LiveMCPBench did not move with them.

/// What the learned examples say about one task: tools by votes, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// Tools by votes, best first.
    pub votes: Vec<Vote>,
    /// The share of all votes the first tool has.
    pub share: f32,
}

/// One tool's votes.
#[derive(Debug, Clone, PartialEq)]
pub struct Vote {
    pub server: String,
    pub name: String,
    /// Sum of the similarities of the examples voting for it.
    pub weight: f32,
    /// The most similar of them.
    pub best: f32,
    /// Distinct principals among them.
    pub principals: usize,
    /// Examples among them.
    pub examples: usize,
}

impl Evidence {
    /// The tool learned evidence may select, under `settings`, when route ranked `first`
    /// first on its own (destructiveness is the caller's to check): agreed by
    /// `min_agreement` principals (under mode `principal`: examples), and either confirming
    /// route's own first tool with most of the votes or, alone, with nearly all of them
    /// and a close example.
    pub fn agreed(
        &self,
        settings: &LearningSettings,
        first: Option<(&str, &str)>,
    ) -> Option<&Vote> {
        let top = self.votes.first()?;
        let agreement = match settings.mode {
            LearningMode::Principal => top.examples,
            _ => top.principals,
        };
        let confirms = first == Some((top.server.as_str(), top.name.as_str()))
            && self.share >= CONFIRM_SHARE
            && top.best >= CONFIRM_SIMILARITY;
        let alone = self.share >= ALONE_SHARE && top.best >= ALONE_SIMILARITY;
        (agreement >= settings.min_agreement.max(1) && (confirms || alone)).then_some(top)
    }

    /// The tool that moves to the front of route's candidates, if any.
    pub fn leader(&self) -> Option<&Vote> {
        let top = self.votes.first()?;
        (self.share >= RANK_SHARE && top.best >= RANK_SIMILARITY).then_some(top)
    }
}

/// Routes `task` as [`crate::route`] does, then lets the learned `evidence` move its
/// tools to the front of the candidates and, when [`Evidence::agreed`] and the tool is not
/// `destructive`, select it. Exact names and unknown names are left as they are.
pub fn route_with<R: crate::Retriever + ?Sized>(
    retriever: &R,
    task: &str,
    opts: &crate::RouteOptions,
    evidence: &Evidence,
    settings: &LearningSettings,
    destructive: &dyn Fn(&ToolRecord) -> bool,
) -> RouteDecision {
    let a = crate::decide::assess(retriever, task, opts);
    if evidence.votes.is_empty() || !matches!(a.basis, crate::decide::Basis::Ranked { .. }) {
        return crate::decide::decide(a, task, opts);
    }
    let decision = crate::decide::decide(a, task, opts);
    let RouteDecision::Clarify {
        confidence, ranked, ..
    } = &decision
    else {
        return decision;
    };
    // The voted tool moves to the front of the candidates when the votes agree enough to
    // select it (confirming route's own first tool, or alone), or lead clearly; and only
    // when the caller can see it (the retriever filters).
    let first = ranked
        .first()
        .map(|(t, _)| (t.id.server.as_str(), t.id.name.as_str()));
    let agreed = evidence.agreed(settings, first);
    let Some(leader) = agreed.or_else(|| evidence.leader()).and_then(|v| {
        retriever
            .exact(&format!("{}/{}", v.server, v.name), opts.server)
            .into_iter()
            .find(|t| t.id.server == v.server && t.id.name == v.name)
    }) else {
        return decision;
    };
    let agreed = agreed.is_some();
    let (confidence, mut ranked) = (*confidence, ranked.clone());
    let top = ranked.first().map_or(1.0, |(_, s)| *s);
    ranked.retain(|(t, _)| t.id != leader.id);
    ranked.insert(0, (leader.clone(), top));
    if agreed && !destructive(&leader) {
        return RouteDecision::Select {
            tool: leader,
            confidence: confidence.max(evidence.share),
            ranked,
        };
    }
    let candidates: Vec<_> = ranked
        .iter()
        .take(opts.limit.max(1))
        .map(|(t, _)| t.clone())
        .collect();
    RouteDecision::Clarify {
        question: format!(
            "Which of these do you mean: {}?",
            crate::decide::choice_list(&candidates)
        ),
        candidates,
        confidence,
        ranked,
        nothing_fits: false,
    }
}
