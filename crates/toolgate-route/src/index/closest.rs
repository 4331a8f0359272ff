//! The closest tools by the static vectors (the decision's `semantic_first`): a first pass
//! over every tool's first [`PREFIX`] dimensions, 8-bit, keeps a shortlist that the whole
//! vectors then rank.

use super::score::{self, Shortlist};
use super::RouteIndex;
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
        let cut: Vec<&str> = readings
            .iter()
            .map(|q| crate::text::truncate(q, crate::text::MAX_TASK_BYTES))
            .collect();
        let mut tasks: Vec<Reading> = v
            .embed_known_each(&cut)
            .into_iter()
            .enumerate()
            .filter_map(|(at, task)| {
                let (task, scale) = quantize(&task?);
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
            // The usual one or two readings read each row once (widened once for both).
            match tasks.as_mut_slice() {
                [one] if prefix == PREFIX => first_pass([one], slot as u32, shard),
                [a, b] if prefix == PREFIX => first_pass([a, b], slot as u32, shard),
                tasks => {
                    for (doc, row) in shard.prefixes.chunks_exact(prefix).enumerate() {
                        for r in tasks.iter_mut() {
                            let dot: i32 = (r.prefix.iter().zip(row))
                                .map(|(&x, &y)| i32::from(x) * i32::from(y))
                                .sum();
                            let rough = shard.scales[doc] * dot as f32;
                            r.shortlist.offer((rough, slot as u32, doc as u32));
                        }
                    }
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

/// The first pass over one shard's rows for `N` readings of a task (each with
/// [`PREFIX`] values): each row is read, and widened, once for all of them.
fn first_pass<const N: usize>(mut readings: [&mut Reading; N], slot: u32, shard: &super::Shard) {
    let mut tasks = [[0i16; PREFIX]; N];
    for (task, r) in tasks.iter_mut().zip(&readings) {
        task.copy_from_slice(&r.prefix);
    }
    for (doc, row) in shard.prefixes.chunks_exact(PREFIX).enumerate() {
        let Ok(row) = <&[i8; PREFIX]>::try_from(row) else {
            continue;
        };
        let dots = dot_prefix(&tasks, row);
        for (r, dot) in readings.iter_mut().zip(dots) {
            let rough = shard.scales[doc] * dot as f32;
            r.shortlist.offer((rough, slot, doc as u32));
        }
    }
}

/// [`dot_int`] of each of `N` tasks' first [`PREFIX`] values, held in 16 bits, and a
/// tool's, in 8 (the first pass of [`RouteIndex::closest_each`]), in eight lanes each. One
/// task: over a fixed length the compiler widens each eight of the row (SSE2 has no 8-bit
/// multiply) and multiplies them in one `pmaddwd`. Several: the row is widened once, then
/// [`dot_wide`] for each. Integer sums in any order are equal, so each result is
/// [`dot_int`]'s.
fn dot_prefix<const N: usize>(tasks: &[[i16; PREFIX]; N], row: &[i8; PREFIX]) -> [i32; N] {
    let mut out = [0i32; N];
    if let [task] = tasks.as_slice() {
        let mut lanes = [0i32; 8];
        for (x, y) in task.chunks_exact(8).zip(row.chunks_exact(8)) {
            for (lane, (&x, &y)) in lanes.iter_mut().zip(x.iter().zip(y)) {
                *lane += i32::from(x) * i32::from(y);
            }
        }
        out[0] = lanes.iter().sum();
        return out;
    }
    let wide: [i16; PREFIX] = row.map(i16::from);
    for (out, task) in out.iter_mut().zip(tasks) {
        *out = dot_wide(task, &wide);
    }
    out
}

/// [`dot_int`] of two 16-bit rows of [`PREFIX`] values, eight lanes at a time (one
/// `pmaddwd` each). Not inlined: inlined into the loop over two tasks, the compiler
/// (rustc 1.95) multiplied value by value instead (measured: three times slower).
#[inline(never)]
fn dot_wide(a: &[i16; PREFIX], b: &[i16; PREFIX]) -> i32 {
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
            let a2: [i16; PREFIX] = std::array::from_fn(|_| next());
            let wide = b.map(i16::from);
            assert_eq!(dot_prefix(&[a], &b), [dot_int(&a, &wide)]);
            // Two tasks on one row: each its own plain sum.
            assert_eq!(
                dot_prefix(&[a, a2], &b),
                [dot_int(&a, &wide), dot_int(&a2, &wide)]
            );
        }
        let (low, low8) = ([-128i16; PREFIX], [-128i8; PREFIX]);
        assert_eq!(
            dot_prefix(&[low, low], &low8),
            [128 * 128 * PREFIX as i32; 2]
        );
    }
}
