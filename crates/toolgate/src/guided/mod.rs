//! Guided mode: a constant surface of meta-tools (`route`, `execute`, `continue`) whose
//! size does not grow with the catalog, and the engine behind them.
//!
//! The meta-tools share the application core ([`Engine`], in `crate::engine`). One file
//! per meta-tool: [`route`], [`execute`], [`resume`] (`continue`); in code mode also
//! `execute_code` (a thin call of `programs::run`) and [`describe`] (`describe_tools`);
//! with skills, [`propose`] (`propose_skill`). Running programs and skills is `programs`'.

pub(crate) mod describe;
pub(crate) mod execute;
pub(crate) mod propose;
pub(crate) mod resume;
pub(crate) mod route;
pub(crate) mod schema_view;
pub(crate) mod surface;

pub(crate) use crate::engine::Engine;
pub(crate) use toolgate_core::meta::MetaResult;
