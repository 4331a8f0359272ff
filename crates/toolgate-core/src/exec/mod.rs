//! Executing a call for the model: validate the arguments, shape the result, keep the rest.
//!
//! The modules are private; what the layers above name is re-exported here.
//!
//! - `validate`: cached validators of each tool's full input schema ([`Validators`]);
//!   `report` says what was wrong in words a model can act on ([`ValidationReport`]).
//! - `shape`: keeping the requested `fields` and cutting a result into `pages` within
//!   a token budget ([`shape()`](fn@shape), [`split_pages`]).
//! - `sessions`: the [`SessionStore`]: cursors over those pages and background operations
//!   (`cursors`, `operations`), with expiry and bounds ([`SessionStore`]).
//!
//! How the meta-tools use them (one [`Validators`] and one [`SessionStore`] per gateway):
//!
//! - `execute`: [`Validators::validate`] (a [`ValidationReport`] becomes an `isError`
//!   result via [`ValidationReport::to_text`]); [`SessionStore::start`] the upstream call
//!   with the token and progress sender it hands over; [`SessionStore::wait`] a few
//!   seconds; if still [`OperationStatus::Running`], answer with the operation id; if
//!   [`OperationStatus::Done`], [`shape()`](fn@shape) it, answer with `page`, and if `remaining` is
//!   not empty, [`SessionStore::put_pages`] it and add the cursor to the answer.
//! - `continue {cursor}`: [`SessionStore::next_page_at`]; `continue {operationId}`:
//!   [`SessionStore::wait`] (or [`SessionStore::cancel`] with `cancel: true`), shaping a
//!   finished result as `execute` does. A [`StoreError`]'s message goes back as `isError`.

mod cursors;
mod durable;
pub use cursors::PagePosition;
mod fields;
mod limits;
mod operations;
mod pages;
mod report;
mod sessions;
mod shaping;
mod tombstones;
mod validate;

#[cfg(test)]
mod durable_tests;
#[cfg(test)]
mod sessions_tests;
#[cfg(test)]
mod shaping_tests;

pub use limits::{IdKind, StoreError, StoreLimits, StoreStats};
pub use operations::{ListedOperation, OperationState, OperationStatus};
pub use pages::split_pages;
pub use report::{Problem, ValidationReport};
pub use sessions::{Resumable, Resume, SessionStore};
pub use shaping::{fits_uncounted, off_async_worker, shape, text_block, Shaped, DEFAULT_BUDGET};
pub use validate::{compile_schema, Checked, SchemaError, Validators};
