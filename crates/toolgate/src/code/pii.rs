//! PII tokenization (opt-in, `code.pii`): where a run's data leaves the sandbox for the
//! model (result, logs, error), e-mail addresses, phone numbers, IBANs (mod-97 checked),
//! card numbers (Luhn checked) and the values of configured field names become
//! tokens owned by the caller's principal (its API key, else the local identity) such as `[[EMAIL:k7f3q9]]`. A token the model passes back (in a
//! run's `input`, in execute's arguments, in a program's tool arguments) is restored before
//! the tool sees it; an unknown or expired token fails the call, and another principal's is
//! refused as foreign (and audited by the caller).
//!
//! This is a privacy default, not data-loss prevention: a program can encode data (spell
//! it out, base64 it) and it will pass untouched.
//!
//! With a durable store, tokens are also kept there (`stored`), so one handed out before
//! a restart, or by another replica, is restored too.

mod stored;

use regex::Regex;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};
use toolgate_core::principal::{Principal, Refused};

/// How long a token can be passed back.
pub(crate) const TOKEN_TTL: Duration = Duration::from_secs(3600);
/// Tokens kept at most, over all principals (the oldest go first).
const MAX_TOKENS: usize = 100_000;

static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[\[([A-Z]+):([a-z0-9]{6})\]\]").expect("token pattern"));

/// Kinds in the order they are looked for (longer digit runs before shorter ones).
static PATTERNS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    [
        ("EMAIL", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
        ("IBAN", r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"),
        ("CARD", r"\b\d(?:[ -]?\d){12,18}\b"),
        (
            "PHONE",
            r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?)?\b\d{2,4}[ .-]\d{3,4}[ .-]?\d{3,4}\b|\+\d{8,14}\b",
        ),
    ]
    .into_iter()
    .map(|(k, p)| (k, Regex::new(p).expect("pii pattern")))
    .collect()
});

#[derive(Clone)]
struct Entry {
    owner: Principal,
    value: String,
    made: Instant,
    /// The servers whose results held the value (for `[code.flows]` rules).
    origins: BTreeSet<String>,
}

/// PII values seen in a run's tool results, each with the servers whose results held it;
/// keyed by the value's [`canonical`] form, so `Ada@Example.org` is `ada@example.org`.
pub(crate) type Origins = HashMap<String, BTreeSet<String>>;

/// A PII value as flow rules compare it: an e-mail in lower case, a phone or card
/// number its digits, an IBAN its letters and digits in lower case, anything else
/// (`code.pii_fields` values) in lower case with its spaces collapsed. What a rule author
/// means by "the same value": another case or other separators do not make another one.
pub(crate) fn canonical(class: &str, value: &str) -> String {
    match class {
        "EMAIL" => value.trim().to_lowercase(),
        "PHONE" | "CARD" => value.chars().filter(char::is_ascii_digit).collect(),
        "IBAN" => value
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect(),
        _ => value
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase(),
    }
}

/// What to do with a token found in arguments (see [`Vault::restore_with`]).
pub enum Decision {
    Restore,
    /// Leave the token as it is (a program's `input`: the gate decides at the call).
    Keep,
    /// Refuse the whole value, saying why.
    Refuse(String),
}

/// Why tokens could not be restored.
#[derive(Debug)]
pub enum RestoreError {
    /// Unknown, expired or another principal's token.
    Token(Refused),
    /// A flow rule forbids where the value would go.
    Flow(String),
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Token(r) => write!(f, "{r}"),
            Self::Flow(m) => f.write_str(m),
        }
    }
}

/// The PII in `v` as (class, value) pairs: what [`Vault::tokenize`] would replace.
pub(crate) fn found(v: &Value, fields: &[String]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    collect(v, fields, &mut out);
    out
}

