//! toolgate's router and what the model sees of each tool.
//!
//! Routing: from a task in words (or an exact tool name) to one tool, or a short question.
//! It reads only the catalog (`toolgate_core::catalog`); the compiler keeps it from the
//! gateway's other layers, so it builds, tests and benches on its own.
//!
//! # Layout
//!
//! Two modules are namespaces: [`shape`] and [`eval`]; the router's API is re-exported at
//! the crate root from private modules:
//!
//! - [`shape`]: what the model sees of each tool: token counts, slim and local-safe schemas, lint.
//! - [`eval`]: metrics and the labelled-query evaluation behind `toolgate eval route`.
//! - `decide`: exact names first, then select-or-clarify on the ranking ([`route`],
//!   [`RouteDecision`], [`RouteOptions`]).
//! - `index`: the BM25F index, one shard per server ([`RouteIndex`], [`Bm25fParams`]);
//!   `doc` (a tool as a document of weighted fields) and `text` (the analyzer shared by
//!   documents and queries) below it.
//! - `examples`: example tasks per tool, indexed as one more field ([`RouteExamples`]).
//! - `learned`: examples learned from the models' own choices, voted per task ([`Learned`],
//!   [`route_with`]).
//! - `steps`: a task of several steps, each ranked on its own ([`step_tools`]).
//! - `synonyms`: general synonyms a task's words gain before ranking.
//! - `static_vectors`: token vectors distilled from MiniLM, built in: a text's meaning as
//!   a mean of its tokens' vectors, for the decision's `semantic_first`.
//! - `calibrate`: the calibrated confidence (features any catalog has, a fitted logistic:
//!   [`Calibration`], [`Features`]).
//! - `embedder` (static vectors, or with the `embed` feature MiniLM via candle: [`Embedder`]),
//!   `dense` (tool vectors, cosine ranking: [`EmbedIndex`]) and `hybrid` (BM25F and
//!   embeddings fused: [`HybridIndex`]).
//! - here: the [`Retriever`] trait every ranking implements and [`SnapshotIndex`], what the
//!   gateway keeps per catalog snapshot.
// stdout is the MCP stream of `toolgate serve --stdio` (and the sandbox worker's channel to
// the gateway): a library writes nothing there; what the CLI prints is the CLI's to say.
#![warn(clippy::print_stdout)]
// The public API is what the crate root re-exports; each item of it says what it is.
#![warn(missing_docs)]

mod calibrate;
mod decide;
mod dense;
mod doc;
#[cfg(all(test, feature = "embed"))]
mod embed_tests;
mod embedder;
pub mod eval;
mod examples;
mod hybrid;
mod index;
mod learned;
pub mod shape;
mod static_vectors;
mod steps;
mod synonyms;
mod text;

pub use calibrate::{Calibration, Features, FEATURE_NAMES};
pub use decide::{
    route, RouteDecision, RouteOptions, DEFAULT_LIMIT, DEFAULT_THRESHOLD, EXAMPLES_THRESHOLD,
    MAX_BROWSE,
};
pub use examples::RouteExamples;
pub use index::{Bm25fParams, RouteIndex};
pub use learned::{
    normal as normal_task, route_with, Evidence, Learned, LearnedExample, LearningMode,
    LearningSettings,
};
pub use steps::{step_tools, steps as task_steps, StepTool, MAX_STEPS};
pub use {
    dense::EmbedIndex,
    embedder::{EmbedError, Embedder, MODEL_ENV},
    hybrid::{FusionMode, FusionParams, HybridIndex, PrecomputedQueries, HYBRID_THRESHOLD},
};

use std::collections::HashSet;
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;

/// A ranking with what the calibrated decision reads of the same analysis of the task:
/// [`Retriever::rank_described`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Described {
    /// The best tools, best first with their scores.
    pub ranked: Vec<(Arc<ToolRecord>, f32)>,
    /// Each ranked tool's score by its description and parameters alone, in `ranked`'s
    /// order (empty when the retriever's scores have no fields).
    pub by_description: Vec<f32>,
    /// [`Retriever::ceiling`] of the task.
    pub ceiling: Option<f32>,
}

