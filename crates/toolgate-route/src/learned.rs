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

use super::text::{truncate, Analyzer, Map};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

mod evidence;
use evidence::Vote;
pub use evidence::{route_with, Evidence};

/// One learned example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedExample {
    /// The task as route was given it (cut at `MAX_EXAMPLE_BYTES`).
    pub task: String,
    /// The server of the tool it teaches.
    pub server: String,
    /// The tool's name on that server.
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
    /// Whether and how examples are learned.
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
            max_per_principal: 5000,
            expiry_ms: 90 * 24 * 3600 * 1000,
        }
    }
}

/// A learned example counts for a task only when at least this similar (cosine of the
/// term sets, each term weighted by its IDF among the examples: rare shared words count).
const MIN_SIMILARITY: f32 = 0.1;
/// How many of the nearest examples vote.
const NEAREST: usize = 8;
/// The learned examples, with an inverted index of their terms.
///
/// Terms, principals and profiles are numbered as they are first seen, so a route call
/// looks each of the task's terms up once and then works on integers: the postings add
/// each term's IDF into one slot per example, and one pass over the slots keeps the
/// examples that count for the caller (an integer comparison) and are similar enough.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    /// The settings the set was made with.
    pub settings: LearningSettings,
    examples: Vec<LearnedExample>,
    /// Each example's distinct terms (numbers into `postings`), ascending.
    terms: Vec<Box<[u32]>>,
    /// Each example's task as [`normal`] gives it (repeats and corrections).
    keys: Vec<String>,
    /// Each example's terms' summed IDF (refreshed whenever the set doubles).
    weights: Vec<f32>,
    /// The set's size when `weights` were last all computed.
    weighed_at: usize,
    /// Term -> its number.
    vocabulary: Map<String, u32>,
    /// Per term number, the examples that have it, ascending.
    postings: Vec<Vec<u32>>,
    /// Principal and profile names -> their numbers, and each example's two numbers.
    scopes: Map<String, u32>,
    principals: Vec<u32>,
    profiles: Vec<u32>,
}

impl Learned {
    /// An empty set under `settings`.
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

    /// Number of examples kept.
    pub fn len(&self) -> usize {
        self.examples.len()
    }

