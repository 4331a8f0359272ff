//! Cutting text into pages that each fit a token budget, at clean boundaries.
//!
//! Each page is the longest prefix of the rest that fits (found by binary search over
//! char boundaries, counting with the caller's tokenizer), then pulled back to the last
//! line break in its second half, else the last sentence end, else the last whitespace,
//! else left where it is (always on a char boundary). Only the cut points move: the
//! pages concatenated are exactly the input. A single character that alone exceeds the
//! budget still becomes a page of its own, so paging always ends.

/// Splits `text` into pages of at most `budget` tokens each (by `count`).
/// An empty text is one empty page.
pub fn split_pages(text: &str, budget: usize, count: &dyn Fn(&str) -> usize) -> Vec<String> {
    split_pages_with(text, budget, budget, count)
}

/// Like [`split_pages`], with a smaller budget for the first page (which shares the
/// model's view with the result's images and other blocks).
pub fn split_pages_with(
    text: &str,
    first: usize,
    budget: usize,
    count: &dyn Fn(&str) -> usize,
) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    let mut start = 0;
    loop {
        let budget = if pages.is_empty() { first } else { budget };
        let rest = &text[start..];
        if rest.is_empty() && !pages.is_empty() {
            return pages;
        }
        if count(rest) <= budget {
            pages.push(rest.to_string());
            return pages;
        }
        let fit = longest_fit(rest, budget, count);
        let cut = clean_cut(rest, fit);
        // Tokenizers are not strictly monotonic: keep the clean cut only if it fits.
        let end = if count(&rest[..cut]) <= budget {
            cut
        } else {
            fit
        };
        pages.push(rest[..end].to_string());
        start += end;
    }
}

/// The largest char boundary `end > 0` with `count(&text[..end]) <= budget`, or the end
/// of the first char if even that does not fit.
fn longest_fit(text: &str, budget: usize, count: &dyn Fn(&str) -> usize) -> usize {
    let first = next_boundary(text, 1);
    if count(&text[..first]) > budget {
        return first;
    }
    // Invariant: lo fits, hi does not (the caller checked the whole text does not).
    let (mut lo, mut hi) = (first, text.len());
    while hi - lo > 1 {
        let half = lo + (hi - lo) / 2;
        let mut mid = floor_boundary(text, half);
        if mid <= lo {
            // No boundary in (lo, half]: try the first one after it.
            mid = next_boundary(text, half);
            if mid >= hi {
                break;
            }
        }
        if count(&text[..mid]) <= budget {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The best place at or before `fit` to end a page: after a line break, a sentence end or
/// whitespace found in the second half of `text[..fit]`, else `fit` itself.
fn clean_cut(text: &str, fit: usize) -> usize {
    let head = &text[..fit];
    let half = fit / 2;
    let after = |i: Option<usize>, len: usize| i.map(|i| i + len).filter(|&e| e > half);
    if let Some(e) = after(head.rfind('\n'), 1) {
        return e;
    }
    let sentence = [". ", "! ", "? ", "。", "！", "？"]
        .iter()
        .filter_map(|p| after(head.rfind(p), p.len()))
        .max();
    if let Some(e) = sentence {
        return e;
    }
    let space = head
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map(|(i, c)| (i, c.len_utf8()));
    if let Some(e) = space.and_then(|(i, len)| after(Some(i), len)) {
        return e;
    }
    fit
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn next_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn chars4(s: &str) -> usize {
        s.chars().count().div_ceil(4)
    }

    fn words(s: &str) -> usize {
        s.split_whitespace().count() + s.matches(|c: char| c.is_ascii_punctuation()).count()
    }

    fn bytes(s: &str) -> usize {
        s.len()
    }

    #[test]
    fn under_budget_is_one_page() {
        assert_eq!(split_pages("short", 10, &chars4), vec!["short"]);
        assert_eq!(split_pages("", 10, &chars4), vec![""]);
    }

    #[test]
    fn prefers_line_breaks_then_sentences_then_spaces() {
        let text = "line one is here\nline two is here\nline three";
        let pages = split_pages(text, 6, &chars4);
        assert_eq!(pages[0], "line one is here\n");
        let text = "First sentence here. Second sentence here. Third one";
        let pages = split_pages(text, 8, &chars4);
        assert_eq!(pages[0], "First sentence here. ");
        let text = "alpha beta gamma delta epsilon zeta eta theta";
        let pages = split_pages(text, 4, &chars4);
        assert_eq!(pages[0], "alpha beta ");
        assert!(pages.iter().all(|p| chars4(p) <= 4));
        assert_eq!(pages.concat(), text);
    }

    #[test]
    fn finds_the_longest_fit_among_wide_chars() {
        // Boundaries at 4, 8, 9, 10: a 4-byte char first, then more.
        let text = "🎉🎉ab";
        assert_eq!(longest_fit(text, 9, &bytes), 9);
        assert_eq!(longest_fit(text, 3, &bytes), 4, "one char even over budget");
    }

    #[test]
    fn never_splits_a_char_and_always_progresses() {
        let text = "ééééé🎉🎉🎉漢字漢字";
        for budget in [0, 1, 2, 3, 5] {
            let pages = split_pages(text, budget, &bytes);
            assert_eq!(pages.concat(), text);
            assert!(pages.iter().all(|p| !p.is_empty()));
        }
    }

    /// Random text from a mix of scripts, separators and emoji.
    fn random_text(rng: &mut StdRng) -> String {
        const PIECES: &[&str] = &[
            "a",
            "word",
            " ",
            "  ",
            "\n",
            "\n\n",
            ". ",
            "! ",
            "é",
            "ß",
            "漢字",
            "。",
            "🎉",
            "👩‍👩‍👧",
            "\t",
            "Ω",
            "долго",
        ];
        let n = rng.random_range(0..400);
        let mut s = String::new();
        for _ in 0..n {
            if rng.random_bool(0.1) {
                s.push(char::from_u32(rng.random_range(0x20..0x2FFFF)).unwrap_or('?'));
            } else {
                s.push_str(PIECES[rng.random_range(0..PIECES.len())]);
            }
        }
        s
    }

    #[test]
    fn pages_rejoin_exactly_and_fit_property() {
        let mut rng = StdRng::seed_from_u64(0x70_01_6a_7e);
        let counters: [&dyn Fn(&str) -> usize; 3] = [&chars4, &words, &bytes];
        for round in 0..600 {
            let text = random_text(&mut rng);
            let budget = rng.random_range(1..60);
            let count = counters[round % counters.len()];
            let pages = split_pages(&text, budget, count);
            assert_eq!(pages.concat(), text, "round {round}");
            for p in &pages {
                // A page over budget may only be a single char that cannot fit anywhere.
                assert!(
                    count(p) <= budget || p.chars().count() == 1,
                    "round {round}: {p:?}"
                );
            }
            assert!(pages.len() == 1 || pages.iter().all(|p| !p.is_empty()));
        }
    }
}
