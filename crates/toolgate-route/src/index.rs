//! The BM25F index: one global term dictionary whose postings are split per server.
//!
//! A query looks each term up once, then walks that term's postings server by server, so
//! the cost grows with the matching postings, not with the number of servers. Each
//! server's tools live in a slot of their own, and every posting list is tagged with its
//! slot: an upstream's `tools/list_changed` removes that slot's lists from the terms it
//! used and adds the new ones, adjusting document frequencies and length sums by that
//! server's contribution alone. Scores are computed at query time from raw per-field term
//! frequencies, so nothing else needs recomputing.
//!
//! Here: the index, its per-server update and exact names; the closest tools by the static
//! vectors (the decision's `semantic_first`) in `closest.rs`; ranking (a task's weighted terms,
//! the BM25F pass, the best `k`) in `score.rs`; the description-only scores in `described.rs`.

use super::doc::{analyze_tool, NOTES, N_FIELDS};
use super::examples::RouteExamples;
use super::static_vectors::StaticVectors;
use super::text::{Analyzer, Map};
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use toolgate_core::catalog::{Catalog, ToolRecord};

mod closest;
mod described;
mod score;

use closest::{quantize, PREFIX};

/// Ranking parameters. Chosen on the tuning split (query index mod 5 == 0) of MetaTool
/// and LiveMCPBench; see the README's evaluation section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Bm25fParams {
    /// Field weights: name, title, description, parameters, server, example tasks, and
    /// the description's notes (its instructions to the model and examples).
    pub weights: [f32; N_FIELDS],
    /// Length normalisation per field (0 = none, 1 = full); the notes' should be the
    /// description's (their length is the description's).
    pub b: [f32; N_FIELDS],
    /// Term-frequency saturation, applied once to the weighted field sum (BM25F).
    pub k1: f32,
    /// Weight of an adjacent-word phrase match relative to a single word.
    pub bigram_weight: f32,
    /// Weight of the server's evidence (its tools' text taken together, scored with
    /// BM25 against the other servers) added to each matching tool of that server.
    /// Multi-step tasks usually stay on one or two servers; with one server it is zero.
    pub server_weight: f32,
    /// Weight of each clause of a multi-step task ("read X, plot it and save it") ranked
    /// on its own and fused with the whole task, so each step's tool can surface.
    pub clause_weight: f32,
    /// Weight of each synonym of a task word (`synonyms`) relative to a word.
    pub synonym_weight: f32,
}

impl Default for Bm25fParams {
    fn default() -> Self {
        Self {
            weights: [3.0, 2.0, 1.0, 0.4, 1.0, EXAMPLES_WEIGHT, NOTES_WEIGHT],
            b: [0.3, 0.3, 0.5, 0.5, 0.3, EXAMPLES_B, 0.5],
            k1: 1.2,
            bigram_weight: 0.5,
            server_weight: 0.0,
            clause_weight: 0.0,
            synonym_weight: SYNONYM_WEIGHT,
        }
    }
}

/// Weight of a task word's synonym; chosen on the tuning splits (`docs/routing.md`).
pub(crate) const SYNONYM_WEIGHT: f32 = 0.5;
/// Weight of the example-tasks field (see `examples`); chosen on a split of
/// MetaTool's tuning queries, `docs/routing.md` has the sweep.
pub(crate) const EXAMPLES_WEIGHT: f32 = 0.5;
/// Length normalisation of the example-tasks field.
pub(crate) const EXAMPLES_B: f32 = 0.5;
/// Weight of a description's notes (instructions to the model, examples) against the
/// description's 1.0: the lowest that loses nothing on the labelled sets (the sweep is in
/// `docs/routing.md`, "A description's notes").
pub(crate) const NOTES_WEIGHT: f32 = 0.3;

/// One document's term frequencies per field.
#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; N_FIELDS],
}

/// A term's postings, one list per server slot that has it.
#[derive(Debug, Default, Clone)]
struct TermEntry {
    /// Documents containing the term, over all servers.
    df: u32,
    /// (slot, that server's documents containing the term, sorted by doc).
    lists: Vec<(u32, Vec<Posting>)>,
    /// Each posting's field-weighted, length-normalised term frequency (BM25F's `tf`
    /// before saturation), list by list: it depends only on the index, so it is worked
    /// out the first time a task has the term and kept until a server is re-indexed
    /// (which changes the average lengths). See `score.rs`.
    norms: OnceLock<Arc<[Box<[f32]>]>>,
}

