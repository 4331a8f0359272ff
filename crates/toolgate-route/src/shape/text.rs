//! Description text: sentence splitting and cutting at a clean sentence boundary.

/// The sentences of `text` in order, each trimmed, with their original end punctuation.
/// A sentence ends at `.`, `!` or `?` followed by whitespace, or at a line break, so
/// list items and "Key: value" lines count as sentences of their own.
pub(super) fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let ends = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_some_and(|b| b.is_ascii_whitespace())
                && !ends_with_abbreviation(&line[start..i]);
            if ends {
                push_trimmed(&mut out, &line[start..=i]);
                start = i + 1;
            }
        }
        push_trimmed(&mut out, &line[start..]);
    }
    out
}

/// "e.g." and the like end a word, not a sentence.
fn ends_with_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    ["e.g", "i.e", "etc", "vs", "approx", "incl", "cf"]
        .contains(&word.to_ascii_lowercase().as_str())
}

fn push_trimmed<'a>(out: &mut Vec<&'a str>, s: &'a str) {
    let s = s.trim();
    if !s.is_empty() {
        out.push(s);
    }
}

/// `text` if it has at most `max` characters; otherwise the longest run of whole
/// leading sentences that fits (joined by spaces, line breaks kept as `\n`). When not even
/// the first sentence fits, it is cut at the last word boundary and ends with `…`.
pub(super) fn cut_at_sentence(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    // Walk the original text so the kept part keeps its own separators.
    let mut kept_end = 0;
    let mut pos = 0;
    for s in sentences(text) {
        let Some(found) = text[pos..].find(s) else {
            break;
        };
        let end = pos + found + s.len();
        if text[..end].chars().count() > max {
            break;
        }
        kept_end = end;
        pos = end;
    }
    if kept_end > 0 {
        return text[..kept_end].trim_end().to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(p) if p > 0 => &cut[..p],
        _ => &cut,
    };
    format!(
        "{}…",
        cut.trim_end_matches(|c: char| c.is_whitespace() || c == ',')
    )
}

/// Appends `note` to a description, as a sentence of its own.
pub(super) fn append_note(description: Option<&str>, note: &str) -> String {
    match description.map(str::trim).filter(|d| !d.is_empty()) {
        None => note.to_string(),
        Some(d) if d.ends_with(['.', '!', '?']) => format!("{d} {note}"),
        Some(d) => format!("{d}. {note}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sentences_and_lines() {
        let s = sentences("List pods. Uses the v1 API!\nError Responses:\n400: Bad request");
        assert_eq!(
            s,
            vec![
                "List pods.",
                "Uses the v1 API!",
                "Error Responses:",
                "400: Bad request"
            ]
        );
        assert_eq!(
            sentences("version 1.2 is fine"),
            vec!["version 1.2 is fine"]
        );
    }

    #[test]
    fn cuts_at_a_sentence_boundary() {
        let t = "First sentence here. Second one is longer than the limit allows.";
        assert_eq!(cut_at_sentence(t, 30), "First sentence here.");
        assert_eq!(cut_at_sentence(t, 500), t);
        let long = "one two three four five six seven";
        let c = cut_at_sentence(long, 15);
        assert_eq!(c, "one two three…");
        assert!(c.chars().count() <= 15);
        assert_eq!(cut_at_sentence("A.\nB is here.", 3), "A.");
    }

    #[test]
    fn appends_notes() {
        assert_eq!(append_note(Some("Name"), "Max 5."), "Name. Max 5.");
        assert_eq!(append_note(Some("Name."), "Max 5."), "Name. Max 5.");
        assert_eq!(append_note(None, "Max 5."), "Max 5.");
    }
}
