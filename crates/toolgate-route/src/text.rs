//! Text analysis for routing: identifier splitting, lowercasing, stop words, English stemming,
//! character bigrams for scripts written without spaces.
//!
//! Documents and queries go through the same `Analyzer`, so a query typed as prose
//! ("create an issue") and one typed as an identifier (`createIssue`, `create_issue`)
//! meet on the same terms. A compound identifier also keeps its whole lowercased form as a
//! term, so typing a tool's name verbatim scores higher than typing its words.

use rust_stemmers::{Algorithm, Stemmer};
use std::cell::RefCell;

/// English words too common to tell tools apart (a classic short list plus the request
/// fillers models and users put around a task: "can you please help me ...").
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as",
    "at", "be", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
    "did", "do", "does", "doing", "down", "during", "each", "etc", "few", "for", "from", "further",
    "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "itself", "just", "let", "me", "might", "more", "most",
    "must", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other",
    "our", "ours", "out", "over", "own", "please", "same", "she", "should", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "under", "until", "up", "us", "very", "via", "want", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "would", "you", "your", "yours", "yourself",
];

/// True for a lowercase word that carries no routing signal.
pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Scripts written without spaces between words (or, for Hangul, with particles glued to
/// them), so they are indexed as character bigrams: CJK ideographs (with the extensions),
/// kana, Hangul, Thai, Lao, Myanmar and Khmer. A stemmer or word list for each would
/// depend on a dictionary; bigrams match any text of the same script.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF     // Thai, Lao
        | 0x1000..=0x109F   // Myanmar
        | 0x1780..=0x17FF   // Khmer
        | 0x1100..=0x11FF   // Hangul Jamo
        | 0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3130..=0x318F   // Hangul compatibility Jamo
        | 0x3400..=0x4DBF   // CJK extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK compatibility ideographs
        | 0x20000..=0x3134F // CJK extensions B-G
    )
}

/// Characters that join the parts of an identifier (`snake_case`, `kebab-case`, `a.b`, `s/t`).
fn is_joiner(c: char) -> bool {
    matches!(c, '_' | '-' | '.' | '/')
}

/// Splits an identifier into its words: on `_ - . /` and on camelCase boundaries, keeping
/// acronyms together (`HTMLParser` -> `HTML`, `Parser`) and digits with their letters
/// (`base64`, `s3`). Returns slices of `ident`; empty parts are dropped.
pub(crate) fn split_identifier(ident: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for piece in ident.split(is_joiner).filter(|p| !p.is_empty()) {
        let chars: Vec<(usize, char)> = piece.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (pos, c) = chars[i];
            let prev = chars[i - 1].1;
            let next_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
            // aB starts a word; in ABc the B starts one (end of an acronym).
            let boundary = c.is_uppercase()
                && (prev.is_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_uppercase() && next_lower));
            if boundary {
                out.push(&piece[start..pos]);
                start = pos;
            }
        }
        out.push(&piece[start..]);
    }
    out
}

/// Longer runs are not words or identifiers (exposed names are at most 64 characters) but
/// data pasted into a task: base64, hashes, keys. They are skipped, which also bounds
/// the work a pasted blob can cause.
pub(crate) const MAX_WORD: usize = 64;

/// Only this much of a task is analysed: enough for any real task, and a bound on the
/// work a pasted document can cause on the request path.
pub(crate) const MAX_TASK_BYTES: usize = 8 * 1024;
/// `s` cut to at most `max` bytes at a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Most stems a thread keeps (a few MB at most); a catalog's and its tasks' words are fewer.
const MAX_STEMS: usize = 1 << 15;

/// The maps route looks words up in on every call (the index's terms, the stems, the
/// learned examples' vocabulary): std's `HashMap` with foldhash's hasher, which is seeded
/// at random per process as std's is, and hashes a short word in a fraction of SipHash's
/// time.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

thread_local! {
    /// Lowercased word -> its stem, made by [`Analyzer::word`] on this thread.
    static STEMS: RefCell<Map<String, String>> = RefCell::new(Map::default());
}

/// Turns text into index terms. Cheap to build; holds the stemmer.
pub(crate) struct Analyzer {
    /// Snowball English: "issues", "issued" and "issue" all become "issu".
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for Analyzer {
    // The stemmer holds no state worth copying.
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Analyzer(english)")
    }
}

