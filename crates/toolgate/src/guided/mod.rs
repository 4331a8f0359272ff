//! Guided mode: a constant surface of meta-tools (`route`, `execute`, `continue`) whose
//! size does not grow with the catalog, and the engine behind them.
//!
//! The meta-tools share the application core ([`Engine`], in `crate::engine`). One file
//! per meta-tool: [`route`], [`execute`], [`resume`] (`continue`); in code mode also
//! `execute_code` (a thin call of `programs::run`) and [`describe`] (`describe_tools`);
//! with skills, [`propose`] (`propose_skill`). Running programs and skills is `programs`'.

pub mod describe;
pub mod execute;
pub mod propose;
pub mod resume;
pub mod route;
pub mod schema_view;
pub mod surface;

pub use crate::engine::Engine;
pub use toolgate_core::meta::MetaResult;
