//! Executing a call for the model: validate the arguments, shape the result, keep the rest.
//!
//! - [`validate`]: cached validators of each tool's full input schema; [`report`] says what
//!   was wrong in words a model can act on.
//! - [`shape`]: keeping the requested [`fields`] and cutting a result into [`pages`] within
//!   a token budget.
//! - [`store`]: session-scoped cursors over those pages and background operations, with expiry.

mod cursors;
pub mod fields;
mod operations;
pub mod pages;
pub mod report;
pub mod shape;
pub mod store;
pub mod validate;

#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod store_tests;

pub use operations::OperationStatus;
pub use report::{Problem, ValidationReport};
pub use shape::{shape, Shaped, DEFAULT_BUDGET};
pub use store::{IdKind, SessionStore, StoreError, StoreLimits, StoreStats};
pub use validate::{Checked, Validators};