/// Ranks tools for a task. The BM25F [`RouteIndex`] is the default; a second retriever
/// (e.g. static embeddings) can implement this and be fused with it.
pub trait Retriever: Send + Sync {
    /// The `k` best tools for `query`, best first with their scores (higher is better),
    /// only from `server` when given.
    fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)>;

    /// Tools whose name is exactly `name` in one of the spellings a caller may type.
    fn exact(&self, name: &str, server: Option<&str>) -> Vec<Arc<ToolRecord>>;

    /// The highest score any tool could reach for `query`, when the scores have one; the
    /// decision then counts the part of the query no tool explains against selecting.
    fn ceiling(&self, _query: &str) -> Option<f32> {
        None
    }

    /// True when some tool, visible or not, is named `name`: a name route must not rank
    /// (it would select another tool). Filtering retrievers ask their inner index.
    fn is_name(&self, name: &str, server: Option<&str>) -> bool {
        !self.exact(name, server).is_empty()
    }

    /// [`Self::rank`], with each ranked tool's score by its description and parameters
    /// alone, for retrievers whose scores have fields (empty otherwise), and
    /// [`Self::ceiling`]: the calibrated decision asks whether the top tool is also the
    /// best of the first few by those, and how much of the task it explains. A retriever
    /// that analyses the task once for all three overrides it.
    fn rank_described(&self, query: &str, server: Option<&str>, k: usize) -> Described {
        Described {
            ranked: self.rank(query, server, k),
            by_description: Vec::new(),
            ceiling: self.ceiling(query),
        }
    }

    /// For each reading of a task, the `k` tools closest in meaning to it by the static
    /// token vectors (`static_vectors`), best first with their cosines; empty lists for
    /// retrievers without them. The calibrated decision asks whether the top tool is also
    /// the closest to a reading.
    fn closest_each(
        &self,
        readings: &[&str],
        _server: Option<&str>,
        _k: usize,
    ) -> Vec<Vec<(Arc<ToolRecord>, f32)>> {
        vec![Vec::new(); readings.len()]
    }

    /// The analysed terms of `tool`'s name, title and description, when the retriever
    /// keeps them (the calibrated decision compares the top two tools' with the task);
    /// `None`: the decision analyses them itself. Filtering retrievers ask their inner one.
    fn text_terms(&self, _tool: &ToolRecord) -> Option<Arc<HashSet<String>>> {
        None
    }

    /// True when the scores are BM25F's, for which the calibrated confidence was fitted;
    /// other retrievers keep the softmax confidence and their own threshold.
    fn calibrated(&self) -> bool {
        false
    }
}

impl Retriever for RouteIndex {
    fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)> {
        RouteIndex::rank(self, query, server, k)
    }

    fn exact(&self, name: &str, server: Option<&str>) -> Vec<Arc<ToolRecord>> {
        RouteIndex::exact(self, name, server)
    }

    fn ceiling(&self, query: &str) -> Option<f32> {
        Some(RouteIndex::ceiling(self, query))
    }

    fn rank_described(&self, query: &str, server: Option<&str>, k: usize) -> Described {
        RouteIndex::rank_described(self, query, server, k)
    }

    fn closest_each(
        &self,
        readings: &[&str],
        server: Option<&str>,
        k: usize,
    ) -> Vec<Vec<(Arc<ToolRecord>, f32)>> {
        RouteIndex::closest_each(self, readings, server, k)
    }

    fn text_terms(&self, tool: &ToolRecord) -> Option<Arc<HashSet<String>>> {
        RouteIndex::text_terms(self, tool)
    }

    /// Calibrated without example tasks only: the model was fitted on catalogs alone, and
    /// an example's words explain a task that no feature of the tool's own text sees.
    fn calibrated(&self) -> bool {
        self.examples().is_empty()
    }
}

/// A retriever the gateway keeps per catalog snapshot: re-indexed one server at a time
/// when that server's tools change (the engine copies it, re-indexes, swaps it in).
pub trait SnapshotIndex: Retriever {
    /// Replaces one server's tools; an empty `tools` removes the server.
    fn replace_server(&mut self, server: &str, tools: Vec<Arc<ToolRecord>>);
    /// Number of indexed tools.
    fn len(&self) -> usize;
    /// True when no tool is indexed.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A copy to re-index.
    fn clone_box(&self) -> Box<dyn SnapshotIndex>;
}

impl SnapshotIndex for RouteIndex {
    fn replace_server(&mut self, server: &str, tools: Vec<Arc<ToolRecord>>) {
        RouteIndex::replace_server(self, server, tools)
    }

    fn len(&self) -> usize {
        RouteIndex::len(self)
    }

    fn clone_box(&self) -> Box<dyn SnapshotIndex> {
        Box::new(self.clone())
    }
}

impl SnapshotIndex for HybridIndex {
    /// Embeds the server's tools (and their example tasks); if the model fails, the
    /// server keeps its previous entries and the failure is logged.
    fn replace_server(&mut self, server: &str, tools: Vec<Arc<ToolRecord>>) {
        if let Err(e) = HybridIndex::replace_server(self, server, tools) {
            tracing::error!("route: re-indexing {server} failed, its previous entries stay: {e}");
        }
    }

    fn len(&self) -> usize {
        self.lexical().len()
    }

    fn clone_box(&self) -> Box<dyn SnapshotIndex> {
        Box::new(self.clone())
    }
}
