//! Learned examples: tasks that a model's own choice labelled (a clarification answered by
//! `execute` with one candidate's selectionId, or a browse followed by `execute` of a listed
//! tool, and the call succeeded). They are kept apart from the operator's example tasks
//! (`guided.route_examples`, indexed with the tools) because whose choices count depends on
//! who asks (`[guided.learning] mode`): route consults them after ranking, as votes of the
//! nearest learned tasks.
//!
//! Safe by construction: a learned example moves a tool up the candidates at once, but
//! moves a *selection* only when the nearest examples agree on one tool and were taught by
//! at least `min_agreement` distinct principals (or, under `mode = "principal"`, that many
//! times); a destructive tool is never selected on learned evidence alone; caps per tool
//! and per principal, expiry, and a later choice of another tool for the same task by the
//! same principal (a correction) removes the earlier one. Permission is never touched:
//! every call still passes the gate.

use super::decide::{Ranked, RouteDecision};
use super::text::{truncate, Analyzer};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;

/// One learned example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedExample {
    /// The task as route was given it (cut at [`super::examples::MAX_EXAMPLE_BYTES`]).
    pub task: String,
    pub server: String,
    pub name: String,
    /// Who taught it (a principal's name).
    pub principal: String,
    /// The profile it was taught under ("" for none).
    pub profile: String,
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
}

impl LearnedExample {
    /// `server/name`.
    pub fn tool(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }
}

/// Whose choices count for whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LearningMode {
    /// Nothing is learned.
    Off,
    /// A principal's choices count for that principal only.
    Principal,
    /// Choices count for callers of the same profile.
    #[default]
    Profile,
    /// Everyone's choices count for everyone.
    Shared,
}

/// The learning settings (`[guided.learning]`).
#[derive(Debug, Clone, PartialEq)]
pub struct LearningSettings {
    pub mode: LearningMode,
    /// Distinct principals (or, under `principal`, repetitions) before a selection moves.
    pub min_agreement: usize,
    /// Most examples kept per tool (oldest dropped first).
    pub max_per_tool: usize,
    /// Most examples kept per principal (oldest dropped first).
    pub max_per_principal: usize,
    /// How long an example counts, in milliseconds.
    pub expiry_ms: u64,
}

impl Default for LearningSettings {
    fn default() -> Self {
        Self {
            mode: LearningMode::Profile,
            min_agreement: 2,
            max_per_tool: 256,
            max_per_principal: 1000,
            expiry_ms: 90 * 24 * 3600 * 1000,
        }
    }
}

/// A learned example counts for a task only when at least this similar (cosine of the
/// analysed term sets).
const MIN_SIMILARITY: f32 = 0.5;
/// How many of the nearest examples vote.
const NEAREST: usize = 8;
/// A selection needs the nearest example at least this similar...
const SELECT_SIMILARITY: f32 = 0.6;
/// Most of the votes: the first tool moves up the candidates.
const RANK_SHARE: f32 = 0.5;
/// ...and at least this share of the votes for one tool.
const SELECT_SHARE: f32 = 0.75;

/// What the learned examples say about one task: tools by votes, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
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
    /// The tool learned evidence may select, under `settings` (destructiveness is the
    /// caller's to check).
    pub fn agreed(&self, settings: &LearningSettings) -> Option<&Vote> {
        let top = self.votes.first()?;
        let agreement = match settings.mode {
            LearningMode::Principal => top.examples,
            _ => top.principals,
        };
        (agreement >= settings.min_agreement.max(1)
            && top.best >= SELECT_SIMILARITY
            && self.share >= SELECT_SHARE)
            .then_some(top)
    }
}

/// The learned examples, with an inverted index of their terms.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    pub settings: LearningSettings,
    examples: Vec<LearnedExample>,
    terms: Vec<HashSet<String>>,
    postings: HashMap<String, Vec<u32>>,
}

