//! toolgate: a gateway for the Model Context Protocol.
//!
//! It connects to many upstream MCP servers, keeps their full tool schemas, and shows the
//! model only what the next step needs: a constant surface of meta-tools (guided mode),
//! a slimmed plain tool list (direct mode), or a sandbox for scripts (code mode).
//!
//! The leaves every layer speaks (catalog, call types, principals, the store, result
//! shaping) are the crate `toolgate_core`; routing and what the model sees of each tool
//! (token counts, slim schemas) are `toolgate_route`. The compiler keeps both from
//! importing this crate.
//!
//! # Layout
//!
//! - [`config`]: `toolgate.toml` and the `mcpServers` JSON import, validated into `Config`.
//! - [`upstream`]: one supervised MCP client per upstream server (the only rmcp client code).
//! - [`gateway`]: the hub: upstreams plus the current catalog snapshot.
//! - [`engine`]: the application core both surfaces and the gate take (`Engine`).
//! - [`gate`]: the one gate every tool call passes (policy, validation, PII, approval, bound, audit).
//! - [`guided`]: the meta-tool surface (route, execute, continue; execute_code, describe_tools).
//! - [`learning`]: what route learns from the models' choices, kept in the state store.
//! - [`policy`]: profiles (what is visible), keys and tiers (what is allowed), approval, audit.
//! - [`code`]: code mode's services: sandbox workers, the PII vault, state, workspace, TypeScript declarations.
//! - [`programs`]: code mode's orchestration: running a program (`execute_code`) or a skill.
//! - [`skills`]: operator-reviewed programs (`skills/<name>/SKILL.md`), drafts and approval.
//! - [`front`]: the MCP server surfaces over stdio and HTTP (the only rmcp server code).
//! - [`measure`]: token and lint reports, the whole-task simulation (above what they measure).
#![forbid(unsafe_code)]
// stdout is the MCP stream of `toolgate serve --stdio` (and the sandbox worker's channel to
// the gateway): a library writes nothing there; what the CLI prints is the CLI's to say.
#![warn(clippy::print_stdout)]

pub mod code;
pub mod config;
pub mod engine;
pub mod front;
pub mod gate;
pub mod gateway;
pub mod guided;
pub mod learning;
pub mod measure;
pub mod policy;
pub mod programs;
pub mod skills;
pub mod upstream;
