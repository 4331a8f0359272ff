//! Shaping a call's result for the model: the requested fields only, within a token budget.
//!
//! Two steps, in order:
//!
//! 1. **Fields** (optional): each field is a JSON pointer or dotted path (see [`fields`]).
//!    They apply to `structuredContent` when the result has it (its text blocks, which by
//!    MCP convention mirror it, are replaced by the selection as JSON text); otherwise to
//!    each text block that parses as JSON (other text blocks are dropped). A field that
//!    selects nothing is reported in [`Shaped::field_note`], never silently empty. A
//!    result with no JSON at all, or an error result (`isError`), is left whole, with a
//!    note saying fields did not apply.
//! 2. **Budget**: the result is counted as the model would see it: text blocks,
//!    `structuredContent` as JSON, and each image, audio clip or binary resource at a fixed
//!    [`MEDIA_TOKENS`] (the model's cost for media does not depend on its base64 length).
//!    Within budget it is returned unchanged as one page. Over budget:
//!    - what pages is *text*: the text blocks (joined by a blank line), with embedded text
//!      resources inlined after a `[resource <uri>]` line; if there are none, the
//!      `structuredContent` itself, pretty-printed so pages end between lines;
//!    - `structuredContent` is left off the pages (it mirrors the text, or it became it):
//!      a partial JSON object would be worse than none;
//!    - media and resource links cannot be cut, so they stay whole on page one, whose
//!      text budget shrinks by their cost;
//!    - every page keeps [`NOTE_TOKENS`] free for the caller's "page 1 of N, continue
//!      with cursor ..." note.
//!
//! The pages concatenated are exactly the paged text (see [`pages`](super::pages)).

use super::fields::{self, FieldPath};
use super::pages::split_pages_with;
use crate::call::CallOutcome;
use serde_json::{json, Value};

/// The default budget for what one `execute` or `continue` shows the model (o200k tokens).
pub const DEFAULT_BUDGET: usize = 4_000;
/// What an image, audio clip or binary resource counts for.
pub(super) const MEDIA_TOKENS: usize = 800;
/// Kept free on every page for the caller's paging note.
pub(super) const NOTE_TOKENS: usize = 60;

/// A result ready for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaped {
    /// What the model sees now: the whole (field-selected) result, or its first page.
    pub page: CallOutcome,
    /// The pages after the first, as text, for the cursor store. Empty if it all fit.
    pub remaining: Vec<String>,
    /// 1 + `remaining.len()`.
    pub total_pages: usize,
    /// Tokens of the result after field selection: as a client shows it when it fits one
    /// page; when it pages, what the pages hold (their text and the blocks kept whole),
    /// since `structuredContent` is left off them.
    pub original_tokens: usize,
    /// Fields that selected nothing, as the caller wrote them.
    pub missed_fields: Vec<String>,
    /// A sentence for the model about fields that missed or could not apply.
    pub field_note: Option<String>,
}

/// Applies `fields`, then cuts the result into pages of at most `budget` tokens by `count`.
pub fn shape(
    outcome: CallOutcome,
    fields: Option<&[String]>,
    budget: usize,
    count: &dyn Fn(&str) -> usize,
) -> Shaped {
    let mut outcome = outcome;
    let mut selection = Selection::default();
    if let Some(fields) = fields.filter(|f| !f.is_empty()) {
        selection = if outcome.is_error {
            // An error's text says what went wrong; selecting from it would hide that.
            Selection {
                missed: fields.to_vec(),
                note: Some(
                    "fields were not applied: the call failed, so its error is shown whole".into(),
                ),
                rendered: None,
            }
        } else {
            select_fields(&mut outcome, fields)
        };
    }
    let whole_tokens = tokens(&outcome, count);
    let (page, remaining, original_tokens) = if whole_tokens <= budget {
        (outcome, Vec::new(), whole_tokens)
    } else {
        paginate(outcome, selection.rendered.as_ref(), budget, count)
    };
    Shaped {
        page,
        total_pages: 1 + remaining.len(),
        remaining,
        original_tokens,
        missed_fields: selection.missed,
        field_note: selection.note,
    }
}

