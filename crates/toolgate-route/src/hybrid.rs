//! The hybrid retriever: BM25F and sentence embeddings, fused per tool into one score on
//! which the select-or-clarify confidence is computed as usual.
//!
//! Score fusion (the default): `(1 - w) * bm25 / ceiling + w * max(cos, 0)`, where the
//! BM25F score is divided by the task's ceiling (the most any tool could score), so both
//! parts are absolute shares in [0, 1]: how much of the task's wording the tool covers,
//! and how close its meaning is. The fused ceiling is then 1, and the decision's "no tool"
//! competitor keeps working. Reciprocal-rank fusion is available for comparison.

use super::dense::{top_k, EmbedIndex};
use super::embedder::{EmbedError, Embedder};
use super::examples::RouteExamples;
use super::index::{Bm25fParams, RouteIndex};
use super::Retriever;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use toolgate_core::catalog::{Catalog, ToolId, ToolRecord};

/// Weight of the embedding side in score fusion. Chosen on the tuning splits (query
/// index mod 5 == 0); `docs/routing.md` has the sweep.
pub(crate) const HYBRID_WEIGHT: f32 = 0.7;
/// The select threshold for the hybrid's fused scores, chosen on the MetaTool tuning
/// split as the lowest where selection precision stays at or above 0.90.
pub const HYBRID_THRESHOLD: f32 = 0.94;

/// How the two rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FusionMode {
    /// Weighted sum of the ceiling-normalised BM25F score and the cosine.
    Score,
    /// Weighted reciprocal-rank fusion, `(1 - w) / (k + r_bm25) + w / (k + r_cos)`.
    Rrf,
}

/// Fusion parameters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FusionParams {
    /// How the two rankings are fused.
    pub mode: FusionMode,
    /// Weight of the embedding side, 0 (BM25F alone) to 1 (embeddings alone).
    pub weight: f32,
    /// RRF's rank offset.
    pub rrf_k: f32,
    /// Fused scores are raised to this power before the decision sees them; > 1 widens
    /// the gaps between close scores (the decision's temperature is fixed).
    pub sharpen: f32,
}

impl Default for FusionParams {
    fn default() -> Self {
        Self {
            mode: FusionMode::Score,
            weight: HYBRID_WEIGHT,
            rrf_k: 60.0,
            sharpen: 1.0,
        }
    }
}

/// BM25F and embeddings over the same catalog snapshot. `Send + Sync`, cloneable for an
/// `Arc::make_mut` re-index like `RouteIndex`.
#[derive(Debug, Clone)]
pub struct HybridIndex {
    lexical: RouteIndex,
    dense: EmbedIndex,
    params: FusionParams,
}

impl HybridIndex {
    /// Indexes `catalog` both ways with default parameters (embeds every tool: run it
    /// where a catalog snapshot is built, not on the request path).
    pub fn build(catalog: &Catalog, embedder: Arc<Embedder>) -> Result<Self, EmbedError> {
        Self::with_params(
            catalog,
            Bm25fParams::default(),
            embedder,
            FusionParams::default(),
        )
    }

    /// Builds the index over `catalog` with the given BM25F and fusion parameters.
    pub fn with_params(
        catalog: &Catalog,
        bm25: Bm25fParams,
        embedder: Arc<Embedder>,
        params: FusionParams,
    ) -> Result<Self, EmbedError> {
        Self::with_examples(catalog, bm25, embedder, params, Arc::default())
    }

    /// Like [`Self::with_params`], with example tasks per tool on the BM25F side.
    pub fn with_examples(
        catalog: &Catalog,
        bm25: Bm25fParams,
        embedder: Arc<Embedder>,
        params: FusionParams,
        examples: Arc<RouteExamples>,
    ) -> Result<Self, EmbedError> {
        Ok(Self {
            // The hybrid's decision is the softmax's: no static vectors on its lexical side.
            lexical: RouteIndex::with_vectors(catalog, bm25, examples.clone(), None),
            dense: EmbedIndex::with_examples(catalog, embedder, examples)?,
            params,
        })
    }

    /// From indexes already built over the same catalog.
    pub fn from_parts(lexical: RouteIndex, dense: EmbedIndex, params: FusionParams) -> Self {
        Self {
            lexical,
            dense,
            params,
        }
    }

    /// Re-indexes one server both ways; an empty `tools` removes it. The embedding side
    /// goes first, so on a model error neither side changes.
    pub fn replace_server(
        &mut self,
        server: &str,
        tools: Vec<Arc<ToolRecord>>,
    ) -> Result<(), EmbedError> {
        self.dense.replace_server(server, tools.clone())?;
        self.lexical.replace_server(server, tools);
        Ok(())
    }

    /// The BM25F side.
    pub fn lexical(&self) -> &RouteIndex {
        &self.lexical
    }