/// One server's tools.
#[derive(Debug, Clone)]
struct Shard {
    /// Documents in catalog order; a posting's `doc` indexes this.
    tools: Vec<Arc<ToolRecord>>,
    /// Length in terms of each field of each document.
    lens: Vec<[u16; N_FIELDS]>,
    /// Every term the shard indexed, to take its lists out again on replacement.
    terms: Vec<String>,
    /// Every exact-name key the shard registered.
    names: Vec<String>,
    /// Length of all the shard's documents together (the server as one document).
    total_len: u64,
    /// Where the shard's documents start in the query's score accumulator.
    offset: u32,
    /// Each document's unit vector from the static vectors, 8-bit (`dim` values per
    /// document, empty without vectors) with one scale each; shared between copies.
    vectors: Arc<[i8]>,
    /// The first [`PREFIX`] values of each row again, side by side: the first pass of
    /// [`RouteIndex::closest`] reads only these, 64 bytes a tool (640 KB for 10,000 tools,
    /// which stays in a core's 1 MB L2 cache; at 16 bits it did not).
    prefixes: Arc<[i8]>,
    scales: Arc<[f32]>,
    /// Each document's terms of its name, title and description (`calibrate::tool_terms`),
    /// analysed the first time the decision asks ([`RouteIndex::text_terms`]); shared
    /// between copies, new with the shard.
    texts: Arc<[OnceLock<Arc<HashSet<String>>>]>,
}

/// The routing index for one catalog snapshot. Built off the request path; cloneable so
/// a gateway holding it in an `Arc` can `Arc::make_mut` it to re-index one server.
#[derive(Debug, Clone)]
pub struct RouteIndex {
    params: Bm25fParams,
    /// Example tasks per tool, indexed with each tool (shared, never copied per shard).
    examples: Arc<RouteExamples>,
    analyzer: Analyzer,
    /// Server slots; a removed server leaves `None` (slots in lists stay valid).
    shards: Vec<Option<Shard>>,
    /// Server name -> slot.
    slots: Map<String, u32>,
    /// Term -> its statistics and postings.
    terms: Map<String, TermEntry>,
    /// Lowercased exposed name, `server/name` and bare name -> (slot, doc).
    names: Map<String, Vec<(u32, u32)>>,
    /// Number of documents over all shards (also the accumulator's length).
    docs: u32,
    /// Number of servers with tools.
    servers: u32,
    /// Sum of each field's length over all documents (for the average lengths).
    len_sum: [u64; N_FIELDS],
    /// Static token vectors for the decision's `semantic_first` ([`Self::closest`]).
    vectors: Option<Arc<StaticVectors>>,
}

impl RouteIndex {
    /// Indexes every tool of `catalog` with default parameters.
    pub fn build(catalog: &Catalog) -> Self {
        Self::with_params(catalog, Bm25fParams::default())
    }

    /// Indexes every tool of `catalog` with `params`.
    pub fn with_params(catalog: &Catalog, params: Bm25fParams) -> Self {
        Self::with_examples(catalog, params, Arc::default())
    }

    /// Indexes every tool of `catalog` with `params` and each tool's example tasks; a
    /// later [`Self::replace_server`] indexes the new tools with theirs too. With example
    /// tasks the decision is the softmax's ([`super::Retriever::calibrated`]), which reads
    /// no vectors, so the index keeps none.
    pub fn with_examples(
        catalog: &Catalog,
        params: Bm25fParams,
        examples: Arc<RouteExamples>,
    ) -> Self {
        let vectors = examples.is_empty().then(StaticVectors::builtin);
        Self::with_vectors(catalog, params, examples, vectors)
    }

    /// [`Self::with_examples`] with other static vectors, or none (then the decision's
    /// `semantic_first` is never set).
    pub fn with_vectors(
        catalog: &Catalog,
        params: Bm25fParams,
        examples: Arc<RouteExamples>,
        vectors: Option<Arc<StaticVectors>>,
    ) -> Self {
        let mut index = Self {
            params,
            examples,
            analyzer: Analyzer::new(),
            shards: Vec::new(),
            slots: Map::default(),
            terms: Map::default(),
            names: Map::default(),
            docs: 0,
            servers: 0,
            len_sum: [0; N_FIELDS],
            vectors,
        };
        // The catalog is sorted by (server, name): each server's tools are contiguous,
        // and slots are handed out in server order (the tie-break order).
        let tools = catalog.tools();
        let mut start = 0;
        while start < tools.len() {
            let server = &tools[start].id.server;
            let n = tools[start..]
                .iter()
                .take_while(|t| &t.id.server == server)
                .count();
            index.replace_server(server, tools[start..start + n].to_vec());
            start += n;
        }
        index
    }