#[derive(Default)]
struct Selection {
    missed: Vec<String>,
    note: Option<String>,
    /// The JSON the result's single text block was rendered from, to re-render pretty
    /// if it has to be paged.
    rendered: Option<Value>,
}

fn select_fields(outcome: &mut CallOutcome, fields: &[String]) -> Selection {
    let paths: Vec<FieldPath> = fields.iter().map(|f| FieldPath::parse(f)).collect();
    let mut matched = vec![false; paths.len()];
    let hint;
    let mut rendered = None;
    if let Some(sc) = &outcome.structured_content {
        for (m, p) in matched.iter_mut().zip(&paths) {
            *m = p.matches(sc);
        }
        hint = fields::top_keys(sc);
        let sel = fields::select(sc, &paths).unwrap_or_else(|| json!({}));
        outcome.content.retain(|b| text_of(b).is_none());
        outcome.content.insert(0, text_block(sel.to_string()));
        outcome.structured_content = Some(sel.clone());
        rendered = Some(sel);
    } else {
        let parsed: Vec<Option<Value>> = outcome
            .content
            .iter()
            .map(|b| {
                let v = serde_json::from_str::<Value>(text_of(b)?).ok()?;
                (v.is_object() || v.is_array()).then_some(v)
            })
            .collect();
        let Some(first) = parsed.iter().flatten().next() else {
            // Nothing to select from: dropping the text would leave the model nothing.
            return Selection {
                missed: fields.to_vec(),
                note: Some(
                    "fields were not applied: the result is not JSON, so it is shown whole".into(),
                ),
                rendered: None,
            };
        };
        hint = fields::top_keys(first);
        let mut kept = Vec::new();
        for (block, value) in std::mem::take(&mut outcome.content).into_iter().zip(parsed) {
            match value {
                None if text_of(&block).is_none() => kept.push(block),
                None => {} // text that is not JSON: not what the fields asked for
                Some(value) => {
                    for (m, p) in matched.iter_mut().zip(&paths) {
                        *m |= p.matches(&value);
                    }
                    if let Some(sel) = fields::select(&value, &paths) {
                        kept.push(text_block(sel.to_string()));
                        rendered = Some(sel);
                    }
                }
            }
        }
        if kept.iter().filter(|b| text_of(b).is_some()).count() != 1 {
            rendered = None;
        }
        outcome.content = kept;
    }
    let missed: Vec<String> = fields
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(f, _)| f.clone())
        .collect();
    let note = (!missed.is_empty()).then(|| {
        format!(
            "these fields matched nothing: {} ({hint})",
            missed.join(", ")
        )
    });
    Selection {
        missed,
        note,
        rendered,
    }
}

/// Whether `outcome` surely fits `budget` tokens without counting them: a token covers at
/// least one byte, so the bytes of its text blocks and `structuredContent` together bound
/// `tokens` from above (media count `MEDIA_TOKENS` either way). Most results are far
/// below a budget, and counting is the costly part of shaping, so callers ask this first.
pub fn fits_uncounted(outcome: &CallOutcome, budget: usize) -> bool {
    let bytes = |s: &str| s.len();
    let blocks: usize = (outcome.content.iter())
        .map(|b| block_tokens(b, &bytes))
        .sum();
    let structured = (outcome.structured_content.as_ref()).map_or(0, json_len);
    blocks + structured <= budget
}

/// The length of `value`'s compact JSON, counted as it is written, not kept.
fn json_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// The tokens the model would read for `outcome`, on whichever kind of client shows more:
/// one that shows the content blocks, or one that shows only `structuredContent` when
/// there is one (Claude Code, Codex), where the front adds the text blocks that do not
/// merely mirror it (`front/meta_tools.rs::to_result`).
fn tokens(outcome: &CallOutcome, count: &dyn Fn(&str) -> usize) -> usize {
    let blocks: usize = outcome.content.iter().map(|b| block_tokens(b, count)).sum();
    let Some(structured) = &outcome.structured_content else {
        return blocks;
    };
    let extra: usize = (outcome.content.iter())
        .filter_map(text_of)
        .filter(|t| !mirrors(t, structured))
        .map(count)
        .sum();
    blocks.max(count(&structured.to_string()) + extra)
}

