//! toolgate: a gateway for the Model Context Protocol.
//!
//! It connects to many upstream MCP servers, keeps their full tool schemas, and shows the
//! model only what the next step needs: a constant surface of meta-tools (guided mode),
//! a slimmed plain tool list (direct mode), or a sandbox for scripts (code mode).
//!
//! # Layout
//!
//! - [`catalog`]: tool records, ids and exposed names; the dataset file formats.
//! - [`exec`]: argument validation, result shaping, cursors and background operations.
//! - [`guided`]: the meta-tool surface (route, execute, continue).
#![forbid(unsafe_code)]

pub mod catalog;
pub mod config;
pub mod exec;
pub mod front;
pub mod gateway;
pub mod guided;
pub mod upstream;