    /// Replaces one server's tools (after its `tools/list_changed`), leaving every other
    /// server's postings untouched; an empty `tools` removes the server.
    pub fn replace_server(&mut self, server: &str, tools: Vec<Arc<ToolRecord>>) {
        let slot = match self.slots.get(server) {
            Some(&slot) => {
                self.remove_slot(slot);
                slot
            }
            None if tools.is_empty() => return,
            None => {
                self.shards.push(None);
                (self.shards.len() - 1) as u32
            }
        };
        if tools.is_empty() {
            self.slots.remove(server);
        } else {
            self.slots.insert(server.to_string(), slot);
            self.insert_slot(slot, tools);
        }
        // The average lengths changed: every kept frequency is stale; O(terms).
        for entry in self.terms.values_mut() {
            entry.norms = OnceLock::new();
        }
        // Offsets into the accumulator follow slot order; O(servers).
        let mut offset = 0;
        for shard in self.shards.iter_mut().flatten() {
            shard.offset = offset;
            offset += shard.tools.len() as u32;
        }
    }

    fn remove_slot(&mut self, slot: u32) {
        let Some(shard) = self.shards[slot as usize].take() else {
            return;
        };
        for term in &shard.terms {
            if let Some(entry) = self.terms.get_mut(term) {
                if let Some(i) = entry.lists.iter().position(|(s, _)| *s == slot) {
                    entry.df -= entry.lists[i].1.len() as u32;
                    entry.lists.remove(i);
                }
                if entry.lists.is_empty() {
                    self.terms.remove(term);
                }
            }
        }
        for key in &shard.names {
            if let Some(docs) = self.names.get_mut(key) {
                docs.retain(|(s, _)| *s != slot);
                if docs.is_empty() {
                    self.names.remove(key);
                }
            }
        }
        self.docs -= shard.tools.len() as u32;
        self.servers -= 1;
        for lens in &shard.lens {
            for (sum, &len) in self.len_sum.iter_mut().zip(lens) {
                *sum -= u64::from(len);
            }
        }
    }

    fn insert_slot(&mut self, slot: u32, tools: Vec<Arc<ToolRecord>>) {
        let mut postings: Map<String, Vec<Posting>> = Map::default();
        let mut lens_all = Vec::with_capacity(tools.len());
        let mut names = Vec::new();
        let mut total_len = 0;
        for (doc, tool) in tools.iter().enumerate() {
            let doc = doc as u32;
            let examples = self.examples.of(&tool.id.server, &tool.id.name);
            let analysed = analyze_tool(&self.analyzer, tool, examples);
            for (term, tf) in analysed.tf {
                postings.entry(term).or_default().push(Posting { doc, tf });
            }
            for f in 0..N_FIELDS {
                self.len_sum[f] += u64::from(analysed.lens[f]);
                // The notes' length is the description's, counted once.
                if f != NOTES {
                    total_len += u64::from(analysed.lens[f]);
                }
            }
            lens_all.push(analysed.lens);
            let keys = [
                tool.exposed.to_lowercase(),
                tool.id.to_string().to_lowercase(),
                tool.id.name.to_lowercase(),
            ];
            for key in keys {
                let docs = self.names.entry(key.clone()).or_default();
                if !docs.contains(&(slot, doc)) {
                    docs.push((slot, doc));
                    names.push(key);
                }
            }
        }
        let mut terms = Vec::with_capacity(postings.len());
        for (term, mut list) in postings {
            list.sort_by_key(|p| p.doc);
            let entry = self.terms.entry(term.clone()).or_default();
            entry.df += list.len() as u32;
            entry.lists.push((slot, list));
            terms.push(term);
        }
        self.docs += tools.len() as u32;
        self.servers += 1;
        let (mut vectors, mut prefixes, mut scales) = (Vec::new(), Vec::new(), Vec::new());
        if let Some(v) = &self.vectors {
            for tool in &tools {
                let (row, scale) = quantize(&v.embed(&super::dense::tool_text(tool)));
                prefixes.extend(row.iter().take(PREFIX));
                vectors.extend(row);
                scales.push(scale);
            }
        }
        let texts = tools.iter().map(|_| OnceLock::new()).collect();
        self.shards[slot as usize] = Some(Shard {
            texts,
            tools,
            lens: lens_all,
            terms,
            names,
            total_len,
            offset: 0,
            vectors: vectors.into(),
            prefixes: prefixes.into(),
            scales: scales.into(),
        });
    }

    /// The BM25F parameters the index ranks with.
    pub fn params(&self) -> &Bm25fParams {
        &self.params
    }

    /// The example tasks the index was built with.
    pub fn examples(&self) -> &RouteExamples {
        &self.examples
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.docs as usize
    }