/// Whether the text block `text` repeats `structured` rather than adding to it: its JSON
/// (the MCP convention), or one of its string members whole (a file server's
/// `{"content": <the file>}` beside the file's text), which counted twice made a paged
/// result's total about double what its pages hold.
fn mirrors(text: &str, structured: &Value) -> bool {
    let member = |v: &Value| v.as_str() == Some(text);
    match structured {
        Value::Object(map) if map.values().any(member) => true,
        _ => serde_json::from_str::<Value>(text).ok().as_ref() == Some(structured),
    }
}

fn block_tokens(block: &Value, count: &dyn Fn(&str) -> usize) -> usize {
    if let Some(text) = text_of(block) {
        return count(text);
    }
    if let Some(text) = resource_text(block) {
        return count(text);
    }
    match block.get("type").and_then(Value::as_str) {
        Some("image" | "audio" | "resource") => MEDIA_TOKENS,
        _ => count(&block.to_string()),
    }
}

/// Cuts an over-budget result into a first page (with every block that cannot be cut)
/// and the text of the pages after it; with the tokens the pages hold in all.
fn paginate(
    outcome: CallOutcome,
    rendered: Option<&Value>,
    budget: usize,
    count: &dyn Fn(&str) -> usize,
) -> (CallOutcome, Vec<String>, usize) {
    let mut texts = Vec::new();
    let mut whole = Vec::new();
    for block in outcome.content {
        if let Some(t) = text_of(&block) {
            texts.push(t.to_string());
        } else if let Some(t) = resource_text(&block) {
            let uri = block["resource"]["uri"].as_str().unwrap_or("");
            texts.push(format!("[resource {uri}]\n{t}"));
        } else {
            whole.push(block);
        }
    }
    let text = match (rendered, &outcome.structured_content) {
        (Some(json), _) if texts.len() == 1 => pretty(json),
        (_, Some(sc)) if texts.is_empty() => pretty(sc),
        _ => texts.join("\n\n"),
    };
    let fixed: usize = whole.iter().map(|b| block_tokens(b, count)).sum();
    let page_budget = budget.saturating_sub(NOTE_TOKENS).max(1);
    // Page one always gets some text, even beside blocks that alone fill the budget.
    let first_budget = page_budget
        .saturating_sub(fixed)
        .max(page_budget / 4)
        .max(1);
    let held = count(&text) + fixed;
    let mut pages = split_pages_with(&text, first_budget, page_budget, count).into_iter();
    let first = pages.next().unwrap_or_default();
    let mut content = vec![text_block(first)];
    content.extend(whole);
    let page = CallOutcome {
        content,
        structured_content: None,
        is_error: outcome.is_error,
        meta: outcome.meta,
    };
    (page, pages.collect(), held)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// A text content block.
pub fn text_block(text: String) -> Value {
    json!({"type": "text", "text": text})
}

fn text_of(block: &Value) -> Option<&str> {
    if block.get("type")?.as_str()? != "text" {
        return None;
    }
    block.get("text")?.as_str()
}

/// The text of an embedded text resource (`{"type": "resource", "resource": {"text"}}`).
fn resource_text(block: &Value) -> Option<&str> {
    if block.get("type")?.as_str()? != "resource" {
        return None;
    }
    block.get("resource")?.get("text")?.as_str()
}

/// Runs CPU-bound `f` where it does not stall the async runtime: on a multi-threaded
/// runtime the worker hands its other tasks to another thread first (`block_in_place`);
/// a current-thread runtime (tests) runs it as is.
pub fn off_async_worker<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
