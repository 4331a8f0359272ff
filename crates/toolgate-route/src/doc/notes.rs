//! A description's notes: what it says to the model ("ALWAYS prefer this tool over ...",
//! "IMPORTANT: call X first") and its examples ("Example: check \"Remember Me\"", "e.g.
//! ..."), apart from what the tool does. A task's words matched only there say little
//! about the tool (a form-filling tool is not a tool for remembering), so they are indexed
//! as their own field at a lower weight.

use std::borrow::Cow;

/// First words of a sentence addressed to the model or giving an example (lowercase).
const OPENERS: &[&str] = &[
    "always",
    "never",
    "important",
    "note",
    "notes",
    "warning",
    "caution",
    "critical",
    "prerequisite",
    "tip",
    "hint",
    "prefer",
    "avoid",
    "example",
    "examples",
    "e.g",
];

/// Two-word openers of the same kind.
const OPENER_PAIRS: &[(&str, &str)] = &[
    ("do", "not"),
    ("don't", ""),
    ("for", "example"),
    ("for", "instance"),
];

/// Markers of an example inside a sentence: from the marker to the end of the sentence
/// (or of the parenthesis it opens in) is the example.
const INLINE: &[&str] = &["e.g.", "for example", "for instance"];

/// Splits a description into what the tool does (the description itself when it has no
/// notes, so its phrase bigrams stay as they were) and its notes, in order.
pub(crate) fn split(description: &str) -> (Cow<'_, str>, Vec<&str>) {
    let (body, notes) = pieces(description);
    if notes.is_empty() {
        return (Cow::Borrowed(description), notes);
    }
    (Cow::Owned(body.concat()), notes)
}

/// The description's pieces: what the tool does, and the notes.
fn pieces(description: &str) -> (Vec<&str>, Vec<&str>) {
    let (mut body, mut notes) = (Vec::new(), Vec::new());
    for sentence in sentences(description) {
        if is_note(sentence) {
            notes.push(sentence);
            continue;
        }
        match inline_example(sentence) {
            Some((start, end)) => {
                body.push(&sentence[..start]);
                notes.push(&sentence[start..end]);
                body.push(&sentence[end..]);
            }
            None => body.push(sentence),
        }
    }
    body.retain(|s| !s.trim().is_empty());
    (body, notes)
}

/// The text cut at line breaks and after `.`, `!` or `?` followed by white space ("e.g."
/// and "i.e." do not end a sentence).
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut cuts = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        let next_space = bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace);
        let end = match b {
            b'\n' => true,
            b'.' | b'!' | b'?' => next_space && !abbreviation(&text[..=i]),
            _ => false,
        };
        if end {
            cuts.push(i + 1);
        }
    }
    let mut start = 0;
    cuts.push(text.len());
    cuts.into_iter().filter_map(move |cut| {
        let piece = &text[start..cut];
        start = cut;
        (!piece.trim().is_empty()).then_some(piece)
    })
}

/// Whether the text ends with an abbreviation whose dot ends no sentence.
fn abbreviation(upto: &str) -> bool {
    let lower = upto.to_ascii_lowercase();
    lower.ends_with("e.g.") || lower.ends_with("i.e.")
}

/// A sentence opening with an instruction to the model or an example.
fn is_note(sentence: &str) -> bool {
    let mut words = sentence
        .split(|c: char| c.is_whitespace() || c == ':' || c == ',')
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''))
        .filter(|w| !w.is_empty());
    let Some(first) = words.next() else {
        return false;
    };
    // A sentence opens with a capital ("Note: ..."); "- note: the note's name" is a list
    // of fields, one of them called "note".
    if !first.starts_with(|c: char| c.is_uppercase()) && first != "e.g" {
        return false;
    }
    let lower = first.to_lowercase();
    if OPENERS.contains(&lower.as_str()) {
        return true;
    }
    let second = words.next().unwrap_or("").to_lowercase();
    if OPENER_PAIRS
        .iter()
        .any(|(a, b)| *a == lower && (b.is_empty() || *b == second))
    {
        return true;
    }
    // "STOP:", "REQUIRED!": a shouted word that heads the sentence.
    let head = sentence.trim_start_matches(|c: char| !c.is_alphanumeric());
    let shouted = first.len() >= 4 && first.chars().all(|c| c.is_ascii_uppercase());
    shouted
        && head
            .get(first.len()..)
            .is_some_and(|rest| rest.starts_with([':', '!']))
}

/// Where an inline example starts and ends in a sentence (`e.g.`, `for example`): to the
/// closing parenthesis when it is inside one, else to the end of the sentence.
fn inline_example(sentence: &str) -> Option<(usize, usize)> {
    let lower = sentence.to_ascii_lowercase();
    let start = INLINE
        .iter()
        .filter_map(|m| {
            lower.match_indices(m).map(|(i, _)| i).find(|&i| {
                // A whole word: not the tail of another one ("some.g." is not "e.g.").
                i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphanumeric()
            })
        })
        .min()?;
    let open = sentence[..start].matches('(').count() > sentence[..start].matches(')').count();
    let end = if open {
        sentence[start..]
            .find(')')
            .map_or(sentence.len(), |i| start + i)
    } else {
        sentence.len()
    };
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_and_examples_are_notes() {
        let d = "Fill out multiple form elements at once. ALWAYS prefer this tool over \
                 multiple individual 'fill' calls. It is significantly faster. Example: Fill \
                 username, password, and check \"Remember Me\" in one call.";
        let (body, notes) = pieces(d);
        assert_eq!(
            body.concat(),
            "Fill out multiple form elements at once. It is significantly faster."
        );
        assert!(notes[0].starts_with(" ALWAYS prefer") && notes[1].contains("Remember Me"));
        let (body, notes) = pieces(
            "Emulate CSS media features, for example switch to the dark scheme. Omitted \
             parameters are left unchanged.",
        );
        assert_eq!(
            body.concat(),
            "Emulate CSS media features,  Omitted parameters are left unchanged."
        );
        assert_eq!(notes, ["for example switch to the dark scheme."]);
        let (body, notes) = pieces("Search files (e.g. by name or glob) in a folder.\nNote: slow.");
        assert_eq!(body.concat(), "Search files () in a folder.");
        assert_eq!(notes, ["e.g. by name or glob", "Note: slow."]);
        let (_, notes) = pieces("⚠️ IMPORTANT: use think first! STOP: read this. Do not loop.");
        assert_eq!(notes.len(), 3, "{notes:?}");
        // What the tool does stays whole.
        let fields = "Saved with the columns:\n- note: The note name.\n- time: in seconds.";
        assert!(pieces(fields).1.is_empty());
        let plain = "Read the entire knowledge graph. Always-on tools say NASA: no.";
        assert_eq!(split(plain), (Cow::Borrowed(plain), vec![]));
        assert!(matches!(split(d).0, Cow::Owned(_)));
    }
}
