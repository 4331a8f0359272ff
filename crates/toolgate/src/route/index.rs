//! The BM25F index: per-server document shards over shared global term statistics.
//!
//! Each server's tools live in their own `Shard` (postings, field lengths, exact-name map),
//! so an upstream's `tools/list_changed` replaces one shard and adjusts the global document
//! frequencies and length sums by that shard's contribution alone. Scores are computed at
//! query time from raw per-field term frequencies, so nothing else needs recomputing.

use super::text::{bigram, Analyzer};
use crate::catalog::{Catalog, ToolRecord};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The fields of a tool document, in `Bm25fParams` array order.
pub const N_FIELDS: usize = 5;
/// Field positions.
pub const NAME: usize = 0;
pub const TITLE: usize = 1;
pub const DESCRIPTION: usize = 2;
pub const PARAMS: usize = 3;
pub const SERVER: usize = 4;

/// Ranking parameters. Defaults were tuned on the held-out tuning split (query index
/// mod 5 == 0) of MetaTool and LiveMCPBench; see the crate README's evaluation section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Bm25fParams {
    /// Field weights: name, title, description, parameters, server.
    pub weights: [f32; N_FIELDS],
    /// Length normalisation per field (0 = none, 1 = full).
    pub b: [f32; N_FIELDS],
    /// Term-frequency saturation, applied once to the weighted field sum (BM25F).
    pub k1: f32,
    /// Weight of an adjacent-word phrase match relative to a single word.
    pub bigram_weight: f32,
}

impl Default for Bm25fParams {
    fn default() -> Self {
        Self {
            weights: [3.0, 2.0, 1.0, 0.4, 1.0],
            b: [0.3, 0.3, 0.5, 0.5, 0.3],
            k1: 1.2,
            bigram_weight: 0.5,
        }
    }
}

/// One document's term frequencies per field (saturating; fields are short).
#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; N_FIELDS],
}

/// One server's tools and their postings.
#[derive(Debug, Default)]
struct Shard {
    /// The server's name as configured (the filter key).
    server: String,
    /// Documents in catalog order; a posting's `doc` indexes this.
    tools: Vec<Arc<ToolRecord>>,
    /// Length in terms of each field of each document.
    lens: Vec<[u16; N_FIELDS]>,
    /// Term -> documents containing it.
    postings: HashMap<String, Vec<Posting>>,
    /// Lowercased exposed name, `server/name` and bare name -> document.
    names: HashMap<String, Vec<u32>>,
}

/// The routing index for one catalog snapshot. Built off the request path.
#[derive(Debug)]
pub struct RouteIndex {
    params: Bm25fParams,
    analyzer: Analyzer,
    /// Sorted by server name, so rankings and ties are deterministic.
    shards: Vec<Shard>,
    /// Term -> number of documents containing it, over all shards.
    df: HashMap<String, u32>,
    /// Number of documents over all shards.
    docs: u64,
    /// Sum of each field's length over all documents (for the average lengths).
    len_sum: [u64; N_FIELDS],
}

/// One hit: shard, document, score.
type Hit = (u32, u32, f32);

impl RouteIndex {
    /// Indexes every tool of `catalog` with default parameters.
    pub fn build(catalog: &Catalog) -> Self {
        Self::with_params(catalog, Bm25fParams::default())
    }

    /// Indexes every tool of `catalog` with `params`.
    pub fn with_params(catalog: &Catalog, params: Bm25fParams) -> Self {
        let mut index = Self {
            params,
            analyzer: Analyzer::new(),
            shards: Vec::new(),
            df: HashMap::new(),
            docs: 0,
            len_sum: [0; N_FIELDS],
        };
        // The catalog is sorted by (server, name): each server's tools are contiguous.
        let tools = catalog.tools();
        let mut start = 0;
        while start < tools.len() {
            let server = &tools[start].id.server;
            let end = start
                + tools[start..]
                    .iter()
                    .take_while(|t| &t.id.server == server)
                    .count();
            let shard = index.make_shard(server, tools[start..end].to_vec());
            index.add_stats(&shard, 1);
            index.shards.push(shard);
            start = end;
        }
        index
    }

    /// Replaces one server's tools (after its `tools/list_changed`), leaving every other
    /// shard untouched; an empty `tools` removes the server.
    pub fn replace_server(&mut self, server: &str, tools: Vec<Arc<ToolRecord>>) {
        let new = (!tools.is_empty()).then(|| self.make_shard(server, tools));
        match self
            .shards
            .binary_search_by(|s| s.server.as_str().cmp(server))
        {
            Ok(i) => {
                let old = std::mem::take(&mut self.shards[i]);
                self.add_stats(&old, -1);
                match new {
                    Some(shard) => {
                        self.add_stats(&shard, 1);
                        self.shards[i] = shard;
                    }
                    None => {
                        self.shards.remove(i);
                    }
                }
            }
            Err(i) => {
                if let Some(shard) = new {
                    self.add_stats(&shard, 1);
                    self.shards.insert(i, shard);
                }
            }
        }
    }