impl Analyzer {
    pub(crate) fn new() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// One word, lowercased and stemmed; `None` for stop words and lone letters.
    pub(crate) fn word(&self, word: &str) -> Option<String> {
        let lower = word.to_lowercase();
        let single_letter =
            lower.chars().count() == 1 && !lower.chars().all(|c| c.is_ascii_digit());
        if single_letter || is_stop_word(&lower) {
            return None;
        }
        // Stemming is a large part of analysing text, and route analyses the same words on
        // every call (the task for each part of the decision, the top tools' descriptions,
        // the learned examples' votes): each thread keeps the stems it made. The stem of a
        // word is always the same, so this changes no term.
        STEMS.with(|stems| {
            let mut stems = stems.borrow_mut();
            if let Some(stem) = stems.get(&lower) {
                return Some(stem.clone());
            }
            let stem = self.stemmer.stem(&lower).into_owned();
            if stems.len() >= MAX_STEMS {
                // A simple bound: past it the cache starts again rather than growing.
                stems.clear();
            }
            stems.insert(lower, stem.clone());
            Some(stem)
        })
    }

    /// Appends the terms of `text` to `out`. Words are stemmed; a compound identifier adds
    /// its whole lowercased form first; CJK runs become character bigrams. The stemmed
    /// words of each chunk also go to `words` (in order) when given, for phrase bigrams.
    pub(crate) fn terms(
        &self,
        text: &str,
        out: &mut Vec<String>,
        mut words: Option<&mut Vec<String>>,
    ) {
        let mut cjk = String::new();
        // Marks of those scripts (Thai tone marks, vowel signs) are not alphanumeric but part
        // of the word.
        for chunk in text.split(|c: char| !(c.is_alphanumeric() || is_joiner(c) || is_cjk(c))) {
            let chunk = chunk.trim_matches(is_joiner);
            if chunk.is_empty() {
                continue;
            }
            if chunk.chars().any(is_cjk) {
                // Mixed runs like "GitHub仓库": split letters from ideographs first.
                for part in split_runs(chunk) {
                    if part.chars().next().is_some_and(is_cjk) {
                        cjk.clear();
                        cjk.push_str(part);
                        push_cjk_bigrams(&cjk, out);
                    } else {
                        self.chunk_terms(part, out, words.as_deref_mut());
                    }
                }
                continue;
            }
            self.chunk_terms(chunk, out, words.as_deref_mut());
        }
    }

    fn chunk_terms(&self, chunk: &str, out: &mut Vec<String>, words: Option<&mut Vec<String>>) {
        if chunk.chars().count() > MAX_WORD {
            return;
        }
        let parts = split_identifier(chunk);
        if parts.len() > 1 {
            out.push(chunk.to_lowercase());
        }
        let mut stemmed = Vec::with_capacity(parts.len());
        for part in parts {
            if let Some(t) = self.word(part) {
                stemmed.push(t);
            }
        }
        out.extend(stemmed.iter().cloned());
        if let Some(w) = words {
            w.extend(stemmed);
        }
    }

    /// The terms of `text` as a new vector (no phrase words).
    pub(crate) fn analyze(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.terms(text, &mut out, None);
        out
    }
}

/// Splits a chunk into maximal runs of CJK and of other characters.
fn split_runs(chunk: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev: Option<bool> = None;
    for (i, c) in chunk.char_indices() {
        let k = is_cjk(c);
        if prev.is_some_and(|p| p != k) {
            out.push(&chunk[start..i]);
            start = i;
        }
        prev = Some(k);
    }
    out.push(&chunk[start..]);
    out.into_iter()
        .map(|s| s.trim_matches(is_joiner))
        .filter(|s| !s.is_empty())
        .collect()
}

fn push_cjk_bigrams(run: &str, out: &mut Vec<String>) {
    let chars: Vec<char> = run.chars().collect();
    if chars.len() == 1 {
        out.push(run.to_string());
    }
    for w in chars.windows(2) {
        out.push(w.iter().collect());
    }
}

/// The phrase term for two adjacent words. A space never occurs inside a word term, so
/// phrase terms cannot collide with words.
pub(crate) fn bigram(a: &str, b: &str) -> String {
    let mut s = String::with_capacity(a.len() + b.len() + 1);
    s.push_str(a);
    s.push(' ');
    s.push_str(b);
    s
}

