//! One module per subcommand; `common` holds what several share (loading configuration,
//! logging, the built-in demo).

pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod check;
pub(crate) mod common;
pub(crate) mod conformance_client;
pub(crate) mod eval;
pub(crate) mod eval_loo;
pub(crate) mod eval_replay;
pub(crate) mod eval_steps;
pub(crate) mod init;
pub(crate) mod init_sources;
pub(crate) mod key;
pub(crate) mod lint;
pub(crate) mod route;
pub(crate) mod serve;
pub(crate) mod simulate;
pub(crate) mod skill;
pub(crate) mod store;
pub(crate) mod telemetry;
pub(crate) mod tokens;
pub(crate) mod tools;
pub(crate) mod workspace;
