//! One module per subcommand; `common` holds what several share (loading configuration,
//! logging, the built-in demo).

pub mod audit;
pub mod check;
pub mod common;
pub mod conformance_client;
pub mod eval;
pub mod eval_loo;
pub mod key;
pub mod lint;
pub mod serve;
pub mod simulate;
pub mod skill;
pub mod tokens;
pub mod tools;
pub mod workspace;