    /// True when no example is kept.
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
        let same_task =
            |i: usize| self.examples[i].principal == ex.principal && self.keys[i] == key;
        let per_tool = |e: &LearnedExample| e.server == ex.server && e.name == ex.name;
        let per_principal = |e: &LearnedExample| e.principal == ex.principal;
        // The common case drops nothing: the example joins the index as it is.
        let full = |f: &dyn Fn(&LearnedExample) -> bool, cap: usize| {
            self.examples.iter().filter(|e| f(e)).count() >= cap
        };
        if !(0..self.examples.len()).any(same_task)
            && !full(&per_tool, self.settings.max_per_tool)
            && !full(&per_principal, self.settings.max_per_principal)
        {
            self.append(ex);
            return true;
        }
        // A repeat only refreshes the time; the same principal's example of the same task
        // for another tool is contradicted by this later choice and goes.
        let mut kept: Vec<LearnedExample> = (self.examples.iter().enumerate())
            .filter(|(i, _)| !same_task(*i))
            .map(|(_, e)| e.clone())
            .collect();
        kept.push(ex.clone());
        // Caps: oldest first.
        for (f, cap) in [
            (
                &per_tool as &dyn Fn(&LearnedExample) -> bool,
                self.settings.max_per_tool,
            ),
            (&per_principal, self.settings.max_per_principal),
        ] {
            let mut over = kept.iter().filter(|e| f(e)).count().saturating_sub(cap);
            kept.retain(|e| {
                let drop = over > 0 && f(e);
                over -= usize::from(drop);
                !drop
            });
        }
        self.rebuild(kept);
        true
    }

    /// Adds one example to the index without touching the others.
    fn append(&mut self, ex: LearnedExample) {
        self.index(&Analyzer::new(), ex);
        if self.examples.len() >= 2 * self.weighed_at.max(8) {
            self.weigh();
        } else {
            let w = self.weight(self.terms.len() - 1);
            self.weights.push(w);
        }
    }

    /// Indexes one example after the others (its weight is the caller's to add).
    fn index(&mut self, analyzer: &Analyzer, ex: LearnedExample) {
        let i = self.examples.len() as u32;
        let mut terms: Vec<u32> = analyzer
            .analyze(&ex.task)
            .into_iter()
            .map(|t| {
                let next = self.postings.len() as u32;
                let id = *self.vocabulary.entry(t).or_insert(next);
                if id == next {
                    self.postings.push(Vec::new());
                }
                id
            })
            .collect();
        terms.sort_unstable();
        terms.dedup();
        for &t in &terms {
            self.postings[t as usize].push(i);
        }
        self.terms.push(terms.into());
        let principal = self.scope(&ex.principal);
        let profile = self.scope(&ex.profile);
        self.principals.push(principal);
        self.profiles.push(profile);
        self.keys.push(normal(&ex.task));
        self.examples.push(ex);
    }

    /// The number of a principal's or a profile's name, given it on first sight.
    fn scope(&mut self, name: &str) -> u32 {
        let next = self.scopes.len() as u32;
        *self.scopes.entry(name.to_string()).or_insert(next)
    }

    /// Takes a whole set (loading from the store, importing).
    pub fn replace(&mut self, examples: Vec<LearnedExample>) {
        self.rebuild(examples);
    }

    /// Forgets the examples `drop` picks; returns how many went.
    pub fn forget(&mut self, drop: &dyn Fn(&LearnedExample) -> bool) -> usize {
        // Nothing to drop (expiry's usual answer, checked before each example is learned):
        // the index stays as it is.
        if !self.examples.iter().any(drop) {
            return 0;
        }
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
        self.examples.clear();
        self.terms.clear();
        self.keys.clear();
        self.vocabulary.clear();
        self.postings.clear();
        self.scopes.clear();
        self.principals.clear();
        self.profiles.clear();
        let analyzer = Analyzer::new();
        for ex in examples {
            self.index(&analyzer, ex);
        }
        self.weigh();
    }

    /// The IDF of a term found in `df` of the examples.
    fn idf(&self, df: usize) -> f32 {
        let n = self.examples.len() as f32;
        let df = df as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Example `i`'s terms' summed IDF.
    fn weight(&self, i: usize) -> f32 {
        self.terms[i]
            .iter()
            .map(|&t| self.idf(self.postings[t as usize].len()))
            .sum()
    }

    /// Computes every example's weight with the IDF of the set as it is now.
    fn weigh(&mut self) {
        self.weights = (0..self.terms.len()).map(|i| self.weight(i)).collect();
        self.weighed_at = self.examples.len();
    }

    /// The votes of the nearest examples that count for `principal` of `profile`.
    pub fn evidence(&self, task: &str, principal: &str, profile: &str) -> Evidence {
        // Whose examples count: one principal's, one profile's (by number: a name never
        // seen has none), or everyone's.
        let only: Option<(&[u32], u32)> = match self.settings.mode {
            LearningMode::Off => return Evidence::default(),
            LearningMode::Principal => match self.scopes.get(principal) {
                Some(&p) => Some((&self.principals, p)),
                None => return Evidence::default(),
            },
            LearningMode::Profile => match self.scopes.get(profile) {
                Some(&p) => Some((&self.profiles, p)),
                None => return Evidence::default(),
            },
            LearningMode::Shared => None,
        };
        if self.examples.is_empty() {
            return Evidence::default();
        }
        let mut query = Analyzer::new().analyze(truncate(task, super::examples::MAX_EXAMPLE_BYTES));
        query.sort_unstable();
        query.dedup();
        if query.is_empty() {
            return Evidence::default();
        }
        // A dense accumulator (one slot per example) and the list of slots touched: cheaper
        // than a map at tens of thousands of postings. Terms in text order, so the sums
        // are the same on every call.
        let mut shared = vec![0.0f32; self.examples.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut query_weight = 0.0;
        for t in &query {
            let postings = self
                .vocabulary
                .get(t)
                .map_or(&[][..], |&id| self.postings[id as usize].as_slice());
            let idf = self.idf(postings.len());
            query_weight += idf;
            for &i in postings {
                let slot = &mut shared[i as usize];
                if *slot == 0.0 {
                    if only.is_some_and(|(of, who)| of[i as usize] != who) {
                        continue;
                    }
                    touched.push(i);
                }
                *slot += idf;
            }
        }
        let mut near: Vec<(f32, u32)> = touched
            .into_iter()
            .map(|i| {
                let size = query_weight * self.weights[i as usize];
                (shared[i as usize] / size.sqrt().max(f32::MIN_POSITIVE), i)
            })
            .filter(|(s, _)| *s >= MIN_SIMILARITY)
            .collect();
        let order = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if near.len() > NEAREST {
            near.select_nth_unstable_by(NEAREST - 1, order);
            near.truncate(NEAREST);
        }
        near.sort_by(order);
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
        assert!(e.agreed(&l.settings, None).is_none(), "one principal alone");
        l.record(ex(
            "remember that Alice prefers tea",
            "memory/create_entities",
            "b",
            "p",
        ));
        let e = l.evidence("remember that Bob prefers tea", "c", "p");
        assert!(e.agreed(&l.settings, None).is_some());
        // Another profile is not affected.
        assert!(l
            .evidence("remember that Bob prefers tea", "c", "q")
            .votes
            .is_empty());
    }

    #[test]
    fn votes_count_only_whose_examples_the_mode_says_and_sum_the_same_each_call() {
        let mut l = Learned::new(LearningSettings {
            mode: LearningMode::Principal,
            ..LearningSettings::default()
        });
        for (task, who) in [
            ("remember that Alice prefers tea", "a"),
            ("remember that Carol likes green tea", "a"),
            ("note that Bob prefers coffee", "b"),
        ] {
            l.record(ex(task, "memory/create_entities", who, "p"));
        }
        let task = "remember that Dan prefers tea";
        let e = l.evidence(task, "a", "p");
        assert_eq!(e.votes[0].examples, 2, "a's own two examples");
        assert_eq!(l.evidence(task, "b", "p").votes[0].examples, 1);
        assert_eq!(l.evidence(task, "nobody", "p"), Evidence::default());
        // The same task gets the same votes, to the last bit, on every call.
        for _ in 0..8 {
            assert_eq!(l.evidence(task, "a", "p"), e);
        }
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
