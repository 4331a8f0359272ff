//! Guided mode: a constant surface of meta-tools (`route`, `execute`, `continue`) whose
//! size does not grow with the catalog, and the engine behind them.
//!
//! The meta-tools share the application core ([`Engine`], in `crate::engine`). One file
//! per meta-tool: [`route`], [`execute`], [`resume`] (`continue`); in code mode also
//! [`code`] (`execute_code`) and [`describe`] (`describe_tools`); with skills,
//! [`skill`] (running one, from execute or a program) and [`propose`] (`propose_skill`).

pub mod code;
pub mod describe;
pub mod execute;
pub mod propose;
pub mod resume;
pub mod route;
pub mod schema_view;
pub mod skill;
pub mod surface;

pub use crate::engine::Engine;
pub use crate::meta::MetaResult;
use serde_json::Value;

/// Reads an optional string argument, or says what is wrong with it.
pub(crate) fn opt_str<'a>(
    args: &'a serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("\"{key}\" must be a string, got {other}")),
    }
}

/// Reads an optional non-negative integer argument.
pub(crate) fn opt_uint(
    args: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("\"{key}\" must be a non-negative integer, got {v}")),
    }
}
