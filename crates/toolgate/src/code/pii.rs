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

use crate::principal::{Principal, Refused};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long a token can be passed back.
pub const TOKEN_TTL: Duration = Duration::from_secs(3600);
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

struct Entry {
    owner: Principal,
    value: String,
    made: Instant,
}

/// The tokens handed out, per principal (see [`Principal`]).
#[derive(Default)]
pub struct Vault {
    /// Token text (`[[EMAIL:k7f3q9]]`) to what it stands for.
    tokens: Mutex<HashMap<String, Entry>>,
    /// (owner, value) to its token, so a value keeps one token for its owner.
    by_value: Mutex<HashMap<(Principal, String), String>>,
}

impl Vault {
    /// Replaces PII in every string of `v` (and the whole value of fields named in
    /// `fields`) with tokens owned by `owner`.
    pub fn tokenize(&self, owner: &Principal, v: &mut Value, fields: &[String]) {
        match v {
            Value::String(s) => *s = self.tokenize_text(owner, s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.tokenize(owner, x, fields)),
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    let named = fields.iter().any(|f| f.eq_ignore_ascii_case(k));
                    match x {
                        Value::String(_) | Value::Number(_) if named => {
                            let text = match &*x {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            *x = Value::String(self.token(owner, "FIELD", &text));
                        }
                        _ => self.tokenize(owner, x, fields),
                    }
                }
            }
            _ => {}
        }
    }

    /// PII in `text` replaced by tokens.
    pub fn tokenize_text(&self, owner: &Principal, text: &str) -> String {
        let mut out = text.to_string();
        for (kind, re) in PATTERNS.iter() {
            if !re.is_match(&out) {
                continue;
            }
            out = re
                .replace_all(&out, |c: &regex::Captures| {
                    let m = &c[0];
                    let real = match *kind {
                        "CARD" => luhn(m),
                        "IBAN" => iban(m),
                        "PHONE" => {
                            (7..=15).contains(&m.chars().filter(char::is_ascii_digit).count())
                        }
                        _ => true,
                    };
                    // Never tokenize inside a token already made.
                    if real && !m.contains("[[") {
                        self.token(owner, kind, m)
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
        match v {
            Value::String(s) if s.contains("[[") => {
                let tokens = self.tokens.lock().expect("pii tokens");
                let mut bad = None;
                let restored =
                    TOKEN.replace_all(s, |c: &regex::Captures| match tokens.get(&c[0]) {
                        Some(e) if e.owner == *owner && e.made.elapsed() <= TOKEN_TTL => {
                            e.value.clone()
                        }
                        found => {
                            let foreign = found.is_some_and(|e| e.owner != *owner);
                            bad.get_or_insert_with(|| (c[0].to_string(), foreign));
                            c[0].to_string()
                        }
                    });
                match bad {
                    Some((t, true)) => return Err(Refused::foreign(format!(
                        "{t} is a token of another caller (a different API key): use the value itself"
                    ))),
                    Some((t, false)) => return Err(Refused::stale(format!(
                        "{t} is not a token you hold (unknown or expired): use the value itself, or run the step that produced the token again"
                    ))),
                    None => {}
                }
                *s = restored.into_owned();
                Ok(())
            }
            Value::Array(a) => a.iter_mut().try_for_each(|x| self.restore(owner, x)),
            Value::Object(o) => o.values_mut().try_for_each(|x| self.restore(owner, x)),
            _ => Ok(()),
        }
    }

    fn token(&self, owner: &Principal, kind: &str, value: &str) -> String {
        let key = (owner.clone(), value.to_string());
        let mut by_value = self.by_value.lock().expect("pii values");
        let mut tokens = self.tokens.lock().expect("pii tokens");
        if let Some(t) = by_value.get(&key) {
            if let Some(e) = tokens.get_mut(t) {
                e.made = Instant::now();
                return t.clone();
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
        tokens.insert(
            token.clone(),
            Entry {
                owner: owner.clone(),
                value: value.to_string(),
                made: Instant::now(),
            },
        );
        by_value.insert(key, token.clone());
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
    sum % 10 == 0
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
