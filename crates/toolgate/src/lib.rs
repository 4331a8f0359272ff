//! toolgate: a gateway for the Model Context Protocol.
//!
//! It connects to many upstream MCP servers, keeps their full tool schemas, and shows the
//! model only what the next step needs: a constant surface of meta-tools (guided mode),
//! a slimmed plain tool list (direct mode), or a sandbox for scripts (code mode).
//!
//! # Layout
//!
//! - [`catalog`]: tool records, ids and exposed names; the dataset file formats.
//! - [`guided`]: the meta-tool surface (route, execute, continue).
//! - [`shape`]: what the model sees of each tool: token counts, slim and local-safe schemas, lint.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod guided;
pub mod shape;