    /// True when no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    /// The slot of `server` (matched case-insensitively), if it has tools.
    fn slot_of(&self, server: &str) -> Option<u32> {
        self.slots.get(server).copied().or_else(|| {
            self.slots
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(server))
                .map(|(_, &slot)| slot)
        })
    }

    /// Tools whose name matches `name` exactly (case-insensitive; surrounding quotes and
    /// backticks ignored) as the exposed name, `server/name` or a bare upstream name.
    pub fn exact(&self, name: &str, server: Option<&str>) -> Vec<Arc<ToolRecord>> {
        let key = name
            .trim()
            .trim_matches(|c| matches!(c, '`' | '"' | '\''))
            .trim();
        // Server names may contain spaces ("MCP Server Chart/generate_bar_chart"), so a
        // key with spaces is looked up too; prose simply finds nothing.
        if key.is_empty() || key.len() > MAX_NAME_KEY {
            return Vec::new();
        }
        let only = server.map(|s| self.slot_of(s));
        let Some(hits) = self.names.get(&key.to_lowercase()) else {
            return Vec::new();
        };
        let mut out: Vec<Arc<ToolRecord>> = hits
            .iter()
            .filter(|(slot, _)| only.is_none_or(|o| o == Some(*slot)))
            .filter_map(|&(slot, doc)| {
                let shard = self.shards[slot as usize].as_ref()?;
                Some(shard.tools[doc as usize].clone())
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// The analysed terms of `tool`'s name, title and description
    /// (`calibrate::tool_terms`), kept from the first time they are asked for; `None` for a
    /// record that is not this index's own (the same tool of another snapshot).
    pub fn text_terms(&self, tool: &ToolRecord) -> Option<Arc<HashSet<String>>> {
        let slot = *self.slots.get(&tool.id.server)?;
        let shard = self.shards[slot as usize].as_ref()?;
        let key = tool.id.to_string().to_lowercase();
        let &(_, doc) =
            self.names.get(&key)?.iter().find(|&&(s, d)| {
                s == slot && std::ptr::eq(shard.tools[d as usize].as_ref(), tool)
            })?;
        let text = shard.texts[doc as usize]
            .get_or_init(|| Arc::new(super::calibrate::tool_terms(&self.analyzer, tool)));
        Some(text.clone())
    }

    /// The most any tool could score for `query` from its own text: each known term's
    /// weight times its idf (BM25F's saturation keeps every term's share below that).
    /// The decision uses it to tell a tool that explains the task from one that merely
    /// matches a word of it.
    pub fn ceiling(&self, query: &str) -> f32 {
        self.ceiling_of(&self.query_terms(query, false))
    }

    /// [`Self::ceiling`] of a task's terms without synonyms.
    fn ceiling_of(&self, terms: &[(String, f32)]) -> f32 {
        let n = self.docs.max(1) as f32;
        terms
            .iter()
            .filter_map(|(t, qw)| {
                let df = self.terms.get(t.as_str())?.df as f32;
                Some(qw * idf(n, df))
            })
            .sum()
    }
}

/// BM25F's length normalisation of field `f` for a document of `lens`.
fn length_norm(
    p: &Bm25fParams,
    f: usize,
    lens: &[u16; N_FIELDS],
    inv_avg: &[f32; N_FIELDS],
) -> f32 {
    (1.0 - p.b[f] + p.b[f] * f32::from(lens[f]) * inv_avg[f]).max(1e-3)
}

/// Longer strings cannot be a `server/name` key (names are at most 64 characters; a
/// server name is configuration).
const MAX_NAME_KEY: usize = 512;

/// BM25's idf, kept positive for terms in more than half the documents.
fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::catalog::parse_catalog;

    #[test]
    fn kept_text_terms_are_the_fresh_analysis() {
        let catalog = Catalog::from_entries(
            parse_catalog(
                r#"[{"server": "git", "tool": {"name": "git_log", "title": "Commit log",
                      "description": "Shows the commit logs of a repository."}},
                    {"server": "git", "tool": {"name": "git_status", "description": "Working tree status"}},
                    {"server": "web", "tool": {"name": "git_log", "description": "Other"}}]"#,
            )
            .expect("test catalog"),
        );
        let mut index = RouteIndex::build(&catalog);
        let analyzer = Analyzer::new();
        for tool in catalog.tools() {
            let fresh = crate::calibrate::tool_terms(&analyzer, tool);
            // Asked twice: analysed once, then the same set.
            let first = index.text_terms(tool).expect("the index's own record");
            let again = index.text_terms(tool).expect("kept");
            assert!(Arc::ptr_eq(&first, &again));
            assert_eq!(*first, fresh, "{}", tool.id);
        }
        // A record that is not the index's own (an equal copy, or another snapshot's)
        // has none: the decision analyses it.
        let copy = Arc::new(catalog.tools()[0].as_ref().clone());
        assert!(index.text_terms(&copy).is_none());
        // A replaced server's tools are analysed again, from their new text.
        let new: Vec<Arc<ToolRecord>> = vec![Arc::new(copy.as_ref().clone())];
        index.replace_server("git", new.clone());
        let renewed = index.text_terms(&new[0]).expect("the new record");
        assert_eq!(*renewed, crate::calibrate::tool_terms(&analyzer, &new[0]));
        assert!(index.text_terms(&catalog.tools()[0]).is_none());
    }
}