fn collect(v: &Value, fields: &[String], out: &mut Vec<(&'static str, String)>) {
    match v {
        Value::String(s) => {
            for (kind, re) in PATTERNS.iter() {
                for m in re.find_iter(s) {
                    if real(kind, m.as_str()) {
                        out.push((kind, m.as_str().to_string()));
                    }
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect(x, fields, out)),
        Value::Object(o) => {
            for (k, x) in o {
                let named = fields.iter().any(|f| f.eq_ignore_ascii_case(k));
                match x {
                    Value::String(s) if named => out.push(("FIELD", s.clone())),
                    Value::Number(n) if named => out.push(("FIELD", n.to_string())),
                    _ => collect(x, fields, out),
                }
            }
        }
        _ => {}
    }
}

/// Whether a pattern's match is the real thing (checksums, digit counts).
fn real(kind: &str, m: &str) -> bool {
    match kind {
        "CARD" => luhn(m),
        "IBAN" => iban(m),
        "PHONE" => (7..=15).contains(&m.chars().filter(char::is_ascii_digit).count()),
        _ => true,
    }
}

/// The tokens handed out, per principal (see [`Principal`]).
#[derive(Default)]
pub struct Vault {
    /// Token text (`[[EMAIL:k7f3q9]]`) to what it stands for.
    tokens: Mutex<HashMap<String, Entry>>,
    /// (owner, value) to its token, so a value keeps one token for its owner.
    by_value: Mutex<HashMap<(Principal, String), String>>,
    /// Where tokens are also kept, if configured.
    durable: Option<Arc<dyn toolgate_core::store::Store>>,
}

impl Vault {
    /// Tokens also kept in `durable`, if given.
    pub fn new(durable: Option<Arc<dyn toolgate_core::store::Store>>) -> Self {
        Self {
            durable,
            ..Self::default()
        }
    }

    /// Replaces PII in every string of `v` (and the whole value of fields named in
    /// `fields`) with tokens owned by `owner`.
    pub fn tokenize(&self, owner: &Principal, v: &mut Value, fields: &[String]) {
        self.tokenize_from(owner, v, fields, &Origins::new())
    }

    /// Like [`Vault::tokenize`], each token remembering the servers `origins` names for
    /// its value.
    pub fn tokenize_from(
        &self,
        owner: &Principal,
        v: &mut Value,
        fields: &[String],
        origins: &Origins,
    ) {
        match v {
            Value::String(s) => *s = self.tokenize_text_from(owner, s, origins),
            Value::Array(a) => a
                .iter_mut()
                .for_each(|x| self.tokenize_from(owner, x, fields, origins)),
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    let named = fields.iter().any(|f| f.eq_ignore_ascii_case(k));
                    match x {
                        Value::String(_) | Value::Number(_) if named => {
                            let text = match &*x {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            *x = Value::String(self.token(owner, "FIELD", &text, origins));
                        }
                        _ => self.tokenize_from(owner, x, fields, origins),
                    }
                }
            }
            _ => {}
        }
    }

    /// PII in `text` replaced by tokens.
    pub fn tokenize_text(&self, owner: &Principal, text: &str) -> String {
        self.tokenize_text_from(owner, text, &Origins::new())
    }

    /// PII in `text` replaced by tokens, each token remembering the servers in `origins` as where its value came from.
    pub fn tokenize_text_from(&self, owner: &Principal, text: &str, origins: &Origins) -> String {
        let mut out = text.to_string();
        for (kind, re) in PATTERNS.iter() {
            if !re.is_match(&out) {
                continue;
            }
            out = re
                .replace_all(&out, |c: &regex::Captures| {
                    let m = &c[0];
                    // Never tokenize inside a token already made.
                    if real(kind, m) && !m.contains("[[") {
                        self.token(owner, kind, m, origins)
                    } else {
                        m.to_string()
                    }
                })
                .into_owned();
        }
        out
    }

    /// Puts back the values of `owner`'s tokens found in the strings of `v`; an unknown,
    /// expired or foreign token is an error naming it.
    pub fn restore(&self, owner: &Principal, v: &mut Value) -> Result<(), Refused> {
        self.restore_with(owner, v, &mut |_, _, _| Decision::Restore)
            .map_err(|e| match e {
                RestoreError::Token(r) => r,
                // Every token is restored here: no rule is asked.
                RestoreError::Flow(m) => Refused::stale(m),
            })
    }

    /// Like [`Vault::restore`], asking `decide` about each token (its text, its class and
    /// the servers its value came from) before it is put back.
    pub fn restore_with(
        &self,
        owner: &Principal,
        v: &mut Value,
        decide: &mut dyn FnMut(&str, &str, &BTreeSet<String>) -> Decision,
    ) -> Result<(), RestoreError> {
        match v {
            Value::String(s) if s.contains("[[") => {
                self.adopt_stored(owner, s).map_err(RestoreError::Token)?;
                let tokens = self.tokens.lock().expect("pii tokens");
                let mut bad = None;
                let mut refused = None;
                let restored =
                    TOKEN.replace_all(s, |c: &regex::Captures| match tokens.get(&c[0]) {
                        Some(e) if e.owner == *owner && e.made.elapsed() <= TOKEN_TTL => {
                            match decide(&c[0], &c[1], &e.origins) {
                                Decision::Restore => e.value.clone(),
                                Decision::Keep => c[0].to_string(),
                                Decision::Refuse(why) => {
                                    refused.get_or_insert(why);
                                    c[0].to_string()
                                }
                            }
                        }
                        found => {
                            let foreign = found.is_some_and(|e| e.owner != *owner);
                            bad.get_or_insert_with(|| (c[0].to_string(), foreign));
                            c[0].to_string()
                        }
                    });
                match bad {
                    Some((t, true)) => return Err(RestoreError::Token(Refused::foreign(format!(
                        "{t} is a token of another caller (a different API key or user): use the value itself"
                    )))),
                    Some((t, false)) => return Err(RestoreError::Token(Refused::stale(format!(
                        "{t} is not a token you hold (unknown or expired): use the value itself, or run the step that produced the token again"
                    )))),
                    None => {}
                }
                if let Some(why) = refused {
                    return Err(RestoreError::Flow(why));
                }
                *s = restored.into_owned();
                Ok(())
            }
            Value::Array(a) => a
                .iter_mut()
                .try_for_each(|x| self.restore_with(owner, x, decide)),
            Value::Object(o) => o
                .values_mut()
                .try_for_each(|x| self.restore_with(owner, x, decide)),
            _ => Ok(()),
        }
    }

    fn token(&self, owner: &Principal, kind: &str, value: &str, origins: &Origins) -> String {
        let key = (owner.clone(), value.to_string());
        let from = origins
            .get(&canonical(kind, value))
            .cloned()
            .unwrap_or_default();
        let mut by_value = self.by_value.lock().expect("pii values");
        let mut tokens = self.tokens.lock().expect("pii tokens");
        if let Some(t) = by_value.get(&key) {
            if let Some(e) = tokens.get_mut(t) {
                e.made = Instant::now();
                e.origins.extend(from);
                let (t, e) = (t.clone(), e.clone());
                drop((tokens, by_value));
                self.keep_stored(&t, &e);
                return t;
            }
        }
        if tokens.len() >= MAX_TOKENS {
            tokens.retain(|_, e| e.made.elapsed() <= TOKEN_TTL);
            if tokens.len() >= MAX_TOKENS {
                if let Some(oldest) = tokens
                    .iter()
                    .min_by_key(|(_, e)| e.made)
                    .map(|(k, _)| k.clone())
                {
                    tokens.remove(&oldest);
                }
            }
            by_value.retain(|_, t| tokens.contains_key(t));
        }
        let token = loop {
            let t = format!("[[{kind}:{}]]", random_id());
            if !tokens.contains_key(&t) {
                break t;
            }
        };
        let entry = Entry {
            owner: owner.clone(),
            value: value.to_string(),
            made: Instant::now(),
            origins: from,
        };
        tokens.insert(token.clone(), entry.clone());
        by_value.insert(key, token.clone());
        drop((tokens, by_value));
        self.keep_stored(&token, &entry);
        token
    }
}

fn random_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..6)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn luhn(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                (d * 2) % 9 + if d == 9 { 9 } else { 0 }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

fn iban(s: &str) -> bool {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let n = match c.to_digit(36) {
            Some(n) => n,
            None => return false,
        };
        for d in n.to_string().chars() {
            rem = (rem * 10 + d.to_digit(10).unwrap_or(0)) % 97;
        }
    }
    rem == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(name: &str) -> Principal {
        Principal::key(name)
    }

    #[test]
    fn finds_and_restores_each_kind() {
        let v = Vault::default();
        let text = "Mail ann@example.com or call +44 20 7946 0958; IBAN GB82 WEST 1234 5698 7654 32; card 4111 1111 1111 1111; order 1234567890123 stays.";
        let t = v.tokenize_text(&p("s1"), text);
        for kind in ["EMAIL", "PHONE", "IBAN", "CARD"] {
            assert!(t.contains(&format!("[[{kind}:")), "{kind}: {t}");
        }
        assert!(
            !t.contains("ann@example.com") && !t.contains("4111") && !t.contains("WEST"),
            "{t}"
        );
        assert!(
            t.contains("order 1234567890123 stays"),
            "not Luhn-valid: {t}"
        );
        let mut back = json!({"note": t});
        v.restore(&p("s1"), &mut back).unwrap();
        assert_eq!(back["note"], text);
    }

    #[test]
    fn one_value_one_token_and_named_fields() {
        let v = Vault::default();
        let mut x = json!({"a": "x@y.io", "b": ["x@y.io"], "name": "Ann Lee", "age": 40});
        v.tokenize(&p("s"), &mut x, &["Name".to_string()]);
        assert_eq!(x["a"], x["b"][0]);
        assert!(x["name"].as_str().unwrap().starts_with("[[FIELD:"));
        assert_eq!(x["age"], 40);
    }

    #[test]
    fn with_a_durable_store_a_token_is_restored_by_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let open = || -> Arc<dyn toolgate_core::store::Store> {
            Arc::new(
                toolgate_core::store::EmbeddedStore::open(
                    &dir.path().join("s.redb"),
                    toolgate_core::store::Sealer::new([4; 32]),
                )
                .unwrap(),
            )
        };
        let text = Vault::new(Some(open())).tokenize_text(&p("a"), "mail ann@example.com");
        assert!(!text.contains("ann@"), "{text}");
        let v = Vault::new(Some(open()));
        let mut back = Value::String(text.clone());
        v.restore(&p("a"), &mut back).unwrap();
        assert_eq!(back, Value::String("mail ann@example.com".into()));
        let mut other = Value::String(text);
        assert!(v.restore(&p("b"), &mut other).unwrap_err().foreign);
    }

    #[test]
    fn forged_foreign_and_forgotten_tokens_fail() {
        let v = Vault::default();
        let t = v.tokenize_text(&p("s1"), "x@y.io");
        let mut other = json!(t.clone());
        let refused = v.restore(&p("s2"), &mut other).unwrap_err();
        assert!(refused.foreign && refused.message.contains("another caller"));
        let mut forged = json!("[[EMAIL:aaaaaa]]");
        let refused = v.restore(&p("s1"), &mut forged).unwrap_err();
        assert!(!refused.foreign, "{refused}");
    }
}