impl Learned {
    pub fn new(settings: LearningSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// Every kept example, oldest first.
    pub fn examples(&self) -> &[LearnedExample] {
        &self.examples
    }

    pub fn len(&self) -> usize {
        self.examples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.examples.is_empty()
    }

    /// Records one example: the same principal's earlier examples of the same task for
    /// another tool go (a correction), a repeat only refreshes the time, and the caps drop
    /// the oldest. Returns false when learning is off or the task is empty.
    pub fn record(&mut self, mut ex: LearnedExample) -> bool {
        ex.task = truncate(ex.task.trim(), super::examples::MAX_EXAMPLE_BYTES).to_string();
        if self.settings.mode == LearningMode::Off || ex.task.is_empty() {
            return false;
        }
        let key = normal(&ex.task);
        let mut kept: Vec<LearnedExample> = Vec::with_capacity(self.examples.len() + 1);
        let mut repeat = false;
        for old in self.examples.drain(..) {
            let same_task = old.principal == ex.principal && normal(&old.task) == key;
            if same_task && old.server == ex.server && old.name == ex.name {
                repeat = true;
                continue;
            }
            if same_task {
                continue; // contradicted by the later choice
            }
            kept.push(old);
        }
        let _ = repeat;
        kept.push(ex.clone());
        // Caps: oldest first.
        let over = |list: &[LearnedExample], f: &dyn Fn(&LearnedExample) -> bool| {
            list.iter().filter(|e| f(e)).count()
        };
        while over(&kept, &|e| e.server == ex.server && e.name == ex.name)
            > self.settings.max_per_tool
        {
            let i = kept
                .iter()
                .position(|e| e.server == ex.server && e.name == ex.name)
                .expect("counted");
            kept.remove(i);
        }
        while over(&kept, &|e| e.principal == ex.principal) > self.settings.max_per_principal {
            let i = kept
                .iter()
                .position(|e| e.principal == ex.principal)
                .expect("counted");
            kept.remove(i);
        }
        self.rebuild(kept);
        true
    }

    /// Takes a whole set (loading from the store, importing).
    pub fn replace(&mut self, examples: Vec<LearnedExample>) {
        self.rebuild(examples);
    }

    /// Forgets the examples `drop` picks; returns how many went.
    pub fn forget(&mut self, drop: &dyn Fn(&LearnedExample) -> bool) -> usize {
        let before = self.examples.len();
        let kept: Vec<_> = self.examples.drain(..).filter(|e| !drop(e)).collect();
        let gone = before - kept.len();
        self.rebuild(kept);
        gone
    }

    /// Drops the examples older than the expiry at `now_ms`; returns how many went.
    pub fn expire(&mut self, now_ms: u64) -> usize {
        let ttl = self.settings.expiry_ms;
        self.forget(&|e| e.at_ms.saturating_add(ttl) < now_ms)
    }

    fn rebuild(&mut self, examples: Vec<LearnedExample>) {
        let analyzer = Analyzer::new();
        self.terms = examples
            .iter()
            .map(|e| analyzer.analyze(&e.task).into_iter().collect())
            .collect();
        self.postings.clear();
        for (i, terms) in self.terms.iter().enumerate() {
            for t in terms {
                self.postings.entry(t.clone()).or_default().push(i as u32);
            }
        }
        self.examples = examples;
    }

    /// The votes of the nearest examples that count for `principal` of `profile`.
    pub fn evidence(&self, task: &str, principal: &str, profile: &str) -> Evidence {
        if self.settings.mode == LearningMode::Off || self.examples.is_empty() {
            return Evidence::default();
        }
        let analyzer = Analyzer::new();
        let query: HashSet<String> = analyzer
            .analyze(truncate(task, super::examples::MAX_EXAMPLE_BYTES))
            .into_iter()
            .collect();
        if query.is_empty() {
            return Evidence::default();
        }
        let mut shared: HashMap<u32, usize> = HashMap::new();
        for t in &query {
            for &i in self.postings.get(t).map_or(&[][..], Vec::as_slice) {
                *shared.entry(i).or_default() += 1;
            }
        }
        let counts = |e: &LearnedExample| match self.settings.mode {
            LearningMode::Off => false,
            LearningMode::Principal => e.principal == principal,
            LearningMode::Profile => e.profile == profile,
            LearningMode::Shared => true,
        };
        let mut near: Vec<(f32, u32)> = shared
            .into_iter()
            .filter(|(i, _)| counts(&self.examples[*i as usize]))
            .map(|(i, n)| {
                let size = (query.len() * self.terms[i as usize].len()) as f32;
                (n as f32 / size.sqrt(), i)
            })
            .filter(|(s, _)| *s >= MIN_SIMILARITY)
            .collect();
        near.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        near.truncate(NEAREST);
        let mut by_tool: Vec<(Vote, HashSet<&str>)> = Vec::new();
        for (sim, i) in near {
            let e = &self.examples[i as usize];
            match by_tool
                .iter_mut()
                .find(|(v, _)| v.server == e.server && v.name == e.name)
            {
                Some((v, who)) => {
                    v.weight += sim;
                    v.best = v.best.max(sim);
                    v.examples += 1;
                    who.insert(&e.principal);
                    v.principals = who.len();
                }
                None => by_tool.push((
                    Vote {
                        server: e.server.clone(),
                        name: e.name.clone(),
                        weight: sim,
                        best: sim,
                        principals: 1,
                        examples: 1,
                    },
                    HashSet::from([e.principal.as_str()]),
                )),
            }
        }
        let mut votes: Vec<Vote> = by_tool.into_iter().map(|(v, _)| v).collect();
        votes.sort_by(|a, b| b.weight.total_cmp(&a.weight));
        let total: f32 = votes.iter().map(|v| v.weight).sum();
        let share = votes
            .first()
            .map_or(0.0, |v| v.weight / total.max(f32::MIN_POSITIVE));
        Evidence { votes, share }
    }
}

/// A task's text for telling repeats and corrections apart: lower case, words only.
pub fn normal(task: &str) -> String {
    task.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Routes `task` as [`super::route`] does, then lets the learned `evidence` move its
/// tools to the front of the candidates and, when [`Evidence::agreed`] and the tool is not
/// `destructive`, select it. Exact names and unknown names are left as they are.
pub fn route_with<R: super::Retriever + ?Sized>(
    retriever: &R,
    task: &str,
    opts: &super::RouteOptions,
    evidence: &Evidence,
    settings: &LearningSettings,
    destructive: &dyn Fn(&ToolRecord) -> bool,
) -> RouteDecision {
    let a = super::assess(retriever, task, opts);
    if evidence.votes.is_empty() || !matches!(a.basis, super::Basis::Ranked { .. }) {
        return super::decide::decide(a, task, opts);
    }
    let decision = super::decide::decide(a, task, opts);
    let (confidence, mut ranked) = match decision {
        RouteDecision::Select { .. } => return decision,
        RouteDecision::Clarify {
            confidence, ranked, ..
        } => (confidence, ranked),
    };
    // The voted tools this caller can see (the retriever filters), best first; only votes
    // from a close example, and most of the votes, move a tool up.
    let voted: Vec<Arc<ToolRecord>> = evidence
        .votes
        .iter()
        .filter(|v| v.best >= SELECT_SIMILARITY && evidence.share >= RANK_SHARE)
        .take(1)
        .filter_map(|v| {
            retriever
                .exact(&format!("{}/{}", v.server, v.name), opts.server)
                .into_iter()
                .find(|t| t.id.server == v.server && t.id.name == v.name)
        })
        .collect();
    if voted.is_empty() {
        return super::decide::decide(super::assess(retriever, task, opts), task, opts);
    }
    let top = ranked.first().map_or(1.0, |(_, s)| *s);
    let mut front: Ranked = voted.iter().map(|t| (t.clone(), top)).collect();
    ranked.retain(|(t, _)| !voted.iter().any(|v| v.id == t.id));
    front.append(&mut ranked);
    let ranked = front;
    let agreed = evidence
        .agreed(settings)
        .filter(|v| voted[0].id.server == v.server && voted[0].id.name == v.name);
    if agreed.is_some() && !destructive(&voted[0]) {
        return RouteDecision::Select {
            tool: voted[0].clone(),
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
            super::decide::choice_list(&candidates)
        ),
        candidates,
        confidence,
        ranked,
        nothing_fits: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(task: &str, tool: &str, who: &str, profile: &str) -> LearnedExample {
        let (server, name) = tool.split_once('/').unwrap();
        LearnedExample {
            task: task.into(),
            server: server.into(),
            name: name.into(),
            principal: who.into(),
            profile: profile.into(),
            at_ms: 1,
        }
    }

    #[test]
    fn agreement_of_two_principals_is_needed_to_select() {
        let mut l = Learned::new(LearningSettings::default());
        l.record(ex(
            "remember that Alice prefers tea",
            "memory/create_entities",
            "a",
            "p",
        ));
        let e = l.evidence("remember that Bob prefers tea", "c", "p");
        assert_eq!(e.votes[0].name, "create_entities");
        assert!(e.agreed(&l.settings).is_none(), "one principal alone");
        l.record(ex(
            "remember that Alice prefers tea",
            "memory/create_entities",
            "b",
            "p",
        ));
        let e = l.evidence("remember that Bob prefers tea", "c", "p");
        assert!(e.agreed(&l.settings).is_some());
        // Another profile is not affected.
        assert!(l
            .evidence("remember that Bob prefers tea", "c", "q")
            .votes
            .is_empty());
    }

    #[test]
    fn a_later_choice_corrects_and_caps_hold() {
        let mut l = Learned::new(LearningSettings {
            max_per_tool: 2,
            ..LearningSettings::default()
        });
        l.record(ex("show commits", "git/git_status", "a", ""));
        l.record(ex("show commits", "git/git_log", "a", ""));
        assert_eq!(l.len(), 1);
        assert_eq!(l.examples()[0].name, "git_log");
        for i in 0..5 {
            l.record(ex(&format!("task {i}"), "s/t", "a", ""));
        }
        assert_eq!(l.examples().iter().filter(|e| e.name == "t").count(), 2);
        assert_eq!(l.forget(&|e| e.name == "t"), 2);
        assert_eq!(l.expire(u64::MAX), 1);
    }
}
