//! Ranking: a task's weighted terms (words, phrase bigrams, synonyms, verb senses), then
//! BM25F over the postings, server by server, and the best `k`.

use super::{idf, length_norm, RouteIndex};
use crate::doc::N_FIELDS;
use crate::text::{bigram, clauses, truncate, MAX_TASK_BYTES};
use crate::{synonyms, Described};
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;

impl RouteIndex {
    /// A term's idf; a term no tool has counts as the rarest.
    fn term_idf(&self, term: &str) -> f32 {
        let n = self.docs.max(1) as f32;
        idf(n, self.terms.get(term).map_or(0.0, |e| e.df as f32))
    }

    /// Query terms with their weights: words count once per occurrence, phrase bigrams
    /// `bigram_weight` each, and (with `synonyms`) each synonym `synonym_weight`. The
    /// ceiling leaves synonyms out: they stand in for a word, they add nothing to explain.
    pub(super) fn query_terms(&self, query: &str, synonyms: bool) -> Vec<(String, f32)> {
        let (weighted, words) = self.plain_terms(query);
        if synonyms {
            merged(self.with_synonyms(query, weighted, &words))
        } else {
            merged(weighted)
        }
    }

    /// The task's words and phrase bigrams, weighted, in the task's order (repeats kept),
    /// and its words (for the verbs' senses).
    fn plain_terms(&self, query: &str) -> (Vec<(String, f32)>, Vec<String>) {
        let query = truncate(query, MAX_TASK_BYTES);
        let (mut terms, mut words) = (Vec::new(), Vec::new());
        self.analyzer.terms(query, &mut terms, Some(&mut words));
        let bw = self.params.bigram_weight;
        let mut weighted: Vec<(String, f32)> = terms.into_iter().map(|t| (t, 1.0)).collect();
        weighted.extend(words.windows(2).map(|w| (bigram(&w[0], &w[1]), bw)));
        (weighted, words)
    }

    /// `weighted` ([`Self::plain_terms`]) with the synonyms of `query`, when they weigh.
    fn with_synonyms(
        &self,
        query: &str,
        mut weighted: Vec<(String, f32)>,
        words: &[String],
    ) -> Vec<(String, f32)> {
        let sw = self.params.synonym_weight;
        if sw <= 0.0 {
            return weighted;
        }
        let query = truncate(query, MAX_TASK_BYTES);
        // What a phrase means counts as a word of the task ("what time" -> current).
        weighted.extend(
            synonyms::phrases(&self.analyzer, query)
                .into_iter()
                .map(|m| (m, 1.0)),
        );
        // A verb in its sense here ("open" a ticket): the meaning is the word.
        for (verb, meaning) in synonyms::senses(&self.analyzer, words) {
            for (_, w) in weighted.iter_mut().filter(|(t, _)| *t == verb) {
                *w = sw;
            }
            weighted.push((meaning, 1.0));
        }
        let own = terms_of(&weighted);
        for syn in synonyms::expand(&own) {
            // A synonym never weighs more than the word it stands for: a rare synonym
            // of a common word ("find" for "search") would otherwise outrank it.
            let source = own
                .iter()
                .filter(|t| synonyms::of(t).contains(&syn))
                .map(|t| self.term_idf(t))
                .fold(0.0, f32::max);
            let cap = (source / self.term_idf(&syn).max(1e-6)).min(1.0);
            weighted.push((syn, sw * cap));
        }
        weighted
    }

