//! The `continue` meta-tool: the next page of a result, or the status, result or
//! cancellation of a running operation; and how a finished call is shaped for the model
//! (`shaped_answer`, which `execute` uses too).

use super::{Engine, MetaResult};
use crate::policy::Caller;
use serde_json::{json, Map, Value};
use std::time::Duration;
use toolgate_core::call::CallOutcome;
use toolgate_core::exec::{shape, OperationStatus, Shaped, StoreError};
use toolgate_core::meta::args::ContinueArgs;
use toolgate_core::principal::Principal;
use toolgate_route::shape::Encoding;

/// How long `continue {operationId}` waits for the operation before reporting progress.
const POLL_WAIT: Duration = Duration::from_secs(5);

pub(crate) async fn run(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> MetaResult {
    let given: ContinueArgs = match toolgate_core::meta::args::parse(args) {
        Ok(a) => a,
        Err(e) => return MetaResult::error(format!("continue: {e}")),
    };
    let cancel = given.cancel.unwrap_or(false);
    let parsed = (given.cursor.as_deref(), given.operation_id.as_deref());
    match parsed {
        (Some(cursor), None) => match engine.store.next_page_at(owner, cursor) {
            // execute answered page 1 itself and kept the rest: kept page i is page i + 2.
            Ok((page, next, at)) => page_answer(page, next, at.index + 2, at.stored + 1),
            Err(e) => {
                audit_foreign(engine, caller, &e);
                store_error(e)
            }
        },
        (None, Some(op)) => {
            let status = if cancel {
                engine.store.cancel(owner, op)
            } else {
                engine.store.wait(owner, op, POLL_WAIT).await
            };
            if let Err(e) = &status {
                audit_foreign(engine, caller, e);
            }
            let budget = engine.guided_config().budget_tokens;
            answer_status(engine, owner, op, status, &None, budget)
        }
        (Some(_), Some(_)) => {
            MetaResult::error("continue: pass either cursor or operationId, not both")
        }
        (None, None) => MetaResult::error(
            "continue: pass \"cursor\" (from a paged result) or \"operationId\" (from a slow call)",
        ),
    }
}

/// One page: its text, then where it stands (the text joins the structured part at the
/// front, `front/meta_tools.rs::to_result`, for clients that show only that).
fn page_answer(page: String, next: Option<String>, number: usize, of: usize) -> MetaResult {
    let mut content = vec![toolgate_core::exec::text_block(page)];
    let structured = match &next {
        Some(cursor) => {
            content.push(toolgate_core::exec::text_block(format!(
                "[toolgate] page {number} of {of}; call continue with {{\"cursor\": \"{cursor}\"}} for the next page"
            )));
            json!({"nextCursor": cursor, "page": number, "pages": of})
        }
        None => {
            content.push(toolgate_core::exec::text_block(format!(
                "[toolgate] page {number} of {of}, the last"
            )));
            json!({"nextCursor": null, "done": true, "page": number, "pages": of})
        }
    };
    MetaResult {
        content,
        structured: Some(structured),
        is_error: false,
        meta: None,
    }
}

/// A cursor or operation of another principal is audited as foreign.
fn audit_foreign(engine: &Engine, caller: &Caller, e: &StoreError) {
    if let StoreError::Foreign { kind, id } = e {
        engine.policy.audit_foreign(caller, &kind.to_string(), id);
    }
}

fn store_error(e: StoreError) -> MetaResult {
    MetaResult::error(format!("continue: {e}"))
}

/// The answer for an operation's status, shared by execute (after its wait) and continue.
pub(crate) fn answer_status(
    engine: &Engine,
    owner: &Principal,
    op: &str,
    status: Result<OperationStatus<CallOutcome>, StoreError>,
    fields: &Option<Vec<String>>,
    budget: usize,
) -> MetaResult {
    match status {
        Err(e) => store_error(e),
        Ok(OperationStatus::Done(outcome)) => shaped_answer(engine, owner, outcome, fields, budget),
        Ok(OperationStatus::Failed(msg)) => MetaResult::error(msg),
        Ok(OperationStatus::Cancelled) => MetaResult {
            structured: Some(json!({"operationId": op, "status": "cancelled"})),
            ..MetaResult::error(format!(
                "operation {op} was cancelled; nothing more will come of it"
            ))
        },
        Ok(OperationStatus::Running { progress, elapsed }) => {
            let mut s =
                json!({"operationId": op, "status": "running", "elapsedSecs": elapsed.as_secs()});
            let mut text = format!(
                "Still running after {} s. Call continue with {{\"operationId\": \"{op}\"}} to wait for the result, or add \"cancel\": true to stop it.",
                elapsed.as_secs()
            );
            if let Some(p) = progress {
                s["progress"] =
                    json!({"progress": p.progress, "total": p.total, "message": p.message});
                let of = p.total.map(|t| format!(" of {t}")).unwrap_or_default();
                text.push_str(&format!(
                    " Progress: {}{of}{}",
                    p.progress,
                    p.message.map(|m| format!(" ({m})")).unwrap_or_default()
                ));
            }
            MetaResult::text(text, Some(s))
        }
    }
}

/// Shapes a finished call for the model: fields, budget, and a cursor for the rest.
pub(crate) fn shaped_answer(
    engine: &Engine,
    owner: &Principal,
    outcome: CallOutcome,
    fields: &Option<Vec<String>>,
    budget: usize,
) -> MetaResult {
    let fields = fields.as_deref().filter(|f| !f.is_empty());
    // A result whose bytes fit the budget is shown whole, uncounted (the usual case).
    if fields.is_none() && toolgate_core::exec::fits_uncounted(&outcome, budget) {
        return MetaResult {
            content: outcome.content,
            structured: outcome.structured_content,
            is_error: outcome.is_error,
            meta: None,
        };
    }
    let count = |s: &str| Encoding::O200k.count(s);
    // Counting and cutting a large result takes real CPU time: off the async worker, so
    // other sessions' calls are not held up behind it.
    let Shaped {
        page,
        remaining,
        total_pages,
        original_tokens,
        field_note,
        ..
    } = toolgate_core::exec::off_async_worker(|| shape(outcome, fields, budget, &count));
    let mut content = page.content;
    let mut structured = page.structured_content;
    if let Some(note) = field_note {
        content.push(toolgate_core::exec::text_block(format!(
            "[toolgate] {note}"
        )));
    }
    if !remaining.is_empty() {
        match engine.store.put_pages(owner, remaining) {
            Ok(cursor) => {
                content.push(toolgate_core::exec::text_block(format!(
                    "[toolgate] page 1 of {total_pages} ({original_tokens} tokens in all); call continue with {{\"cursor\": \"{cursor}\"}} for the next page"
                )));
                // The page's text joins the structured part at the front (`to_result`).
                structured = Some(
                    json!({"nextCursor": cursor, "page": 1, "pages": total_pages, "tokens": original_tokens}),
                );
            }
            Err(e) => content.push(toolgate_core::exec::text_block(format!(
                "[toolgate] the result was cut to its first page: {e}"
            ))),
        }
    }
    MetaResult {
        content,
        structured,
        is_error: page.is_error,
        meta: None,
    }
}
