//! Who a request acts for: the one notion of identity that owns handles and counts limits.
//!
//! A [`Principal`] is the API key a request presented, or, when the gateway has no keys
//! (or a stdio session has no `stdio_key`), the gateway's local identity. Everything a
//! request leaves behind for a later one (selectionIds, cursors, operationIds, code-mode
//! `state`, PII tokens, finished runs) is owned by a principal, not by a session: MCP
//! 2026-07-28 has no sessions, and a session id is not a credential. A handle presented
//! by another principal is refused as foreign.
//!
//! This module depends on nothing else in the crate, so every layer may use it.

use std::fmt;
use std::sync::Arc;

/// The owner of handles and the subject of per-caller limits. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

impl Principal {
    /// The holder of the configured API key named `name`.
    pub fn key(name: &str) -> Self {
        Self(format!("key:{name}").into())
    }

    /// The subject `sub` of access tokens from the issuer `iss` (`[auth.oauth]`): a person
    /// or a machine client of the team's authorization server.
    pub fn subject(iss: &str, sub: &str) -> Self {
        Self(format!("sub:{iss}#{sub}").into())
    }

    /// The gateway's local identity: every caller when no keys are configured, and a
    /// stdio session without `stdio_key`.
    pub fn local() -> Self {
        // Asked for on every request (`Caller::principal`): one shared string, no allocation.
        static LOCAL: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "local".into());
        Self(LOCAL.clone())
    }

    /// A request that authenticated as nothing (it can call nothing, and owns nothing
    /// anyone else can use).
    pub fn nobody() -> Self {
        static NOBODY: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "nobody".into());
        Self(NOBODY.clone())
    }

    /// The stable text form (`key:<name>`, `sub:<iss>#<sub>`, `local`, `nobody`): for tables and audit lines.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// How the principal is named in a message to the model or the operator.
    pub fn label(&self) -> String {
        if let Some((iss, sub)) = self.0.strip_prefix("sub:").and_then(|s| s.split_once('#')) {
            return format!("{sub:?} of {iss}");
        }
        match self.0.strip_prefix("key:") {
            Some(name) => format!("API key {name:?}"),
            None if &*self.0 == "local" => "the gateway's local identity".to_string(),
            None => "an unauthenticated caller".to_string(),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a handle (selectionId, PII token, runId) was not honoured: the message for the
/// model, and whether the handle was *foreign*, made by another principal, which the
/// caller audits (`Policy::audit_foreign`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The message for the model.
    pub message: String,
    /// The handle was made by another principal (the caller audits it).
    pub foreign: bool,
}

impl Refused {
    /// Unknown, expired or malformed: the model should redo the step that made it.
    pub fn stale(message: String) -> Self {
        Self {
            message,
            foreign: false,
        }
    }

    /// Made by another principal.
    pub fn foreign(message: String) -> Self {
        Self {
            message,
            foreign: true,
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Refused> for String {
    fn from(r: Refused) -> Self {
        r.message
    }
}

/// A session id or handle as it may appear in logs: its first 8 characters and an
/// ellipsis, enough to correlate lines, never enough to present it.
pub fn redacted(id: &str) -> String {
    let head: String = id.chars().take(8).collect();
    if head.len() < id.len() {
        format!("{head}…")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_the_local_identity_never_collide() {
        assert_ne!(Principal::key("local"), Principal::local());
        assert_eq!(Principal::key("ci"), Principal::key("ci"));
        assert_eq!(Principal::key("ci").label(), "API key \"ci\"");
        let alice = Principal::subject("https://idp.example.com", "alice");
        assert_eq!(alice.label(), "\"alice\" of https://idp.example.com");
        assert_ne!(
            alice,
            Principal::subject("https://other.example.com", "alice")
        );
        assert_ne!(alice, Principal::key("alice"));
        assert_eq!(Principal::local().as_str(), "local");
    }

    #[test]
    fn redacted_ids_keep_only_a_prefix() {
        assert_eq!(redacted("0123456789abcdef"), "01234567…");
        assert_eq!(redacted("short"), "short");
    }
}