    pub fn params(&self) -> &Bm25fParams {
        &self.params
    }

    pub fn len(&self) -> usize {
        self.docs as usize
    }

    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    fn make_shard(&self, server: &str, tools: Vec<Arc<ToolRecord>>) -> Shard {
        let mut shard = Shard {
            server: server.to_string(),
            ..Shard::default()
        };
        let mut terms = Vec::new();
        let mut words = Vec::new();
        for (doc, tool) in tools.iter().enumerate() {
            let doc = doc as u32;
            let mut tf: HashMap<String, [u16; N_FIELDS]> = HashMap::new();
            let mut lens = [0u16; N_FIELDS];
            let mut texts: [Vec<&str>; N_FIELDS] = Default::default();
            texts[NAME].push(&tool.id.name);
            texts[TITLE].extend(tool.title());
            texts[DESCRIPTION].push(tool.description());
            schema_texts(tool.input_schema(), 0, &mut texts[PARAMS]);
            texts[SERVER].push(&tool.id.server);
            for (field, field_texts) in texts.iter().enumerate() {
                for text in field_texts {
                    terms.clear();
                    words.clear();
                    self.analyzer.terms(text, &mut terms, Some(&mut words));
                    let phrases = words.windows(2).map(|w| bigram(&w[0], &w[1]));
                    for term in terms.drain(..).chain(phrases) {
                        let slot = &mut tf.entry(term).or_default()[field];
                        *slot = slot.saturating_add(1);
                        lens[field] = lens[field].saturating_add(1);
                    }
                }
            }
            for (term, tf) in tf {
                shard
                    .postings
                    .entry(term)
                    .or_default()
                    .push(Posting { doc, tf });
            }
            shard.lens.push(lens);
            let keys = [
                tool.exposed.to_lowercase(),
                tool.id.to_string().to_lowercase(),
                tool.id.name.to_lowercase(),
            ];
            for key in keys {
                let docs = shard.names.entry(key).or_default();
                if !docs.contains(&doc) {
                    docs.push(doc);
                }
            }
        }
        for list in shard.postings.values_mut() {
            list.sort_by_key(|p| p.doc);
        }
        shard.tools = tools;
        shard
    }

    /// Adds (`sign` = 1) or removes (-1) a shard's contribution to the global statistics.
    fn add_stats(&mut self, shard: &Shard, sign: i64) {
        for (term, list) in &shard.postings {
            let n = list.len() as i64 * sign;
            let df = self.df.entry(term.clone()).or_default();
            *df = (*df as i64 + n).max(0) as u32;
            if *df == 0 {
                self.df.remove(term);
            }
        }
        self.docs = (self.docs as i64 + shard.tools.len() as i64 * sign).max(0) as u64;
        for lens in &shard.lens {
            for f in 0..N_FIELDS {
                self.len_sum[f] = (self.len_sum[f] as i64 + lens[f] as i64 * sign).max(0) as u64;
            }
        }
    }

