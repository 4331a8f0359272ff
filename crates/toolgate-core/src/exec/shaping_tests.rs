//! Tests of `shape`: fields, budgets and the handling of every kind of block.

use super::shaping::*;
use crate::call::CallOutcome;
use serde_json::{json, Value};

/// About four characters a token, like o200k on English prose.
fn count(s: &str) -> usize {
    s.chars().count().div_ceil(4)
}

fn text_result(text: &str) -> CallOutcome {
    CallOutcome {
        content: vec![text_block(text.to_string())],
        ..Default::default()
    }
}

fn page_text(o: &CallOutcome) -> String {
    o.content
        .iter()
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect()
}

fn fields(f: &[&str]) -> Vec<String> {
    f.iter().map(|s| s.to_string()).collect()
}

fn prose(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("Line {i}: the quick brown fox jumps over the lazy dog.\n"))
        .collect()
}

#[test]
fn under_budget_is_returned_unchanged() {
    let o = CallOutcome {
        content: vec![text_block("hello".into())],
        structured_content: Some(json!({"a": 1})),
        is_error: true,
        meta: Some(json!({"m": 1})),
    };
    let s = shape(o.clone(), None, DEFAULT_BUDGET, &count);
    assert_eq!(s.page, o);
    assert_eq!((s.total_pages, s.remaining.len()), (1, 0));
    assert_eq!(s.original_tokens, count("hello") + count(r#"{"a":1}"#));
}

#[test]
fn over_budget_pages_rejoin_exactly_and_fit() {
    let text = prose(400);
    let budget = 500;
    let s = shape(text_result(&text), None, budget, &count);
    assert!(s.total_pages > 1);
    assert_eq!(s.total_pages, 1 + s.remaining.len());
    assert_eq!(s.original_tokens, count(&text));
    let first = page_text(&s.page);
    assert!(first.ends_with('\n'), "cut at a line break");
    let all: Vec<&str> = std::iter::once(first.as_str())
        .chain(s.remaining.iter().map(String::as_str))
        .collect();
    assert_eq!(all.concat(), text);
    assert!(all.iter().all(|p| count(p) + NOTE_TOKENS <= budget));
}

#[test]
fn structured_only_results_page_as_pretty_json() {
    let items: Vec<Value> = (0..300)
        .map(|i| json!({"id": i, "title": format!("issue {i}")}))
        .collect();
    let sc = json!({"items": items});
    let o = CallOutcome {
        structured_content: Some(sc.clone()),
        ..Default::default()
    };
    let s = shape(o, None, 400, &count);
    assert!(s.total_pages > 1);
    assert_eq!(s.page.structured_content, None);
    let joined = page_text(&s.page) + &s.remaining.concat();
    assert_eq!(joined, serde_json::to_string_pretty(&sc).unwrap());
    assert!(page_text(&s.page).ends_with('\n'));
}

#[test]
fn structured_with_text_mirror_pages_the_text_and_drops_structured() {
    let sc = json!({"log": prose(200)});
    let o = CallOutcome {
        content: vec![text_block(sc.to_string())],
        structured_content: Some(sc.clone()),
        ..Default::default()
    };
    let s = shape(o, None, 600, &count);
    assert_eq!(s.page.structured_content, None);
    assert_eq!(page_text(&s.page) + &s.remaining.concat(), sc.to_string());
}

/// A file server's answer: the file as text, and again as `{"content": <file>}`. The
/// total the first page reports is what the pages hold, not the two copies added up.
#[test]
fn a_paged_total_counts_what_the_pages_hold_once() {
    let text = prose(400);
    let o = CallOutcome {
        content: vec![text_block(text.clone())],
        structured_content: Some(json!({"content": text})),
        ..Default::default()
    };
    let s = shape(o, None, 500, &count);
    assert!(s.total_pages > 2);
    assert_eq!(page_text(&s.page) + &s.remaining.concat(), text);
    let held: usize = std::iter::once(page_text(&s.page).as_str())
        .chain(s.remaining.iter().map(String::as_str))
        .map(count)
        .sum();
    assert_eq!(s.original_tokens, count(&text));
    assert!(
        s.original_tokens.abs_diff(held) <= s.total_pages,
        "{} reported, {held} held",
        s.original_tokens
    );
    // Structured content that is only the text's JSON pages as that text, counted once.
    let sc = json!({"items": prose(200).lines().collect::<Vec<_>>()});
    let o = CallOutcome {
        content: vec![text_block(sc.to_string())],
        structured_content: Some(sc.clone()),
        ..Default::default()
    };
    let s = shape(o, None, 400, &count);
    assert!(s.total_pages > 1);
    assert_eq!(s.original_tokens, count(&sc.to_string()));
}

#[test]
fn media_stays_whole_on_page_one_and_costs_a_fixed_amount() {
    let image = json!({"type": "image", "data": "A".repeat(200_000), "mimeType": "image/png"});
    let small = CallOutcome {
        content: vec![text_block("caption".into()), image.clone()],
        ..Default::default()
    };
    let s = shape(small.clone(), None, DEFAULT_BUDGET, &count);
    assert_eq!(s.page, small, "a big base64 image alone does not page");
    assert_eq!(s.original_tokens, count("caption") + MEDIA_TOKENS);

    let text = prose(300);
    let big = CallOutcome {
        content: vec![text_block(text.clone()), image.clone()],
        ..Default::default()
    };
    let s = shape(big, None, 1500, &count);
    assert!(s.page.content.contains(&image));
    let first = page_text(&s.page);
    assert!(count(&first) + MEDIA_TOKENS + NOTE_TOKENS <= 1500);
    assert_eq!(first + &s.remaining.concat(), text);
}

#[test]
fn multiple_text_blocks_and_text_resources_join_into_one_stream() {
    let o = CallOutcome {
        content: vec![
            text_block(prose(50)),
            json!({"type": "resource", "resource": {"uri": "file:///a.txt", "text": prose(50)}}),
            json!({"type": "resource_link", "uri": "file:///b", "name": "b"}),
        ],
        ..Default::default()
    };
    let s = shape(o, None, 300, &count);
    let joined = page_text(&s.page) + &s.remaining.concat();
    assert_eq!(
        joined,
        format!("{}\n\n[resource file:///a.txt]\n{}", prose(50), prose(50))
    );
    assert_eq!(s.page.content[1]["type"], "resource_link");
}

#[test]
fn fields_apply_to_structured_content_by_pointer_and_path() {
    let sc = json!({"total": 2, "items": [
        {"title": "a", "body": "x".repeat(500)},
        {"title": "b", "body": "y".repeat(500)}
    ]});
    let o = CallOutcome {
        content: vec![text_block(sc.to_string())],
        structured_content: Some(sc),
        ..Default::default()
    };
    for f in [
        &["items.*.title", "/total"][..],
        &["/items/*/title", "total"][..],
    ] {
        let s = shape(o.clone(), Some(&fields(f)), DEFAULT_BUDGET, &count);
        let want = json!({"total": 2, "items": [{"title": "a"}, {"title": "b"}]});
        assert_eq!(s.page.structured_content, Some(want.clone()));
        assert_eq!(page_text(&s.page), want.to_string());
        assert!(s.missed_fields.is_empty() && s.field_note.is_none());
    }
    let s = shape(
        o,
        Some(&fields(&["items.0.title", "nope.x"])),
        DEFAULT_BUDGET,
        &count,
    );
    assert_eq!(
        s.page.structured_content,
        Some(json!({"items": [{"title": "a"}]}))
    );
    assert_eq!(s.missed_fields, vec!["nope.x"]);
    let note = s.field_note.unwrap();
    assert!(
        note.contains("nope.x") && note.contains("top-level keys: total, items"),
        "{note}"
    );
}

#[test]
fn fields_apply_to_json_text_blocks_and_drop_the_rest() {
    let o = CallOutcome {
        content: vec![
            text_block("Here are your results:".into()),
            text_block(json!({"items": [{"title": "a", "body": "b"}]}).to_string()),
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
        ],
        ..Default::default()
    };
    let s = shape(o, Some(&fields(&["items.0.title"])), DEFAULT_BUDGET, &count);
    assert_eq!(s.page.content.len(), 2);
    assert_eq!(page_text(&s.page), r#"{"items":[{"title":"a"}]}"#);
    assert_eq!(s.page.content[1]["type"], "image");
    let s = shape(
        text_result(r#"{"a": 1}"#),
        Some(&fields(&["b"])),
        DEFAULT_BUDGET,
        &count,
    );
    assert_eq!(s.missed_fields, vec!["b"]);
    assert!(s.page.content.is_empty(), "nothing selected, nothing shown");
}

#[test]
fn fields_on_plain_text_leave_it_whole_with_a_note() {
    let o = text_result("just words");
    let s = shape(o.clone(), Some(&fields(&["a"])), DEFAULT_BUDGET, &count);
    assert_eq!(s.page, o);
    assert_eq!(s.missed_fields, vec!["a"]);
    assert!(s.field_note.unwrap().contains("not JSON"));
}

#[test]
fn selected_json_over_budget_pages_pretty() {
    let items: Vec<Value> = (0..400)
        .map(|i| json!({"title": format!("t{i}"), "n": i}))
        .collect();
    let s = shape(
        text_result(&json!({"items": items}).to_string()),
        Some(&fields(&["items.*.title"])),
        300,
        &count,
    );
    assert!(s.total_pages > 1);
    let joined = page_text(&s.page) + &s.remaining.concat();
    let back: Value = serde_json::from_str(&joined).unwrap();
    assert_eq!(back["items"].as_array().unwrap().len(), 400);
    assert_eq!(back["items"][7], json!({"title": "t7"}));
}

#[test]
fn fields_leave_error_results_whole() {
    let mut o = text_result(r#"{"error": "not found"}"#);
    o.is_error = true;
    let s = shape(o.clone(), Some(&fields(&["items"])), DEFAULT_BUDGET, &count);
    assert_eq!(s.page, o);
    assert!(s.field_note.unwrap().contains("the call failed"));
}

/// The real o200k tokenizer: not monotonic in prefixes, so the "fits" re-check matters.
#[test]
fn pages_fit_the_real_o200k_budget() {
    let bpe = tiktoken_rs::o200k_base_singleton();
    let count = |s: &str| bpe.encode_ordinary(s).len();
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(&format!(
            "{i}. Straße 漢字 «résumé» — {} tokens; 🎉\n",
            "lorem ipsum ".repeat(i % 7)
        ));
    }
    let budget = 700;
    let s = shape(text_result(&text), None, budget, &count);
    assert!(s.total_pages > 2);
    assert_eq!(s.original_tokens, count(&text));
    let first = page_text(&s.page);
    assert!(count(&first) + NOTE_TOKENS <= budget);
    assert!(s.remaining.iter().all(|p| count(p) + NOTE_TOKENS <= budget));
    assert!(first.ends_with('\n') && s.remaining[0].ends_with('\n'));
    assert_eq!(first + &s.remaining.concat(), text);
}

/// `fits_uncounted` never says a result fits that the real o200k count says does not:
/// bytes bound tokens from above, for every script, with structured content and media.
#[test]
fn fitting_by_bytes_is_never_wrong_about_the_real_count() {
    let bpe = tiktoken_rs::o200k_base_singleton();
    let count = |s: &str| bpe.encode_ordinary(s).len();
    let samples = [
        "hello",
        "Straße 漢字 «résumé» — 🎉🎉🎉",
        "ข้อความภาษาไทย 한국어 텍스트 中文文本",
        "{\"a\": [1, 2, 3], \"b\": \"x\"}",
        "                                              ",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ];
    for text in samples {
        let o = CallOutcome {
            content: vec![
                text_block(text.to_string()),
                json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
            ],
            structured_content: Some(json!({"text": text})),
            ..Default::default()
        };
        let exact = shape(o.clone(), None, usize::MAX, &count).original_tokens;
        for budget in [
            exact.saturating_sub(1),
            exact,
            exact + 1,
            4 * exact,
            16 * exact,
        ] {
            if fits_uncounted(&o, budget) {
                assert!(
                    exact <= budget,
                    "{text:?}: {exact} tokens said to fit {budget}"
                );
                assert_eq!(shape(o.clone(), None, budget, &count).page, o);
            }
        }
        assert!(fits_uncounted(&o, 16 * exact), "{text:?}: far below budget");
    }
    let long = text_result(&"word ".repeat(2_000));
    assert!(!fits_uncounted(&long, 1_000));
}
