//! What a caller may do: a configured key's or an access token's grant (its scopes, its
//! highest tier, its approval setting and profile), or the implicit identity of a gateway
//! with no keys. Below both `keys` and `oauth`, which make grants.

use super::glob::PatternList;
use super::tiers::Tier;
use std::sync::Arc;

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