    /// Tools whose name matches `name` exactly (case-insensitive; surrounding quotes and
    /// backticks ignored) as the exposed name, `server/name` or a bare upstream name.
    pub fn exact(&self, name: &str, server: Option<&str>) -> Vec<Arc<ToolRecord>> {
        let key = name
            .trim()
            .trim_matches(|c| matches!(c, '`' | '"' | '\''))
            .trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Vec::new();
        }
        let key = key.to_lowercase();
        let mut out = Vec::new();
        for shard in self.shards_for(server) {
            for &doc in shard.names.get(&key).into_iter().flatten() {
                out.push(shard.tools[doc as usize].clone());
            }
        }
        out
    }

    fn shards_for<'a>(&'a self, server: Option<&'a str>) -> impl Iterator<Item = &'a Shard> + 'a {
        self.shards
            .iter()
            .filter(move |s| server.is_none_or(|f| s.server.eq_ignore_ascii_case(f)))
    }

    /// The `k` best tools for `query` by BM25F, best first, only from `server` when given.
    pub fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)> {
        let hits = self.score(query, server, k);
        hits.into_iter()
            .map(|(s, d, score)| (self.shards[s as usize].tools[d as usize].clone(), score))
            .collect()
    }

    /// The most any tool could score for `query`: each known term's weight times its idf
    /// (BM25F's saturation keeps every term's share below that). The decision uses it to
    /// tell a tool that explains the task from one that merely matches a word of it.
    pub fn ceiling(&self, query: &str) -> f32 {
        let n = self.docs.max(1) as f32;
        self.query_terms(query)
            .iter()
            .filter_map(|(t, qw)| {
                let df = *self.df.get(t.as_str())? as f32;
                Some(qw * (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            })
            .sum()
    }

    fn query_terms(&self, query: &str) -> Vec<(String, f32)> {
        let (mut terms, mut words) = (Vec::new(), Vec::new());
        self.analyzer.terms(query, &mut terms, Some(&mut words));
        let mut weighted: Vec<(String, f32)> = Vec::with_capacity(terms.len() * 2);
        let phrases = words
            .windows(2)
            .map(|w| (bigram(&w[0], &w[1]), self.params.bigram_weight));
        for (term, w) in terms.into_iter().map(|t| (t, 1.0)).chain(phrases) {
            match weighted.iter_mut().find(|(t, _)| *t == term) {
                Some((_, total)) => *total += w,
                None => weighted.push((term, w)),
            }
        }
        weighted
    }

    fn score(&self, query: &str, server: Option<&str>, k: usize) -> Vec<Hit> {
        let p = &self.params;
        let n = self.docs.max(1) as f32;
        // Per-field 1/avg length, so the inner loop multiplies instead of divides.
        let mut inv_avg = [0f32; N_FIELDS];
        for f in 0..N_FIELDS {
            let avg = self.len_sum[f] as f32 / n;
            inv_avg[f] = if avg > 0.0 { 1.0 / avg } else { 0.0 };
        }
        let terms: Vec<(&str, f32, f32)> = self
            .query_terms(query)
            .iter()
            .filter_map(|(t, qw)| {
                let df = *self.df.get(t.as_str())? as f32;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                // The key lives in self.df; borrow it from there, not from the temporary.
                let (key, _) = self.df.get_key_value(t.as_str())?;
                Some((key.as_str(), idf, *qw))
            })
            .collect();
        let mut hits: Vec<Hit> = Vec::new();
        let mut acc: Vec<f32> = Vec::new();
        for (si, shard) in self.shards.iter().enumerate() {
            if server.is_some_and(|f| !shard.server.eq_ignore_ascii_case(f)) {
                continue;
            }
            acc.clear();
            acc.resize(shard.tools.len(), 0.0);
            let mut any = false;
            for &(term, idf, qw) in &terms {
                let Some(list) = shard.postings.get(term) else {
                    continue;
                };
                any = true;
                for posting in list {
                    let lens = &shard.lens[posting.doc as usize];
                    let mut tf = 0.0;
                    for f in 0..N_FIELDS {
                        if posting.tf[f] > 0 {
                            let norm = 1.0 - p.b[f] + p.b[f] * lens[f] as f32 * inv_avg[f];
                            tf += p.weights[f] * posting.tf[f] as f32 / norm.max(1e-3);
                        }
                    }
                    acc[posting.doc as usize] += qw * idf * tf / (p.k1 + tf);
                }
            }
            if any {
                hits.extend(
                    acc.iter()
                        .enumerate()
                        .filter(|(_, &s)| s > 0.0)
                        .map(|(d, &s)| (si as u32, d as u32, s)),
                );
            }
        }
        top_k(hits, k)
    }
}

/// The `k` best hits, best first; ties go to the earlier (server, name).
fn top_k(mut hits: Vec<Hit>, k: usize) -> Vec<Hit> {
    let order = |a: &Hit, b: &Hit| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1));
    if hits.len() > k && k > 0 {
        hits.select_nth_unstable_by(k - 1, order);
    }
    hits.truncate(k);
    hits.sort_unstable_by(order);
    hits
}

/// Collects property names, titles, descriptions and string enum values of an input
/// schema, nested objects and arrays included (depth-limited against odd schemas).
fn schema_texts<'a>(schema: &'a Value, depth: usize, out: &mut Vec<&'a str>) {
    let Value::Object(map) = schema else {
        return;
    };
    if depth > 8 {
        return;
    }
    for key in ["title", "description"] {
        if depth > 0 {
            out.extend(map.get(key).and_then(Value::as_str));
        }
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        out.extend(values.iter().filter_map(Value::as_str));
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, sub) in props {
            out.push(name);
            schema_texts(sub, depth + 1, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get(key) {
            schema_texts(sub, depth + 1, out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(subs)) = map.get(key) {
            for sub in subs {
                schema_texts(sub, depth + 1, out);
            }
        }
    }
}
