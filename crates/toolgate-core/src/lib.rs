//! toolgate's leaves: what every layer above speaks, and what outlives a call.
//!
//! This crate knows nothing of MCP's wire (no rmcp), of routing, of policy or of the
//! surfaces: the gateway (`toolgate`) and the router (`toolgate-route`) build on it, and
//! the compiler keeps it from importing them.
//!
//! # Layout
//!
//! Each module below is a namespace the layers above name (`toolgate_core::catalog::ToolId`);
//! inside them, files are private modules whose API the namespace re-exports (only
//! `catalog::names`, `meta::args` and `observe::trace` stay namespaces of their own).
//!
//! - [`catalog`]: tool records, ids and exposed names; the dataset file formats.
//! - [`call`]: call types (outcome, error, options, progress, the client relay).
//! - [`principal`]: who a request acts for (its API key, else the local identity); owns every handle.
//! - [`ids`], [`mod@env`]: random ids and simple names; `${VAR}` substitution.
//! - [`drain`]: shutdown of tool calls: none admitted once it begins, the running ones given a bound, then cut.
//! - [`observe`]: Prometheus metrics, each session's token count (the budget), recent route decisions.
//! - [`meta`]: what a meta-tool answers (`MetaResult`) and the meta-tools' typed arguments.
//! - [`store`]: state that outlives the process (the `Store` trait; the embedded redb store, Redis).
//! - [`exec`]: argument validation, result shaping (budget, fields, pages), cursors and operations.
#![forbid(unsafe_code)]
// stdout is the MCP stream of `toolgate serve --stdio` (and the sandbox worker's channel to
// the gateway): a library writes nothing there; what the CLI prints is the CLI's to say.
#![warn(clippy::print_stdout)]
// The public API is each top-level module's own items and what it re-exports; each item of
// it says what it is.
#![warn(missing_docs)]

pub mod call;
pub mod catalog;
pub mod drain;
pub mod env;
pub mod exec;
pub mod ids;
pub mod meta;
pub mod observe;
pub mod principal;
pub mod store;
