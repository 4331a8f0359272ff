//! The first few of a ranking scored again by their descriptions and parameters alone
//! (BM25F over those fields, the description's notes included; name, title and server left
//! out), for the calibrated decision's `described_first`.

use super::{idf, length_norm, RouteIndex};
use crate::doc::{DESCRIPTION, NOTES, PARAMS};

impl RouteIndex {
    /// The score of each of `hits` (score, slot, doc) by its description and parameters
    /// alone, for the weighted query `terms` the ranking used.
    pub(super) fn described_scores(
        &self,
        terms: &[(String, f32)],
        hits: &[(f32, u32, u32)],
    ) -> Vec<f32> {
        let p = &self.params;
        let n = self.docs.max(1) as f32;
        let inv_avg = self.inv_avg_lens();
        let mut out = vec![0f32; hits.len()];
        for (term, qw) in terms {
            let Some(entry) = self.terms.get(term) else {
                continue;
            };
            let idf = idf(n, entry.df as f32);
            for (slot, list) in &entry.lists {
                for (score, &(_, s, doc)) in out.iter_mut().zip(hits) {
                    if s != *slot {
                        continue;
                    }
                    let Ok(i) = list.binary_search_by_key(&doc, |posting| posting.doc) else {
                        continue;
                    };
                    let Some(shard) = self.shards[s as usize].as_ref() else {
                        continue;
                    };
                    let lens = &shard.lens[doc as usize];
                    let tf: f32 = [DESCRIPTION, NOTES, PARAMS]
                        .into_iter()
                        .filter(|&f| list[i].tf[f] > 0)
                        .map(|f| {
                            p.weights[f] * f32::from(list[i].tf[f])
                                / length_norm(p, f, lens, &inv_avg)
                        })
                        .sum();
                    if tf > 0.0 {
                        *score += qw * idf * tf / (p.k1 + tf);
                    }
                }
            }
        }
        out
    }
}
