//! API keys: generation, hashing, constant-time lookup, and what each key may call
//! (its scopes and highest tier).
//!
//! Keys are 256 random bits, so a single fast SHA-256 is an adequate one-way hash: there is
//! no dictionary to try, and slow password hashes (argon2, bcrypt) would only add latency to
//! every request. The configuration holds the hash alone, never the key.

use super::grant::Grant;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// What every key starts with, so a leaked one is recognisable (secret scanners, logs).
pub(crate) const KEY_PREFIX: &str = "tg_";
/// How a hash is written in the configuration.
pub(crate) const HASH_PREFIX: &str = "sha256:";

/// One configured key.
#[derive(Debug, Clone)]
pub struct KeyEntry {
    /// SHA-256 of the key.
    pub hash: [u8; 32],
    /// A revoked key is refused (401), with a message saying so.
    pub revoked: bool,
    pub grant: Arc<Grant>,
}

/// Why a request's credentials were not accepted (a 401, or what the token's
/// [`TokenRejection`](super::oauth::TokenRejection) says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuthRejection {
    /// No `Authorization: Bearer` header; `oauth` when access tokens are accepted too.
    Missing {
        oauth: bool,
    },
    Unknown,
    Revoked(String),
    /// An access token that `[auth.oauth]` refused.
    Token(super::oauth::TokenRejection),
}

impl std::fmt::Display for AuthRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthRejection::Missing { oauth: false } => write!(
                f,
                "this gateway requires an API key: send \"Authorization: Bearer <key>\""
            ),
            AuthRejection::Missing { oauth: true } => write!(
                f,
                "this gateway requires an access token from its authorization server (or an API key): send \"Authorization: Bearer <token>\""
            ),
            AuthRejection::Token(t) => t.fmt(f),
            AuthRejection::Unknown => write!(f, "the API key is not valid"),
            AuthRejection::Revoked(name) => {
                write!(
                    f,
                    "the API key {name:?} has been revoked; ask for a new one"
                )
            }
        }
    }
}

/// Finds the key whose hash matches `presented`. Every configured hash is compared, in
/// constant time, so the answer's timing says nothing about which key came close.
pub(crate) fn authenticate(
    keys: &[KeyEntry],
    presented: &str,
) -> Result<Arc<Grant>, AuthRejection> {
    let digest = hash_key(presented);
    let mut found: Option<&KeyEntry> = None;
    for k in keys {
        if constant_time_eq(&k.hash, &digest) {
            found = Some(k);
        }
    }
    match found {
        None => Err(AuthRejection::Unknown),
        Some(k) if k.revoked => Err(AuthRejection::Revoked(k.grant.name.clone())),
        Some(k) => Ok(k.grant.clone()),
    }
}

/// The SHA-256 of a key.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Parses `sha256:<64 hex digits>` (the prefix is optional).
pub(crate) fn parse_hash(text: &str) -> Option<[u8; 32]> {
    let hex_part = text.strip_prefix(HASH_PREFIX).unwrap_or(text);
    let bytes = hex::decode(hex_part).ok()?;
    bytes.try_into().ok()
}

/// Equality whose running time depends only on the length, never on where bytes differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A new random key (256 bits) and the configuration hash line for it.
pub fn new_key() -> (String, String) {
    let key = format!("{KEY_PREFIX}{}", toolgate_core::ids::random_hex(32));
    let hash = format!("{HASH_PREFIX}{}", hex::encode(hash_key(&key)));
    (key, hash)
}

/// The `Authorization: Bearer` token of a header value, if it is one.
pub(crate) fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::glob::PatternList;
    use crate::policy::tiers::Tier;

    fn entry(key: &str, name: &str, revoked: bool) -> KeyEntry {
        KeyEntry {
            hash: hash_key(key),
            revoked,
            grant: Arc::new(Grant {
                name: name.into(),
                scopes: PatternList::parse(&["alpha/*", "!alpha/delete_*"]),
                tier: Tier::Write,
                approval: None,
                profile: None,
                subject: None,
                expires: None,
                token: None,
            }),
        }
    }

    #[test]
    fn constant_time_compare_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
        let (a, b) = (hash_key("x"), hash_key("y"));
        assert!(constant_time_eq(&a, &a) && !constant_time_eq(&a, &b));
    }

    #[test]
    fn keys_authenticate_by_hash() {
        let (key, line) = new_key();
        assert!(key.starts_with(KEY_PREFIX) && key.len() == 3 + 64);
        assert_eq!(parse_hash(&line), Some(hash_key(&key)));
        assert_eq!(parse_hash("sha256:zz"), None);
        assert_eq!(parse_hash(&"ab".repeat(31)), None, "too short");
        let keys = vec![entry("k1", "one", false), entry("k2", "two", true)];
        assert_eq!(authenticate(&keys, "k1").unwrap().name, "one");
        assert_eq!(
            authenticate(&keys, "k2").unwrap_err(),
            AuthRejection::Revoked("two".into())
        );
        assert_eq!(
            authenticate(&keys, "k3").unwrap_err(),
            AuthRejection::Unknown
        );
        assert_ne!(new_key().0, new_key().0);
    }

    #[test]
    fn bearer_tokens_parse() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("abc"), None);
    }

    #[test]
    fn permissions_name_what_is_missing() {
        let g = entry("k", "ci", false).grant;
        assert!(g.missing_permission("alpha/echo", Tier::Read).is_none());
        assert!(g.missing_permission("alpha/echo", Tier::Write).is_none());
        let e = g
            .missing_permission("alpha/echo", Tier::Destructive)
            .unwrap();
        assert!(
            e.contains("tier \"destructive\"") && e.contains("up to write"),
            "{e}"
        );
        let e = g.missing_permission("beta/x", Tier::Read).unwrap();
        assert!(e.contains("scope \"beta/x\""), "{e}");
        let e = g
            .missing_permission("alpha/delete_all", Tier::Read)
            .unwrap();
        assert!(e.contains("!alpha/delete_*"), "{e}");
        assert!(Grant::full("local")
            .missing_permission("x/y", Tier::Destructive)
            .is_none());
    }

    #[test]
    fn resources_and_prompts_need_the_whole_server() {
        let g = entry("k", "ci", false).grant;
        assert!(g.missing_server("alpha").is_none(), "alpha/* less one tool");
        let e = g.missing_server("beta").unwrap();
        assert!(
            e.contains("scope \"beta/*\"") && e.contains("\"ci\""),
            "{e}"
        );
        let one_tool = Grant {
            scopes: PatternList::parse(&["alpha/echo"]),
            ..(*g).clone()
        };
        assert!(one_tool.missing_server("alpha").is_some());
        let everything_but_beta = Grant {
            scopes: PatternList::parse(&["*", "!beta/*"]),
            ..(*g).clone()
        };
        assert!(everything_but_beta.missing_server("alpha").is_none());
        assert!(everything_but_beta.missing_server("beta").is_some());
        assert!(Grant::full("local").missing_server("x").is_none());
        assert!(Grant::nothing().missing_server("x").is_some());
    }
}
