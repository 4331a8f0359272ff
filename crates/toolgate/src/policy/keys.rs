//! API keys: generation, hashing, constant-time lookup, and what each key may call
//! (its scopes and highest tier).
//!
//! Keys are 256 random bits, so a single fast SHA-256 is an adequate one-way hash: there is
//! no dictionary to try, and slow password hashes (argon2, bcrypt) would only add latency to
//! every request. The configuration holds the hash alone, never the key.

use super::glob::PatternList;
use super::tiers::Tier;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// What every key starts with, so a leaked one is recognisable (secret scanners, logs).
pub(crate) const KEY_PREFIX: &str = "tg_";
/// How a hash is written in the configuration.
pub(crate) const HASH_PREFIX: &str = "sha256:";
/// The scope that opens `/metrics` and `/ui` (written as it is in a key's `scopes`).
pub(crate) const ADMIN_SCOPE: &str = "admin";
/// The name of the grant a request has when it authenticated as nothing.
pub(crate) const UNAUTHENTICATED: &str = "unauthenticated";

/// Who is calling and what they may do: a configured key, or the implicit identity of a
/// gateway with no keys (stdio, or HTTP without keys on loopback).
#[derive(Debug, Clone)]
pub struct Grant {
    /// The key's name (what the audit log records; never the key itself).
    pub name: String,
    /// Which `server/tool` names it may call.
    pub scopes: PatternList,
    /// The highest tier it may call.
    pub tier: Tier,
    /// Ask the user before its destructive calls (overrides the global setting).
    pub approval: Option<bool>,
    /// The profile its sessions see when the path or command line names none.
    pub profile: Option<String>,
    /// For an access token (`[auth.oauth]`): the person or machine it speaks for, who owns
    /// what its requests leave behind. `None` for keys and the local identity.
    pub subject: Option<toolgate_core::principal::Principal>,
    /// For an access token: when it expires (a request after that is refused with 401).
    pub expires: Option<std::time::SystemTime>,
    /// For an access token: the token itself, kept only for an upstream that exchanges it
    /// for one of its own (RFC 8693, `grant = "token_exchange"`); never sent as is.
    pub token: Option<toolgate_core::call::AccessToken>,
}

impl Grant {
    /// An identity that may call everything: stdio sessions, and HTTP when no keys exist.
    pub fn full(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_string(),
            scopes: PatternList::default(),
            tier: Tier::Destructive,
            approval: None,
            profile: None,
            subject: None,
            expires: None,
            token: None,
        })
    }

    /// An identity that may call nothing (an HTTP request that somehow carries no grant).
    pub fn nothing() -> Arc<Self> {
        Arc::new(Self {
            name: UNAUTHENTICATED.into(),
            scopes: PatternList::parse(&["!*"]),
            tier: Tier::Read,
            approval: None,
            profile: None,
            subject: None,
            expires: None,
            token: None,
        })
    }

    /// Whether it may read `/metrics` and `/ui`: a key whose scopes list `"admin"` itself
    /// (a glob such as `"*"` covers tools, not this), or the open identity of a gateway
    /// with no keys (whose scopes are empty).
    pub fn is_admin(&self) -> bool {
        self.scopes.is_empty() || self.scopes.names(ADMIN_SCOPE)
    }

    /// How this grant is named in a refusal: `key "ci"`, or for an access token its
    /// subject and the `[[auth.oauth.map]]` rule that gave it its permissions.
    pub fn who(&self) -> String {
        match (&self.subject, self.name.strip_prefix("oauth:")) {
            (Some(p), Some(rule)) => format!("{} (auth.oauth rule {rule:?})", p.label()),
            _ => format!("key {:?}", self.name),
        }
    }

    /// "the key" or "the token", in a refusal's explanation.
    fn noun(&self) -> &'static str {
        if self.subject.is_some() {
            "the token"
        } else {
            "the key"
        }
    }

    /// Why this key may not call `id` at `tier`, or `None` when it may.
    pub fn missing_permission(&self, id: &str, tier: Tier) -> Option<String> {
        self.missing(id, tier).map(|(_, why)| why)
    }

    /// Like [`Grant::missing_permission`], with which permission is missing.
    pub fn missing(&self, id: &str, tier: Tier) -> Option<(super::RefusalKind, String)> {
        use super::RefusalKind::{Scope, Tier as TierKind};
        if !self.scopes.matches(id) {
            let why = match self.scopes.excluded_by(id) {
                Some(ex) => format!("its scopes exclude it (\"!{ex}\")"),
                None => format!("it is outside {}'s scopes", self.noun()),
            };
            return Some((
                Scope,
                format!(
                    "{} may not call {id}: {why}; the missing permission is scope \"{id}\"",
                    self.who()
                ),
            ));
        }
        if tier > self.tier {
            return Some((
                TierKind,
                format!(
                    "{} may not call {id}: it is a {} tool and {} allows up to {}; the missing permission is tier \"{}\"",
                    self.who(),
                    tier.as_str(),
                    self.noun(),
                    self.tier.as_str(),
                    tier.as_str()
                ),
            ));
        }
        None
    }
}

impl Grant {
    /// Why this key may not use the resources and prompts of `server`, or `None` when it
    /// may. They belong to the server as a whole, so the key's scopes must cover
    /// `server/*` (as `server/*` or `*` do; `server/get_*` does not). Resources and prompts
    /// only read, so every tier may.
    pub fn missing_server(&self, server: &str) -> Option<String> {
        let whole = super::whole_server(server);
        if self.scopes.matches(&whole) {
            return None;
        }
        Some(format!(
            "{} may not use the resources and prompts of server {server:?}: they belong to the whole server and {}'s scopes do not cover it; the missing permission is scope \"{whole}\"",
            self.who(),
            self.noun()
        ))
    }
}

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
