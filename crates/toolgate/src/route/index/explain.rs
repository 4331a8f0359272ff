//! EXPERIMENT: per-tool, per-term contributions for the first few of a ranking.

use super::{idf, length_norm, RouteIndex};
use crate::catalog::ToolRecord;
use crate::route::doc::{NAME, N_FIELDS, TITLE};
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Explained {
    pub terms: Vec<(String, f32)>,
    /// Per task word: indices of the terms that stand on it.
    pub groups: Vec<Vec<usize>>,
    /// Per tool, per term: its share of the score.
    pub contrib: Vec<Vec<f32>>,
    /// Per tool: BM25F over name and title alone.
    pub named: Vec<f32>,
}

impl RouteIndex {
    pub fn explain(&self, query: &str, tools: &[Arc<ToolRecord>]) -> Explained {
        let terms = self.query_terms(query, true);
        let p = &self.params;
        let n = self.docs.max(1) as f32;
        let inv_avg = self.inv_avg_lens();
        let locs: Vec<Option<(u32, u32)>> = tools
            .iter()
            .map(|t| {
                let slot = *self.slots.get(&t.id.server)?;
                let shard = self.shards[slot as usize].as_ref()?;
                let doc = shard.tools.iter().position(|x| x.id == t.id)?;
                Some((slot, doc as u32))
            })
            .collect();
        let mut contrib = vec![vec![0f32; terms.len()]; tools.len()];
        let mut named = vec![0f32; tools.len()];
        for (ti, (term, qw)) in terms.iter().enumerate() {
            let Some(entry) = self.terms.get(term) else {
                continue;
            };
            let idf = idf(n, entry.df as f32);
            for (slot, list) in &entry.lists {
                for (hi, loc) in locs.iter().enumerate() {
                    let Some((s, doc)) = *loc else { continue };
                    if s != *slot {
                        continue;
                    }
                    let Ok(i) = list.binary_search_by_key(&doc, |posting| posting.doc) else {
                        continue;
                    };
                    let shard = self.shards[s as usize].as_ref().unwrap();
                    let lens = &shard.lens[doc as usize];
                    let field = |f: usize| {
                        p.weights[f] * f32::from(list[i].tf[f]) / length_norm(p, f, lens, &inv_avg)
                    };
                    let tf: f32 = (0..N_FIELDS)
                        .filter(|&f| list[i].tf[f] > 0)
                        .map(field)
                        .sum();
                    if tf > 0.0 {
                        contrib[hi][ti] = qw * idf * tf / (p.k1 + tf);
                    }
                    let tn: f32 = [NAME, TITLE]
                        .into_iter()
                        .filter(|&f| list[i].tf[f] > 0)
                        .map(field)
                        .sum();
                    if tn > 0.0 {
                        named[hi] += qw * idf * tn / (p.k1 + tn);
                    }
                }
            }
        }
        // Task words: the unigram terms that are not synonyms-only; a bigram stands on both
        // its words, a synonym on the words it is a synonym of.
        let mut words: Vec<String> = Vec::new();
        let (mut t, mut w) = (Vec::new(), Vec::new());
        self.analyzer.terms(
            crate::route::text::truncate(query, 8192),
            &mut t,
            Some(&mut w),
        );
        for x in t {
            if !words.contains(&x) {
                words.push(x);
            }
        }
        let mut groups = vec![Vec::new(); words.len()];
        for (ti, (term, _)) in terms.iter().enumerate() {
            let mut any = false;
            for (wi, word) in words.iter().enumerate() {
                let on = term == word
                    || term.split(' ').count() == 2 && term.split(' ').any(|p| p == word)
                    || crate::route::synonyms::of(word).contains(term);
                if on {
                    groups[wi].push(ti);
                    any = true;
                }
            }
            if !any {
                groups.push(vec![ti]);
            }
        }
        Explained {
            terms,
            groups,
            contrib,
            named,
        }
    }
}