/// Splits a task into its clauses: at sentence and clause punctuation followed by a space,
/// and at "then" and "and". At most 8, so a long task bounds the extra work.
pub(crate) fn clauses(query: &str) -> Vec<&str> {
    // Cuts happen only at ASCII bytes, so every slice is on a char boundary.
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = query.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let punct = matches!(bytes[i], b'.' | b'?' | b'!' | b';' | b',' | b'\n')
            && bytes.get(i + 1).is_none_or(|c| c.is_ascii_whitespace());
        let word = [" and ", " then "]
            .iter()
            .find(|w| bytes[i..].starts_with(w.as_bytes()))
            .map(|w| w.len());
        if punct || word.is_some() {
            out.push(&query[start..i]);
            i += word.unwrap_or(1);
            start = i;
        } else {
            i += 1;
        }
    }
    out.push(&query[start..]);
    out.retain(|c| c.chars().filter(|c| c.is_alphanumeric()).count() > 2);
    out.truncate(8);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_stop_word("the") && is_stop_word("please") && !is_stop_word("issue"));
    }

    #[test]
    fn splits_every_identifier_style() {
        assert_eq!(
            split_identifier("create_pull_request"),
            ["create", "pull", "request"]
        );
        assert_eq!(
            split_identifier("createPullRequest"),
            ["create", "Pull", "Request"]
        );
        assert_eq!(
            split_identifier("browser-take-screenshot"),
            ["browser", "take", "screenshot"]
        );
        assert_eq!(
            split_identifier("azmcp.storage.list"),
            ["azmcp", "storage", "list"]
        );
        assert_eq!(split_identifier("HTMLParser"), ["HTML", "Parser"]);
        assert_eq!(
            split_identifier("getS3Object_v2"),
            ["get", "S3", "Object", "v2"]
        );
        assert_eq!(split_identifier("base64"), ["base64"]);
        assert_eq!(split_identifier("github/get_me"), ["github", "get", "me"]);
    }

    #[test]
    fn stems_and_drops_stop_words() {
        let a = Analyzer::new();
        assert_eq!(
            a.analyze("Lists the issues of a repository"),
            ["list", "issu", "repositori"]
        );
        assert_eq!(
            a.analyze("listing issued repositories"),
            ["list", "issu", "repositori"]
        );
        assert_eq!(a.analyze("Can you please help me?"), ["help"]);
    }

    #[test]
    fn compound_names_keep_the_whole_name() {
        let a = Analyzer::new();
        assert_eq!(a.analyze("list_issues"), ["list_issues", "list", "issu"]);
        assert_eq!(
            a.analyze("`kubectlScale`"),
            ["kubectlscale", "kubectl", "scale"]
        );
        assert_eq!(a.analyze("end. of-"), ["end"]);
        let blob = "iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6AAAABHNCSVQICAgIfAhkiA";
        assert_eq!(a.analyze(&format!("what is {blob}")), Vec::<String>::new());
    }

    #[test]
    fn cjk_becomes_bigrams() {
        let a = Analyzer::new();
        assert_eq!(a.analyze("搜索结果"), ["搜索", "索结", "结果"]);
        assert_eq!(a.analyze("Bing搜索"), ["bing", "搜索"]);
        // Other scripts without spaces, and Hangul with its particles.
        assert_eq!(
            a.analyze("สภาพอากาศ"),
            ["สภ", "ภา", "าพ", "พอ", "อา", "าก", "กา", "าศ"]
        );
        assert_eq!(a.analyze("날씨를"), ["날씨", "씨를"]);
        assert_eq!(a.analyze("ค้นหา"), ["ค้", "้น", "นห", "หา"]);
        assert_eq!(a.analyze("東京の天気"), ["東京", "京の", "の天", "天気"]);
    }

    #[test]
    fn words_feed_phrases() {
        let a = Analyzer::new();
        let (mut t, mut w) = (Vec::new(), Vec::new());
        a.terms("Take a screenshot of the page", &mut t, Some(&mut w));
        assert_eq!(w, ["take", "screenshot", "page"]);
        assert_eq!(bigram(&w[0], &w[1]), "take screenshot");
    }

    #[test]
    fn tasks_split_into_clauses() {
        assert_eq!(
            clauses("Read /root/a.xlsx, plot it as a bar chart and save it. Then tell me"),
            [
                "Read /root/a.xlsx",
                " plot it as a bar chart",
                "save it",
                " Then tell me"
            ]
        );
        assert_eq!(clauses("list issues"), ["list issues"]);
        assert_eq!(clauses("搜索结果, and 北京天气"), ["搜索结果", "北京天气"]);
    }
}
