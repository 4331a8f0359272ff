//! The embedding index: one unit vector per tool (embedded once per catalog snapshot,
//! per server on re-index), ranked by cosine similarity with the embedded task. A tool
//! with example tasks ([`super::examples`]) also has one vector per example, and its
//! similarity is the best of its own and its examples'.

use super::embedder::{dot, EmbedError, Embedder};
use super::examples::RouteExamples;
use super::text::{split_identifier, truncate, MAX_TASK_BYTES};
use super::Retriever;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use toolgate_core::catalog::{Catalog, ToolRecord};

/// The text embedded for a tool: its name split into words, its title, its description
/// and its top-level parameter names split into words, e.g.
/// `get weather forecast. Weather forecast. Returns the forecast for a city. Parameters: city, days.`
/// The server name is left out: it names a product more often than a task.
pub(crate) fn tool_text(tool: &ToolRecord) -> String {
    let mut text = split_identifier(&tool.id.name).join(" ").to_lowercase();
    text.push('.');
    if let Some(title) = tool.title().filter(|t| !t.trim().is_empty()) {
        text.push(' ');
        text.push_str(title.trim().trim_end_matches('.'));
        text.push('.');
    }
    let description = tool.description().trim();
    if !description.is_empty() {
        text.push(' ');
        text.push_str(description);
    }
    if let Some(Value::Object(props)) = tool.input_schema().get("properties") {
        let names: Vec<String> = props
            .keys()
            .map(|k| split_identifier(k).join(" ").to_lowercase())
            .collect();
        if !names.is_empty() {
            text.push_str(" Parameters: ");
            text.push_str(&names.join(", "));
            text.push('.');
        }
    }
    text
}

/// One server's tools and their vectors (row `i` is `tools[i]`).
#[derive(Debug, Clone)]
struct Shard {
    tools: Vec<Arc<ToolRecord>>,
    vectors: Vec<f32>,
    /// The tool (row in `tools`) of each example vector.
    example_of: Vec<u32>,
    example_vectors: Vec<f32>,
}

/// Tool vectors for one catalog snapshot. Cheap to clone (the model is shared), so a
/// gateway can copy it, re-index one server and swap it in, as with `RouteIndex`.
#[derive(Debug, Clone)]
pub struct EmbedIndex {
    embedder: Arc<Embedder>,
    examples: Arc<RouteExamples>,
    /// Server name -> its shard; iteration in server order gives stable tie-breaks.
    shards: BTreeMap<String, Shard>,
}

impl EmbedIndex {
    /// Embeds every tool of `catalog` (batched).
    pub fn build(catalog: &Catalog, embedder: Arc<Embedder>) -> Result<Self, EmbedError> {
        Self::with_examples(catalog, embedder, Arc::default())
    }

    /// Embeds every tool of `catalog` and every example task of its tools.
    pub fn with_examples(
        catalog: &Catalog,
        embedder: Arc<Embedder>,
        examples: Arc<RouteExamples>,
    ) -> Result<Self, EmbedError> {
        let mut index = Self {
            embedder,
            examples,
            shards: BTreeMap::new(),
        };
        let mut by_server: BTreeMap<&str, Vec<Arc<ToolRecord>>> = BTreeMap::new();
        for tool in catalog.tools() {
            by_server
                .entry(&tool.id.server)
                .or_default()
                .push(tool.clone());
        }
        for (server, tools) in by_server {
            index.replace_server(server, tools)?;
        }
        Ok(index)
    }

    /// Re-embeds one server's tools (after its `tools/list_changed`); an empty `tools`
    /// removes the server. On error the index is unchanged.
    pub fn replace_server(
        &mut self,
        server: &str,
        tools: Vec<Arc<ToolRecord>>,
    ) -> Result<(), EmbedError> {
        if tools.is_empty() {
            self.shards.remove(server);
            return Ok(());
        }
        let texts: Vec<String> = tools.iter().map(|t| tool_text(t)).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = self.embedder.embed(&refs)?.concat();
        let mut example_of = Vec::new();
        let mut example_texts = Vec::new();
        for (row, tool) in tools.iter().enumerate() {
            for text in self.examples.of(&tool.id.server, &tool.id.name) {
                example_of.push(row as u32);
                example_texts.push(text.as_str());
            }
        }
        let example_vectors = if example_texts.is_empty() {
            Vec::new()
        } else {
            self.embedder.embed(&example_texts)?.concat()
        };
        self.shards.insert(
            server.to_string(),
            Shard {
                tools,
                vectors,
                example_of,
                example_vectors,
            },
        );
        Ok(())
    }

    /// The model the tools were embedded with.
    pub fn embedder(&self) -> &Arc<Embedder> {
        &self.embedder
    }

    /// Number of embedded tools.
    pub fn len(&self) -> usize {
        self.shards.values().map(|s| s.tools.len()).sum()
    }

    /// True when no server has tools here.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The task's unit vector (the per-request cost: one forward pass).
    pub(crate) fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        self.embedder.embed_one(truncate(query, MAX_TASK_BYTES))
    }

    /// Every tool (of `server` when given, matched case-insensitively) with its cosine
    /// similarity to `query_vec`, in server then catalog order.
    pub(crate) fn similarities(
        &self,
        query_vec: &[f32],
        server: Option<&str>,
    ) -> Vec<(Arc<ToolRecord>, f32)> {
        let dim = self.embedder.dim();
        let mut out = Vec::new();
        for (name, shard) in &self.shards {
            if server.is_some_and(|s| !s.eq_ignore_ascii_case(name)) {
                continue;
            }
            let mut best: Vec<f32> = shard
                .vectors
                .chunks_exact(dim)
                .map(|v| dot(query_vec, v))
                .collect();
            for (&row, v) in shard
                .example_of
                .iter()
                .zip(shard.example_vectors.chunks_exact(dim))
            {
                let b = &mut best[row as usize];
                *b = b.max(dot(query_vec, v));
            }
            out.extend(shard.tools.iter().cloned().zip(best));
        }
        out
    }
}

/// Keeps the `k` best, best first; ties keep their earlier order.
pub(crate) fn top_k(
    mut scored: Vec<(Arc<ToolRecord>, f32)>,
    k: usize,
) -> Vec<(Arc<ToolRecord>, f32)> {
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(k);
    scored
}

impl Retriever for EmbedIndex {
    /// Cosine ranking alone. A model failure on the request path is logged and ranks
    /// nothing (route then asks).
    fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)> {
        match self.embed_query(query) {
            Ok(q) => top_k(self.similarities(&q, server), k),
            Err(e) => {
                tracing::warn!("route: {e}");
                Vec::new()
            }
        }
    }

    /// Exact names are the lexical index's job; embeddings alone know none.
    fn exact(&self, _name: &str, _server: Option<&str>) -> Vec<Arc<ToolRecord>> {
        Vec::new()
    }
}