    /// The `k` best tools for `query` by BM25F, best first, only from `server` when given.
    pub fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)> {
        self.rank_scored(query, server, k, false).ranked
    }

    /// [`Self::rank`], with each ranked tool's score by the words of its description and
    /// parameters alone (BM25F over those two fields; the name, title and server left out),
    /// computed in the same pass over the postings, and [`Self::ceiling`] from the same
    /// analysis of the task.
    pub fn rank_described(&self, query: &str, server: Option<&str>, k: usize) -> Described {
        self.rank_scored(query, server, k, true)
    }

    fn rank_scored(
        &self,
        query: &str,
        server: Option<&str>,
        k: usize,
        described: bool,
    ) -> Described {
        let only = match server {
            Some(s) => match self.slot_of(s) {
                Some(slot) => Some(slot),
                None => {
                    return Described {
                        ceiling: described.then(|| self.ceiling(query)),
                        ..Described::default()
                    }
                }
            },
            None => None,
        };
        let (weighted, words) = self.plain_terms(query);
        let ceiling = described.then(|| self.ceiling_of(&merged(weighted.clone())));
        let terms = merged(self.with_synonyms(query, weighted, &words));
        let mut acc = self.scores(&terms, only);
        let w = self.params.clause_weight;
        let parts = if w > 0.0 {
            clauses(truncate(query, MAX_TASK_BYTES))
        } else {
            Vec::new()
        };
        let top = acc.iter().copied().fold(0.0, f32::max);
        if parts.len() > 1 && top > 0.0 {
            // Each list normalised by its best score, averaged with the whole task
            // counting 1 and each clause `w`, then put back in whole-task units so the
            // decision's ceiling still applies.
            let total = 1.0 + w * parts.len() as f32;
            for s in acc.iter_mut() {
                *s /= top;
            }
            for part in &parts {
                let scores = self.scores(&self.query_terms(part, true), only);
                let best = scores.iter().copied().fold(0.0, f32::max);
                if best > 0.0 {
                    for (s, c) in acc.iter_mut().zip(&scores) {
                        *s += w * c / best;
                    }
                }
            }
            for s in acc.iter_mut() {
                *s *= top / total;
            }
        }
        // The best `k` kept while reading the scores: a list of every matching tool, then
        // cut, was most of the cost of choosing them.
        let mut best = Shortlist::new(k);
        for (slot, shard) in self.shards.iter().enumerate() {
            let Some(shard) = shard else { continue };
            if only.is_some_and(|o| o != slot as u32) {
                continue;
            }
            let base = shard.offset as usize;
            let scores = &acc[base..base + shard.tools.len()];
            for (doc, &s) in scores.iter().enumerate() {
                if s > 0.0 {
                    best.offer((s, slot as u32, doc as u32));
                }
            }
        }
        let hits = best.into_hits();
        let by_description = if described {
            self.described_scores(&terms, &hits)
        } else {
            Vec::new()
        };
        let ranked = hits
            .into_iter()
            .filter_map(|(score, slot, doc)| {
                let shard = self.shards[slot as usize].as_ref()?;
                Some((shard.tools[doc as usize].clone(), score))
            })
            .collect();
        Described {
            ranked,
            by_description,
            ceiling,
        }
    }

    /// Per-field 1 / average length, so the scoring loops multiply instead of divide.
    pub(super) fn inv_avg_lens(&self) -> [f32; N_FIELDS] {
        let n = self.docs.max(1) as f32;
        self.len_sum.map(|sum| {
            let avg = sum as f32 / n;
            if avg > 0.0 {
                1.0 / avg
            } else {
                0.0
            }
        })
    }

    /// Every document's score for the weighted query `terms` (0 for no match), in
    /// accumulator order.
    fn scores(&self, terms: &[(String, f32)], only: Option<u32>) -> Vec<f32> {
        let p = &self.params;
        let n = self.docs.max(1) as f32;
        let inv_avg = self.inv_avg_lens();
        let servers = self.servers.max(1) as f32;
        let avg_server_len = self.len_sum.iter().sum::<u64>() as f32 / servers;
        let mut acc = vec![0f32; self.docs as usize];
        let mut server_score = vec![
            0f32;
            if p.server_weight > 0.0 {
                self.shards.len()
            } else {
                0
            }
        ];
        for (term, qw) in terms {
            let qw = *qw;
            let Some(entry) = self.terms.get(term) else {
                continue;
            };
            let idf = idf(n, entry.df as f32);
            // ln(S / sdf): zero for a term every server has, so one server adds nothing.
            let sidf = (servers / entry.lists.len() as f32).ln();
            let norms = entry
                .norms
                .get_or_init(|| self.posting_norms(&entry.lists, &inv_avg));
            for ((slot, list), norms) in entry.lists.iter().zip(norms.iter()) {
                if only.is_some_and(|o| o != *slot) {
                    continue;
                }
                let Some(shard) = self.shards[*slot as usize].as_ref() else {
                    continue;
                };
                let base = shard.offset as usize;
                for (posting, &tf) in list.iter().zip(norms.iter()) {
                    acc[base + posting.doc as usize] += qw * idf * tf / (p.k1 + tf);
                }
                if let Some(s) = server_score.get_mut(*slot as usize) {
                    let stf = weighted_tf(p, list);
                    let norm = 0.25 + 0.75 * shard.total_len as f32 / avg_server_len.max(1.0);
                    *s += qw * sidf * stf / (stf + p.k1 * norm);
                }
            }
        }
        // The server evidence goes to every matching tool of the server.
        for (slot, s) in server_score.iter().enumerate() {
            let Some(shard) = self.shards[slot].as_ref().filter(|_| *s > 0.0) else {
                continue;
            };
            let base = shard.offset as usize;
            for a in &mut acc[base..base + shard.tools.len()] {
                if *a > 0.0 {
                    *a += p.server_weight * s;
                }
            }
        }
        acc
    }
}