    /// The embedding side.
    #[cfg(all(test, feature = "embed"))]
    pub(crate) fn dense(&self) -> &EmbedIndex {
        &self.dense
    }

    /// The fusion parameters in use.
    pub fn params(&self) -> &FusionParams {
        &self.params
    }

    /// Replaces the fusion parameters (the indexes stay).
    pub fn set_params(&mut self, params: FusionParams) {
        self.params = params;
    }

    /// The fused ranking for a task whose vector is already known.
    pub(crate) fn rank_with_vector(
        &self,
        query: &str,
        query_vec: &[f32],
        server: Option<&str>,
        k: usize,
    ) -> Vec<(Arc<ToolRecord>, f32)> {
        let p = &self.params;
        let w = p.weight.clamp(0.0, 1.0);
        let lexical = self.lexical.rank(query, server, self.lexical.len());
        let mut dense = self.dense.similarities(query_vec, server);
        let fused: Vec<(Arc<ToolRecord>, f32)> = match p.mode {
            FusionMode::Score => {
                let ceiling = self.lexical.ceiling(query);
                let norm = if ceiling > 0.0 { 1.0 / ceiling } else { 0.0 };
                let lex: HashMap<&ToolId, f32> =
                    lexical.iter().map(|(t, s)| (&t.id, s * norm)).collect();
                dense
                    .into_iter()
                    .map(|(t, cos)| {
                        let l = lex.get(&t.id).copied().unwrap_or(0.0).min(1.0);
                        let s = (1.0 - w) * l + w * cos.max(0.0);
                        (t, s)
                    })
                    .collect()
            }
            FusionMode::Rrf => {
                let lex: HashMap<&ToolId, usize> = lexical
                    .iter()
                    .enumerate()
                    .map(|(r, (t, _))| (&t.id, r + 1))
                    .collect();
                dense.sort_by(|a, b| b.1.total_cmp(&a.1));
                dense
                    .into_iter()
                    .enumerate()
                    .map(|(r, (t, _))| {
                        let l = lex
                            .get(&t.id)
                            .map_or(0.0, |&lr| (1.0 - w) / (p.rrf_k + lr as f32));
                        let s = l + w / (p.rrf_k + (r + 1) as f32);
                        (t, s)
                    })
                    .collect()
            }
        };
        let mut ranked = top_k(fused, k);
        if p.sharpen != 1.0 {
            for (_, s) in &mut ranked {
                *s = s.max(0.0).powf(p.sharpen);
            }
        }
        ranked
    }
}

impl Retriever for HybridIndex {
    /// Embeds the task (one forward pass), then fuses. If the model fails on the request
    /// path, BM25F alone answers (and the failure is logged).
    fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)> {
        match self.dense.embed_query(query) {
            Ok(v) => self.rank_with_vector(query, &v, server, k),
            Err(e) => {
                tracing::warn!("route: {e}; ranking with BM25F alone");
                self.lexical.rank(query, server, k)
            }
        }
    }

    fn exact(&self, name: &str, server: Option<&str>) -> Vec<Arc<ToolRecord>> {
        self.lexical.exact(name, server)
    }

    /// Score fusion is in shares of the task, so 1 is the most a tool can reach; RRF
    /// scores have no such bound.
    fn ceiling(&self, _query: &str) -> Option<f32> {
        match self.params.mode {
            FusionMode::Score => Some(1.0),
            FusionMode::Rrf => None,
        }
    }
}

/// A hybrid whose task vectors were embedded ahead, in batches (for evaluation sweeps:
/// one forward pass per batch instead of per task). A task not in the map is embedded.
#[derive(Debug)]
pub struct PrecomputedQueries<'a> {
    /// The index that ranks.
    pub index: &'a HybridIndex,
    /// Task text -> its embedding, computed ahead.
    pub vectors: &'a HashMap<String, Vec<f32>>,
}

impl<'a> PrecomputedQueries<'a> {
    /// Embeds `queries` in batches with the index's model.
    pub fn embed_all(
        index: &HybridIndex,
        queries: &[&str],
    ) -> Result<HashMap<String, Vec<f32>>, EmbedError> {
        let vectors = index.dense.embedder().embed(queries)?;
        Ok(queries.iter().map(|q| q.to_string()).zip(vectors).collect())
    }
}

impl Retriever for PrecomputedQueries<'_> {
    fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)> {
        match self.vectors.get(query) {
            Some(v) => self.index.rank_with_vector(query, v, server, k),
            None => self.index.rank(query, server, k),
        }
    }

    fn exact(&self, name: &str, server: Option<&str>) -> Vec<Arc<ToolRecord>> {
        self.index.exact(name, server)
    }

    fn ceiling(&self, query: &str) -> Option<f32> {
        self.index.ceiling(query)
    }
}
