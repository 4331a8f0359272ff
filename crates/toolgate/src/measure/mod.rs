//! Measuring what the model sees, above what is measured (the shapes, the guided
//! surface, code mode): token and lint reports over a catalog ([`report`]) and the
//! whole-task simulation, direct against guided and code mode, with an oracle agent
//! ([`simulate`]).

pub(crate) mod report;
pub mod simulate;

pub use report::{Finding, LintReport, ServerRow, SurfaceTotals, TokenReport};
