//! toolgate: a gateway for the Model Context Protocol.
//!
//! It connects to many upstream MCP servers, keeps their full tool schemas, and shows the
//! model only what the next step needs: a constant surface of meta-tools (guided mode),
//! a slimmed plain tool list (direct mode), or a sandbox for scripts (code mode).
//!
//! # Layout
//!
//! - [`config`]: `toolgate.toml` and the `mcpServers` JSON import, validated into `Config`.
//! - [`upstream`]: one supervised MCP client per upstream server (the only rmcp client code).
//! - [`gateway`]: the hub: upstreams plus the current catalog snapshot.
//! - [`catalog`]: tool records, ids and exposed names; the dataset file formats.
//! - [`exec`]: argument validation, result shaping (budget, fields, pages), cursors and operations.
//! - [`engine`]: the application core both surfaces and the gate take (`Engine`).
//! - [`meta`]: what a meta-tool answers (`MetaResult`).
//! - [`gate`]: the one gate every tool call passes (policy, validation, PII, approval, bound, audit).
//! - [`route`]: the BM25F retriever and the select-or-clarify decision behind `route`.
//! - [`guided`]: the meta-tool surface (route, execute, continue; execute_code, describe_tools).
//! - [`policy`]: profiles (what is visible), keys and tiers (what is allowed), approval, audit.
//! - [`code`]: code mode's services: sandbox workers, the PII vault, state, workspace, TypeScript declarations.
//! - [`programs`]: code mode's orchestration: running a program (`execute_code`) or a skill.
//! - [`skills`]: operator-reviewed programs (`skills/<name>/SKILL.md`), drafts and approval.
//! - [`front`]: the MCP server surfaces over stdio and HTTP (the only rmcp server code).
//! - [`shape`]: what the model sees of each tool: token counts, slim and local-safe schemas, lint.
//! - [`observe`]: Prometheus metrics, each session's token count (the budget), recent route decisions.
//! - [`measure`]: token and lint reports, the whole-task simulation (above what they measure).
//! - [`call`]: call types (outcome, error, options, progress, the client relay): a leaf.
//! - [`ids`], [`env`]: leaves: random ids and simple names; `${VAR}` substitution.
//! - [`drain`]: shutdown of tool calls: none admitted once it begins, the running ones given a bound, then cut.
//! - [`store`]: state that outlives the process (the `Store` trait; the embedded redb store).
//! - [`principal`]: who a request acts for (its API key, else the local identity); owns every handle.
#![forbid(unsafe_code)]

pub mod call;
pub mod catalog;
pub mod code;
pub mod config;
pub mod drain;
pub mod engine;
pub mod env;
pub mod exec;
pub mod front;
pub mod gate;
pub mod gateway;
pub mod guided;
pub mod ids;
pub mod measure;
pub mod meta;
pub mod observe;
pub mod policy;
pub mod principal;
pub mod programs;
pub mod route;
pub mod shape;
pub mod skills;
pub mod store;
pub mod upstream;
