//! Executing a call for the model: validate the arguments, shape the result, keep the rest.
//!
//! - [`validate`]: cached validators of each tool's full input schema; [`report`] says what
//!   was wrong in words a model can act on.
//! - [`shape`](mod@shape): keeping the requested [`fields`] and cutting a result into [`pages`] within
//!   a token budget.
//! - [`store`]: session-scoped cursors over those pages and background operations
//!   (`cursors`, `operations`), with expiry and bounds.
//!
//! How the meta-tools use them (one [`Validators`] and one [`SessionStore`] per gateway):
//!
//! - `execute`: [`Validators::validate`] (a [`ValidationReport`] becomes an `isError`
//!   result via [`ValidationReport::to_text`]); [`SessionStore::start`] the upstream call
//!   with the token and progress sender it hands over; [`SessionStore::wait`] a few
//!   seconds; if still [`OperationStatus::Running`], answer with the operation id; if
//!   [`OperationStatus::Done`], [`shape()`](fn@shape) it, answer with `page`, and if `remaining` is
//!   not empty, [`SessionStore::put_pages`] it and add the cursor to the answer.
//! - `continue {cursor}`: [`SessionStore::next_page`]; `continue {operationId}`:
//!   [`SessionStore::wait`] (or [`SessionStore::cancel`] with `cancel: true`), shaping a
//!   finished result as `execute` does. A [`StoreError`]'s message goes back as `isError`.

mod cursors;
mod durable;
pub use cursors::PagePosition;
pub mod fields;
mod limits;
mod operations;
pub mod pages;
pub mod report;
pub mod shape;
pub mod store;
mod tombstones;
pub mod validate;

#[cfg(test)]
mod durable_tests;
#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod store_tests;

pub use operations::OperationStatus;
pub use report::{Problem, ValidationReport};
pub use shape::{
    fits_uncounted, off_async_worker, shape, Shaped, DEFAULT_BUDGET, MEDIA_TOKENS, NOTE_TOKENS,
};
pub use store::{IdKind, SessionStore, StoreError, StoreLimits, StoreStats};
pub use validate::{Checked, Validators};
