//! Cutting text into pages that each fit a token budget, at clean boundaries.
//!
//! Each page is (nearly) the longest prefix of the rest that fits, then pulled back to the
//! last line break in its second half, else the last sentence end, else the last whitespace,
//! else left where it is (always on a char boundary). Only the cut points move: the pages
//! concatenated are exactly the input. A single character that alone exceeds the budget
//! still becomes a page of its own, so paging always ends.
//!
//! One pass: the search for a page's end starts from a guess (the budget times the bytes per
//! token seen so far) and only ever counts text about a page long, so a result is counted a
//! few times over in all, never once per page as a whole. (Counting the whole rest for every
//! page made 4 MiB take half a minute.)

/// Splits `text` into pages of at most `budget` tokens each (by `count`).
/// An empty text is one empty page.
pub fn split_pages(text: &str, budget: usize, count: &dyn Fn(&str) -> usize) -> Vec<String> {
    split_pages_with(text, budget, budget, count)
}

/// Like [`split_pages`], with a smaller budget for the first page (which shares the
/// model's view with the result's images and other blocks).
pub(super) fn split_pages_with(
    text: &str,
    first: usize,
    budget: usize,
    count: &dyn Fn(&str) -> usize,
) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    let mut start = 0;
    // Bytes per token, learned from each page (about 4 for English text in o200k).
    let mut per_token = 4.0_f64;
    loop {
        let budget = if pages.is_empty() { first } else { budget };
        let rest = &text[start..];
        if rest.is_empty() && !pages.is_empty() {
            return pages;
        }
        let guess = (budget as f64 * per_token) as usize;
        let Some((fit, tokens)) = longest_fit(rest, budget, guess, count) else {
            pages.push(rest.to_string());
            return pages;
        };
        per_token = (fit as f64 / tokens.max(1) as f64).clamp(0.25, 64.0);
        let cut = clean_cut(rest, fit);
        // Tokenizers are not strictly monotonic: keep the clean cut only if it fits.
        let end = if cut == fit || count(&rest[..cut]) <= budget {
            cut
        } else {
            fit
        };
        pages.push(rest[..end].to_string());
        start += end;
    }
}

/// `None` when all of `text` fits in `budget`; else a char boundary `end > 0` with
/// `count(&text[..end]) <= budget` and that count, within 1/64 of the longest such prefix
/// (exact for short texts), or the end of the first char if even that does not fit.
/// `guess` is where to start looking.
fn longest_fit(
    text: &str,
    budget: usize,
    guess: usize,
    count: &dyn Fn(&str) -> usize,
) -> Option<(usize, usize)> {
    let len = text.len();
    let first = next_boundary(text, 1);
    // Gallop from the guess until `lo` fits and `hi` does not (`lo` 0: none found yet;
    // `hi` past the end: none found yet).
    let mut lo = (0, 0);
    let mut hi = len + 1;
    let mut probe = next_boundary(text, guess.clamp(1, len.max(1)));
    loop {
        let n = count(&text[..probe]);
        if n <= budget {
            lo = (probe, n);
            if probe >= len {
                return None;
            }
            if hi <= len {
                break;
            }
            probe = next_boundary(text, probe + probe / 4 + 1);
        } else {
            hi = probe;
            if lo.0 > 0 {
                break;
            }
            if probe <= first {
                return Some((first, n));
            }
            probe = floor_boundary(text, probe - probe / 5 - 1).max(first);
        }
    }
    // Halve the gap until it is within 1/64 of what fits.
    while hi - lo.0 > 1 && hi - lo.0 > lo.0 / 64 {
        let half = lo.0 + (hi - lo.0) / 2;
        let mut mid = floor_boundary(text, half);
        if mid <= lo.0 {
            // No boundary in (lo, half]: try the first one after it.
            mid = next_boundary(text, half);
            if mid >= hi {
                break;
            }
        }
        let n = count(&text[..mid]);
        if n <= budget {
            lo = (mid, n);
        } else {
            hi = mid;
        }
    }
    Some(lo)
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
        for guess in [0, 1, 5, 9, 100] {
            assert_eq!(longest_fit(text, 9, guess, &bytes), Some((9, 9)));
            assert_eq!(
                longest_fit(text, 3, guess, &bytes),
                Some((4, 4)),
                "one char even over budget"
            );
            assert_eq!(longest_fit(text, 10, guess, &bytes), None, "all of it fits");
        }
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
    fn paging_counts_each_byte_a_few_times_not_once_per_page() {
        // 1 MiB of text cut into ~250 pages: counting the whole rest for each page would
        // count about 125 MiB; one pass counts a small multiple of the text.
        let line = "The quick brown fox jumps over the lazy dog, again and again.\n";
        let text = line.repeat((1 << 20) / line.len());
        let counted = std::cell::Cell::new(0usize);
        let count = |s: &str| {
            counted.set(counted.get() + s.len());
            chars4(s)
        };
        let pages = split_pages(&text, 1000, &count);
        assert!(pages.len() > 200, "{} pages", pages.len());
        assert_eq!(pages.concat(), text);
        let times = counted.get() as f64 / text.len() as f64;
        assert!(times < 20.0, "counted the text {times:.1} times over");
        // Pages are nearly full: the search stops within 1/64 of the longest fit.
        assert!(pages[..pages.len() - 1].iter().all(|p| chars4(p) > 900));
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
