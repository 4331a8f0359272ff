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
//! The modules are private; the API is what this page lists (the types and functions
//! re-exported here, and a few namespaces grouping what one command or test needs).
//! Inside the crate:
//!
//! - `config`: `toolgate.toml` and the `mcpServers` JSON import, validated into [`Config`]
//!   (a [`ConfigError`] says what is wrong, in the words the user reads).
//! - `config_error`: [`ConfigError`] itself, a leaf, since `policy` validates its own sections with it.
//! - `upstream`: one supervised MCP client per upstream server (the only rmcp client code).
//! - `gateway`: the hub: upstreams plus the current catalog snapshot ([`Gateway`]).
//! - `engine`: the application core both surfaces and the gate take (`Engine`).
//! - `gate`: the one gate every tool call passes (policy, validation, PII, approval, bound, audit).
//! - `guided`: the meta-tool surface (route, execute, continue; execute_code, describe_tools).
//! - `learning`: what route learns from the models' choices, kept in the state store.
//! - `policy`: profiles (what is visible), keys and tiers (what is allowed), approval, audit.
//! - `code`: code mode's services: sandbox workers, the PII vault, state, workspace, TypeScript declarations.
//! - `programs`: code mode's orchestration: running a program (`execute_code`) or a skill.
//! - `skills`: operator-reviewed programs (`skills/<name>/SKILL.md`), drafts and approval.
//! - `front`: the MCP server surfaces over stdio and HTTP (the only rmcp server code).
//! - `measure`: token and lint reports, the whole-task simulation (above what they measure).
//!
//! The call types have one path, `toolgate_core::call`.
#![forbid(unsafe_code)]
// stdout is the MCP stream of `toolgate serve --stdio` (and the sandbox worker's channel to
// the gateway): a library writes nothing there; what the CLI prints is the CLI's to say.
#![warn(clippy::print_stdout)]
// The public API is what this file re-exports; each item of it says what it is.
#![warn(missing_docs)]

mod code;
mod config;
mod config_error;
mod engine;
mod front;
mod gate;
mod gateway;
mod guided;
mod learning;
mod measure;
mod policy;
mod programs;
mod skills;
mod upstream;

// Configuration.
pub use config::store::StoreBackend;
pub use config::upstream::{OAuthGrant, RawUpstream};
pub use config::{
    default_workers, is_simple_name, Config, ConfigError, Mode, Transport, UnknownMode,
    UpstreamConfig, DEFAULT_CONFIG_FILE, DEFAULT_MAX_MESSAGE_BYTES,
};
pub use config::{mcp_json, telemetry};

// Running a gateway.
pub use front::{serve_http, serve_stdio};
pub use gateway::Gateway;
pub use policy::{Caller, Policy};
pub use upstream::{adopt_orphans, kill_orphans, UpstreamStatus};

// Keys and reports.
pub use front::dashboard::static_page as dashboard_page;
pub use measure::report::ToolRow;
pub use measure::simulate;
pub use measure::{Finding, LintReport, ServerRow, SurfaceTotals, TokenReport};
pub use policy::keys::{hash_key, new_key};

/// The audit log as `toolgate audit` reads it, and its file handles as the server keeps them.
pub mod audit {
    pub use crate::policy::audit::{chain, flush_all, reopen_all, secret_path};
}

/// OAuth on both sides: an upstream's login (`toolgate auth`) and the front's verifier of
/// access tokens (`[auth.oauth]`).
pub mod oauth {
    pub use crate::policy::oauth::keys::FetchError;
    pub use crate::policy::oauth::Verifier;
    pub use crate::upstream::login::{login, LoginError};
    pub use crate::upstream::oauth::{forget, load, EndpointError, Login, LoginStoreError};
}

/// Skills on disk, as `toolgate skill` lists, approves and rejects them.
pub mod skill {
    pub use crate::skills::{
        drafts, is_skill_name, name_rule, Skill, SkillSet, SKILL_JS, SKILL_MD,
    };
    pub use crate::skills::{DraftError, LoadError, Problem, SchemaRefusal};
}

/// Code mode's workspace files, as `toolgate workspace` reads and removes them.
pub mod workspace {
    pub use crate::code::workspace::{paths, Workspace};
}

/// What route has learnt from the models' choices, as `toolgate route` loads and saves it.
pub mod route_learning {
    pub use crate::learning::{load, save};
}

/// Code mode's PII vault (the tokens a model sees in place of personal data).
pub mod pii {
    pub use crate::code::pii::Vault;
}

/// The guided surface as a model meets it: the meta-tools and their instructions, route's
/// answer and describe_tools' declarations, for simulations and tests.
pub mod surface {
    pub use crate::code::tools_for;
    pub use crate::guided::describe::describe;
    pub use crate::guided::route::{respond, RouteContext};
    pub use crate::guided::schema_view::Detail;
    pub use crate::guided::surface::{code_tools, meta_tools, CODE_INSTRUCTIONS, INSTRUCTIONS};
}
