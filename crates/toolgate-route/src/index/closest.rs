//! The closest tools by the static vectors (the decision's `semantic_first`): a first pass
//! over every tool's first [`PREFIX`] dimensions, 8-bit, keeps a shortlist that the whole
//! vectors then rank.

use super::{score, RouteIndex};
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;

impl RouteIndex {
    /// The `k` tools closest in meaning to `query` by the static vectors (cosine), best
    /// first, only from `server` when given; empty without vectors or when they know too
    /// little of the task (`StaticVectors::embed_known`).
    pub fn closest(
        &self,
        query: &str,
        server: Option<&str>,
        k: usize,
    ) -> Vec<(Arc<ToolRecord>, f32)> {
        self.closest_each(&[query], server, k)
            .pop()
            .unwrap_or_default()
    }

    /// [`Self::closest`] for several readings of one task, in one pass over the tools:
    /// one list per reading, in their order.
    pub fn closest_each(
        &self,
        readings: &[&str],
        server: Option<&str>,
        k: usize,
    ) -> Vec<Vec<(Arc<ToolRecord>, f32)>> {
        let mut lists = vec![Vec::new(); readings.len()];
        let Some(v) = &self.vectors else {
            return lists;
        };
        let only = match server {
            Some(s) => match self.slot_of(s) {
                Some(slot) => Some(slot),
                None => return lists,
            },
            None => None,
        };
        let dim = v.dim();
        // Two passes: the first PREFIX dimensions (PCA's largest) pick SHORTLIST
        // candidates, the whole vectors rank them; a quarter of the work of one pass.
        let prefix = PREFIX.min(dim);
        let mut tasks: Vec<Reading> = readings
            .iter()
            .enumerate()
            .filter_map(|(at, query)| {
                let task =
                    v.embed_known(crate::text::truncate(query, crate::text::MAX_TASK_BYTES))?;
                let (task, scale) = quantize(&task);
                let prefix = task[..prefix].iter().map(|&x| i16::from(x)).collect();
                let shortlist = Shortlist::new(k.max(SHORTLIST));
                Some(Reading {
                    at,
                    task,
                    scale,
                    prefix,
                    shortlist,
                })
            })
            .collect();
        if tasks.is_empty() {
            return lists;
        }
        for (slot, shard) in self.shards.iter().enumerate() {
            let Some(shard) = shard else { continue };
            if only.is_some_and(|o| o != slot as u32) {
                continue;
            }
            for (doc, row) in shard.prefixes.chunks_exact(prefix).enumerate() {
                let fixed: Option<&[i8; PREFIX]> = row.try_into().ok();
                for r in &mut tasks {
                    let dot = match (fixed, r.prefix.as_slice().try_into().ok()) {
                        (Some(row), Some(task)) => dot_prefix(task, row),
                        _ => r
                            .prefix
                            .iter()
                            .zip(row)
                            .map(|(&x, &y)| i32::from(x) * i32::from(y))
                            .sum(),
                    };
                    let rough = shard.scales[doc] * dot as f32;
                    r.shortlist.offer((rough, slot as u32, doc as u32));
                }
            }
        }
        for r in tasks {
            let mut hits = r.shortlist.into_hits();
            for (score, slot, doc) in &mut hits {
                if let Some(shard) = self.shards[*slot as usize].as_ref() {
                    let at = *doc as usize * dim;
                    let row = &shard.vectors[at..at + dim];
                    *score = r.scale * shard.scales[*doc as usize] * dot_int(&r.task, row) as f32;
                }
            }
            score::top_k(&mut hits, k);
            lists[r.at] = hits
                .into_iter()
                .filter_map(|(s, slot, doc)| {
                    let shard = self.shards[slot as usize].as_ref()?;
                    Some((shard.tools[doc as usize].clone(), s))
                })
                .collect();
        }
        lists
    }
}

/// Dimensions of the first pass of [`RouteIndex::closest`], and how many tools it keeps.
pub(super) const PREFIX: usize = 64;
const SHORTLIST: usize = 32;

/// One reading of a task in [`RouteIndex::closest_each`]: its place among the readings, its
/// vector as 8-bit values with their scale, its first dimensions held in 16 bits for the
/// first pass, and that pass's shortlist.
struct Reading {
    at: usize,
    task: Vec<i8>,
    scale: f32,
    prefix: Vec<i16>,
    shortlist: Shortlist,
}

/// The best `keep` hits of the first pass of [`RouteIndex::closest`], without a list of
/// every tool: hits below the floor are dropped, and at twice `keep` the list is cut back
/// to the best `keep` ([`score::top_k`]), whose lowest becomes the floor.
struct Shortlist {
    keep: usize,
    hits: Vec<(f32, u32, u32)>,
    floor: f32,
}

impl Shortlist {
    fn new(keep: usize) -> Self {
        Self {
            keep,
            hits: Vec::with_capacity(2 * keep),
            floor: f32::NEG_INFINITY,
        }
    }

    fn offer(&mut self, hit: (f32, u32, u32)) {
        if hit.0 <= self.floor {
            return;
        }
        self.hits.push(hit);
        if self.hits.len() >= 2 * self.keep {
            score::top_k(&mut self.hits, self.keep);
            self.floor = self.hits.last().map_or(f32::NEG_INFINITY, |h| h.0);
        }
    }

    /// The best `keep`, best first.
    fn into_hits(mut self) -> Vec<(f32, u32, u32)> {
        score::top_k(&mut self.hits, self.keep);
        self.hits
    }
}

/// A vector as 8-bit values and the scale that gives them back (`x ~ scale * q`).
pub(super) fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    (v.iter().map(|x| (x / scale).round() as i8).collect(), scale)
}

/// `a . b` of two integer vectors (8-bit values, held in 8 or 16 bits: SSE2 multiplies
/// 16-bit ones eight at a time); an integer sum, which the compiler vectorises (a float sum
/// it may not reorder).
fn dot_int<T: Copy + Into<i32>>(a: &[T], b: &[T]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x.into() * y.into()).sum()
}

/// [`dot_int`] of a task's first [`PREFIX`] values, held in 16 bits, and a tool's, in 8
/// (the first pass of [`RouteIndex::closest_each`]), in eight lanes: over a fixed length the
/// compiler widens each eight of the row (SSE2 has no 8-bit multiply) and multiplies them in
/// one `pmaddwd`. Integer sums in any order are equal, so the result is [`dot_int`]'s.
fn dot_prefix(a: &[i16; PREFIX], b: &[i8; PREFIX]) -> i32 {
    let mut lanes = [0i32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for (lane, (&x, &y)) in lanes.iter_mut().zip(x.iter().zip(y)) {
            *lane += i32::from(x) * i32::from(y);
        }
    }
    lanes.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_pass_dot_product_is_the_plain_sum() {
        // 8-bit values widened, as the first pass holds them, extremes included.
        let mut state = 0x2545_f491_u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 256) as i16 - 128
        };
        for _ in 0..200 {
            let a: [i16; PREFIX] = std::array::from_fn(|_| next());
            let b: [i8; PREFIX] = std::array::from_fn(|_| next() as i8);
            let wide = b.map(i16::from);
            assert_eq!(dot_prefix(&a, &b), dot_int(&a, &wide));
        }
        let (low, low8) = ([-128i16; PREFIX], [-128i8; PREFIX]);
        assert_eq!(dot_prefix(&low, &low8), 128 * 128 * PREFIX as i32);
    }
}
