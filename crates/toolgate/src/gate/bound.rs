//! The output bound of the direct surface (pinned and expanded tools included): a result
//! past its budget (`guided.tool_budgets` for the tool, else `direct.max_result_tokens`)
//! is cut at a clean boundary, as execute's pages are, with a note saying how much was
//! left out and how to get the rest (for a tool with an `outputSchema`, whose structured
//! result cannot be cut, as a tool error). Guided `execute` pages with a cursor instead
//! (`guided::resume::shaped_answer`); programs are bounded by `code.max_tool_result_bytes`.

use crate::engine::Engine;
use toolgate_core::call::CallOutcome;
use toolgate_core::catalog::ToolRecord;
use toolgate_route::shape::Encoding;

/// The budget of a direct call of `tool`, in o200k tokens.
pub(crate) fn direct_budget(engine: &Engine, tool: &ToolRecord) -> usize {
    let configured = engine
        .gw
        .config
        .guided
        .tool_budgets
        .get(&tool.id.to_string());
    configured
        .copied()
        .unwrap_or(engine.direct_config().max_result_tokens)
}

/// `outcome` within `budget` tokens: whole when it fits, else its first page and a note.
/// A result whose bytes fit is returned as it is, uncounted; a larger one is counted off
/// the async worker (`exec::off_async_worker`), where counting a long text holds up no other call.
pub(crate) fn bound(outcome: CallOutcome, budget: usize, tool: &ToolRecord) -> CallOutcome {
    if toolgate_core::exec::fits_uncounted(&outcome, budget) {
        return outcome;
    }
    toolgate_core::exec::off_async_worker(|| cut(outcome, budget, tool))
}

fn cut(outcome: CallOutcome, budget: usize, tool: &ToolRecord) -> CallOutcome {
    let count = |s: &str| Encoding::O200k.count(s);
    let shaped = toolgate_core::exec::shape(outcome, None, budget, &count);
    let mut page = shaped.page;
    if shaped.remaining.is_empty() {
        return page;
    }
    let left: usize = shaped.remaining.iter().map(|p| count(p)).sum();
    // A tool with an output schema promises its whole structured result (clients check
    // it), so its cut result is a tool error the model can act on, not a partial success.
    if tool.tool.contains_key("outputSchema") {
        page.is_error = true;
        page.structured_content = None;
    }
    page.content.push(toolgate_core::exec::text_block(format!(
        "[toolgate] result cut at {budget} tokens: about {left} of its {} tokens ({} more pages) were left out. \
         To get the rest, call {} again asking for less (a filter, a smaller limit, a later page or offset if it takes one), \
         or run it with the guided surface's execute, whose continue returns the other pages.",
        shaped.original_tokens,
        shaped.remaining.len(),
        tool.exposed,
    )));
    page
}