impl RouteIndex {
    /// Each posting's BM25F term frequency over its fields, weighted and length-normalised
    /// (one list per server slot, in `lists`' order): what every task with the term would
    /// work out again for every posting, kept in its term's entry.
    fn posting_norms(
        &self,
        lists: &[(u32, Vec<super::Posting>)],
        inv_avg: &[f32; N_FIELDS],
    ) -> Arc<[Box<[f32]>]> {
        let p = &self.params;
        lists
            .iter()
            .map(|(slot, list)| {
                let Some(shard) = self.shards[*slot as usize].as_ref() else {
                    return Box::default();
                };
                list.iter()
                    .map(|posting| {
                        let lens = &shard.lens[posting.doc as usize];
                        let mut tf = 0.0;
                        for f in 0..N_FIELDS {
                            if posting.tf[f] > 0 {
                                let wtf = p.weights[f] * f32::from(posting.tf[f]);
                                tf += wtf / length_norm(p, f, lens, inv_avg);
                            }
                        }
                        tf
                    })
                    .collect()
            })
            .collect()
    }
}

/// A server's field-weighted term frequency over its postings `list`, not
/// length-normalised (the server's evidence, `server_weight`).
fn weighted_tf(p: &super::Bm25fParams, list: &[super::Posting]) -> f32 {
    let mut stf = 0.0;
    for posting in list {
        for f in 0..N_FIELDS {
            if posting.tf[f] > 0 {
                stf += p.weights[f] * f32::from(posting.tf[f]);
            }
        }
    }
    stf
}

/// `weighted` in term order, each term once with its weights summed (in the order they
/// came).
fn merged(mut weighted: Vec<(String, f32)>) -> Vec<(String, f32)> {
    weighted.sort_by(|a, b| a.0.cmp(&b.0));
    weighted.dedup_by(|later, first| {
        let same = later.0 == first.0;
        if same {
            first.1 += later.1;
        }
        same
    });
    weighted
}

/// The terms of weighted query terms.
fn terms_of(weighted: &[(String, f32)]) -> Vec<String> {
    weighted.iter().map(|(t, _)| t.clone()).collect()
}

/// The best `keep` hits of a pass over every tool (the ranking's scores, the first pass of
/// [`RouteIndex::closest`]) without a list of every tool. Hits are offered in (slot, doc)
/// order; those at or below the floor are dropped (a later hit loses a tie), and at twice
/// `keep` the list is cut back to the best `keep` ([`top_k`]), whose lowest becomes the
/// floor.
pub(super) struct Shortlist {
    keep: usize,
    hits: Vec<(f32, u32, u32)>,
    floor: f32,
}

impl Shortlist {
    // Both inlined into the passes over every tool, which live in other modules (measured:
    // called, not inlined, they made route a fifth slower).
    #[inline]
    pub(super) fn new(keep: usize) -> Self {
        Self {
            keep,
            hits: Vec::with_capacity(2 * keep),
            floor: f32::NEG_INFINITY,
        }
    }

    #[inline]
    pub(super) fn offer(&mut self, hit: (f32, u32, u32)) {
        if hit.0 <= self.floor {
            return;
        }
        self.hits.push(hit);
        if self.hits.len() >= 2 * self.keep {
            top_k(&mut self.hits, self.keep);
            self.floor = self.hits.last().map_or(f32::NEG_INFINITY, |h| h.0);
        }
    }

    /// The best `keep`, best first.
    pub(super) fn into_hits(mut self) -> Vec<(f32, u32, u32)> {
        top_k(&mut self.hits, self.keep);
        self.hits
    }
}

/// Keeps the `k` best hits, best first; ties go to the earlier (slot, doc), which is
/// (server, name) order for a freshly built index.
pub(super) fn top_k(hits: &mut Vec<(f32, u32, u32)>, k: usize) {
    let order = |a: &(f32, u32, u32), b: &(f32, u32, u32)| {
        b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
    };
    if hits.len() > k && k > 0 {
        hits.select_nth_unstable_by(k - 1, order);
    }
    hits.truncate(k);
    hits.sort_unstable_by(order);
}
