//! Task-side synonyms: general English words that tasks and tool descriptions use for the
//! same thing ("open a ticket" for `create_issue`, "what time is it" for the current time).
//!
//! The table is small, written by hand, and belongs to no catalog: software verbs (create,
//! delete, fetch, search, update), common nouns of tool catalogs (issue, image, folder,
//! email) and time words. Only the task is expanded, never a tool's text, and each
//! synonym counts `Bm25fParams::synonym_weight` of a word, so a tool that uses the task's
//! own word still ranks above one that uses a synonym. A synonym the task already has
//! adds nothing.

use super::text::{Analyzer, Map};
use std::sync::OnceLock;

/// Groups of words that mean the same in a task; a word may be in several groups.
const GROUPS: &[&[&str]] = &[
    &["ticket", "issue"],
    &["bug", "issue"],
    &["broken", "bug"],
    &["open", "create"],
    &["create", "make", "new", "generate"],
    &["delete", "remove", "erase", "destroy"],
    &["get", "fetch", "retrieve", "obtain"],
    &["find", "search", "lookup", "locate"],
    &["show", "display", "view"],
    &["update", "edit", "modify", "change"],
    &["email", "mail"],
    &["picture", "image", "photo", "pic"],
    &["folder", "directory"],
    &["repo", "repository"],
    &["calculate", "compute"],
    &["weather", "forecast"],
    &["price", "cost"],
    &["buy", "purchase"],
    &["movie", "film"],
    &["song", "music"],
    &["trip", "travel"],
    &["hotel", "accommodation", "lodging"],
    &["news", "headline"],
    &["appointment", "meeting", "event"],
    &["calendar", "event", "schedule", "agenda"],
];

/// Words that imply others, not the other way round ("tomorrow" is a date, a date is not
/// "tomorrow").
const IMPLIES: &[(&str, &[&str])] = &[
    ("now", &["current"]),
    ("today", &["current", "date", "time"]),
    ("tomorrow", &["date", "time"]),
    ("yesterday", &["date", "time"]),
    ("tonight", &["date", "time"]),
    // Remembering is keeping something in a memory (a knowledge graph, notes, a store):
    // storing, saving, adding or creating an entry there. "memorize" shares its stem with
    // "memorable" (a memorable domain name), so it implies no verbs.
    (
        "remember",
        &["memory", "store", "knowledge", "save", "add", "create"],
    ),
    ("memorize", &["memory", "store", "knowledge"]),
    // The last or latest commits are the commit log.
    ("commits", &["log"]),
];

/// Phrases whose meaning no single word carries: (lowercased words in order, meaning).
const PHRASES: &[(&[&str], &[&str])] = &[
    (&["what", "time"], &["current"]),
    (&["what", "day"], &["current", "date"]),
    (&["what", "date"], &["current"]),
];

/// A verb that means another one next to certain objects ("open a ticket" is creating
/// one, "open a file" is not): (verb, objects, meaning). In a task that has the verb and
/// one of the objects, the meaning counts as a word and the verb as a synonym.
const SENSES: &[(&str, &[&str], &str)] = &[
    (
        "open",
        &[
            "ticket", "issue", "bug", "case", "incident", "account", "pr",
        ],
        "create",
    ),
    (
        "file",
        &["ticket", "issue", "bug", "report", "complaint", "incident"],
        "create",
    ),
    ("raise", &["ticket", "issue", "bug", "incident"], "create"),
    ("submit", &["ticket", "issue", "bug", "incident"], "create"),
];

/// The senses of a task's stemmed words: (verb, its meaning here), both stemmed.
pub(crate) fn senses(analyzer: &Analyzer, words: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (verb, objects, meaning) in SENSES {
        let Some(v) = analyzer.word(verb) else {
            continue;
        };
        let has_object = objects
            .iter()
            .filter_map(|o| analyzer.word(o))
            .any(|o| words.contains(&o));
        if has_object && words.contains(&v) {
            out.extend(analyzer.word(meaning).map(|m| (v, m)));
        }
    }
    out
}

/// Stemmed word -> stemmed synonyms (built once).
fn table() -> &'static Map<String, Vec<String>> {
    static TABLE: OnceLock<Map<String, Vec<String>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let analyzer = Analyzer::new();
        let mut map: Map<String, Vec<String>> = Map::default();
        for group in GROUPS {
            let stems: Vec<String> = group.iter().filter_map(|w| analyzer.word(w)).collect();
            for a in &stems {
                let entry = map.entry(a.clone()).or_default();
                for b in &stems {
                    if a != b && !entry.contains(b) {
                        entry.push(b.clone());
                    }
                }
            }
        }
        for (word, implied) in IMPLIES {
            let Some(a) = analyzer.word(word) else {
                continue;
            };
            let entry = map.entry(a).or_default();
            for b in implied.iter().filter_map(|w| analyzer.word(w)) {
                if !entry.contains(&b) {
                    entry.push(b);
                }
            }
        }
        map
    })
}

/// The synonyms of one stemmed word (none for most words).
pub(crate) fn of(term: &str) -> &'static [String] {
    table().get(term).map_or(&[], Vec::as_slice)
}

/// What phrases of the task mean ("what time is it" asks for the current time): stemmed
/// terms that count as words of the task. `text` is the task itself (a phrase's words
/// may be stop words).
pub(crate) fn phrases(analyzer: &Analyzer, text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in phrase_meanings(&words(text)).filter_map(|m| analyzer.word(m)) {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// The meanings of the phrases `words` hold, unstemmed, in table order.
fn phrase_meanings(words: &[String]) -> impl Iterator<Item = &'static str> + '_ {
    PHRASES
        .iter()
        .filter(|(phrase, _)| words.windows(phrase.len()).any(|w| w == *phrase))
        .flat_map(|(_, meaning)| meaning.iter().copied())
}

/// The task with the words the table gives its words appended, unstemmed ("list my
/// calendar for tomorrow" gains "event schedule agenda date time"): the task as the
/// ranking reads it, for a reader without stemming (the static vectors).
pub(crate) fn with_meanings(text: &str) -> String {
    let words = words(text);
    let has = |w: &str| words.iter().any(|x| x == w);
    let mut added: Vec<&str> = Vec::new();
    let mut add = |w: &'static str| {
        if !has(w) && !added.contains(&w) {
            added.push(w);
        }
    };
    for group in GROUPS.iter().filter(|g| g.iter().any(|w| has(w))) {
        group.iter().for_each(|w| add(w));
    }
    for (_, implied) in IMPLIES.iter().filter(|(w, _)| has(w)) {
        implied.iter().for_each(|w| add(w));
    }
    phrase_meanings(&words).for_each(&mut add);
    for (verb, objects, meaning) in SENSES {
        if has(verb) && objects.iter().any(|o| has(o)) {
            add(meaning);
        }
    }
    std::iter::once(text)
        .chain(added)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The task's words, lowercased, unstemmed (stop words kept).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The synonyms of a task: stemmed terms the task does not already contain, each once.
/// `terms` are the task's analysed terms.
pub(crate) fn expand(terms: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |s: &str| {
        if !terms.iter().any(|t| t == s) && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    let table = table();
    for t in terms {
        for s in table.get(t).into_iter().flatten() {
            add(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_read_with_its_meanings() {
        assert_eq!(
            with_meanings("List my calendar for tomorrow"),
            "List my calendar for tomorrow event schedule agenda date time"
        );
        assert_eq!(
            with_meanings("what time is it? open a ticket"),
            "what time is it? open a ticket issue create current"
        );
        assert_eq!(
            with_meanings("scale the deployment"),
            "scale the deployment"
        );
    }

    #[test]
    fn tasks_gain_their_synonyms_once() {
        let a = Analyzer::new();
        let task = "open a support ticket about a broken login page";
        let syn = expand(&a.analyze(task));
        assert!(syn.contains(&"issu".to_string()), "{syn:?}");
        assert!(syn.contains(&"creat".to_string()), "{syn:?}");
        let task = "what time is it in Tokyo";
        assert_eq!(phrases(&a, task), ["current"]);
        assert!(expand(&a.analyze(task)).is_empty());
        // A word the task already has is not added again.
        let task = "create an issue for this bug";
        let syn = expand(&a.analyze(task));
        assert!(!syn.contains(&"issu".to_string()) && !syn.contains(&"creat".to_string()));
        assert!(expand(&a.analyze("zebra")).is_empty());
        let words = a.analyze("open a support ticket");
        assert_eq!(
            senses(&a, &words),
            [("open".to_string(), "creat".to_string())]
        );
        assert!(senses(&a, &a.analyze("open the file")).is_empty());
        // Implication goes one way.
        assert!(of("tomorrow").contains(&"time".to_string()) && of("time").is_empty());
    }
}
