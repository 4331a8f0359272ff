//! The `[policy]` part of `toolgate.toml`: profiles, keys, per-tool rules, approval and
//! audit. Parsed with `deny_unknown_fields`; every error names the file, the key and the fix.
//!
//! ```toml
//! [policy]
//! default_profile = "triage"        # sessions that name no profile (unset: every tool)
//! contact = "#platform on Slack"    # who to ask, in shadow-tool answers
//! approval = false                  # ask the user before destructive calls (keys may override)
//! stdio_key = "ops"                 # identity of stdio sessions (unset: "local", full access)
//! stdio_profile = "triage"          # profile of stdio sessions (`serve --stdio --profile` wins)
//!
//! [policy.audit]
//! path = "/var/log/toolgate/audit.jsonl" # relative: to this file's folder
//! arguments = false                 # log the arguments themselves, not only their keyed hash
//! secret = "${TOOLGATE_AUDIT_SECRET}" # HMAC secret (default: made once, kept in <path>.secret)
//!
//! [policy.tools."github/delete_*"]
//! tier = "destructive"              # read | write | destructive; overrides annotations
//! tags = ["admin"]
//! [policy.tools."newsrv/*"]
//! shadow = true                     # indexed and routable, not executable yet
//!
//! [policy.profiles.triage]
//! tools = ["github/*", "!github/delete_*"]
//! annotations = ["readOnlyHint"]    # or "!destructiveHint", "idempotentHint", ...
//! tags = ["triage", "!admin"]
//! tiers = ["read", "write"]
//!
//! [policy.keys.ci]
//! hash = "sha256:9f86d0..."         # from `toolgate key new ci`
//! scopes = ["github/*", "!github/delete_repo"]
//! tier = "write"                    # highest tier it may call (default read)
//! profile = "triage"                # what its sessions see (a /mcp/p/<profile> path wins)
//! approval = true                   # ask before its destructive calls
//! revoked = false
//! ```

use super::glob::{Glob, PatternList};
use super::grant::Grant;
use super::keys::{parse_hash, KeyEntry, HASH_PREFIX};
use super::profiles::Profile;
use super::tiers::{Tier, ToolRule, HINTS};
use crate::config_error::{invalid, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    pub default_profile: Option<String>,
    pub contact: Option<String>,
    #[serde(default)]
    pub approval: bool,
    pub stdio_key: Option<String>,
    pub stdio_profile: Option<String>,
    #[serde(default)]
    pub audit: RawAudit,
    #[serde(default)]
    pub tools: BTreeMap<String, RawToolRule>,
    #[serde(default)]
    pub profiles: BTreeMap<String, RawProfile>,
    #[serde(default)]
    pub keys: BTreeMap<String, RawKey>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAudit {
    pub path: Option<PathBuf>,
    #[serde(default)]
    pub arguments: bool,
    /// The HMAC secret for argument hashes and the chain (`${VAR}` allowed).
    pub secret: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToolRule {
    pub tier: Option<Tier>,
    #[serde(default)]
    pub tags: Vec<String>,
    pub shadow: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProfile {
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub annotations: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub tiers: Vec<Tier>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKey {
    pub hash: Option<String>,
    pub scopes: Option<Vec<String>>,
    pub tier: Option<Tier>,
    pub profile: Option<String>,
    pub approval: Option<bool>,
    #[serde(default)]
    pub revoked: bool,
}

/// The validated policy.
#[derive(Debug, Clone, Default)]
pub struct PolicyConfig {
    pub default_profile: Option<String>,
    /// Who to ask to enable a shadow tool or widen a key.
    pub contact: Option<String>,
    /// Ask before destructive calls, for keys that do not say.
    pub approval: bool,
    /// The key stdio sessions act as; `None` is the implicit full-access "local" identity.
    pub stdio_key: Option<String>,
    /// The profile stdio sessions see (set by `serve --stdio --profile` too).
    pub stdio_profile: Option<String>,
    pub audit_path: Option<PathBuf>,
    pub audit_arguments: bool,
    /// Keys the audit log's hashes and chain; `None`: a secret kept in `<path>.secret`.
    pub audit_secret: Option<String>,
    pub tools: Vec<ToolRule>,
    pub profiles: BTreeMap<String, Arc<Profile>>,
    pub keys: Vec<KeyEntry>,
    /// `[auth.oauth]`: access tokens accepted besides keys.
    pub oauth: Option<super::oauth::OAuthConfig>,
}

impl PolicyConfig {
    /// A configured key's grant by name (revoked or not).
    pub fn key(&self, name: &str) -> Option<&KeyEntry> {
        self.keys.iter().find(|k| k.grant.name == name)
    }
}

/// Profile and key names appear in URLs and logs: keep them simple.
fn check_name(kind: &str, name: &str, file: &Path) -> Result<()> {
    if !toolgate_core::ids::is_simple_name(name) {
        invalid!(
            "{}: {kind} name {name:?} is not allowed: use 1 to 48 letters, digits, '_', '-' or '.'",
            file.display()
        );
    }
    Ok(())
}

impl RawPolicy {
    pub(crate) fn validate(self, file: &Path) -> Result<PolicyConfig> {
        let f = file.display();
        let audit_secret = match &self.audit.secret {
            None => None,
            Some(s) => {
                let s = toolgate_core::env::substitute(s, file, "policy.audit.secret")?;
                if s.len() < 16 {
                    invalid!("{f}: policy.audit.secret is {} characters: use at least 16 (e.g. `openssl rand -hex 32`), or leave it out to have one made beside the log", s.len());
                }
                Some(s)
            }
        };
        let mut tools = Vec::new();
        for (pattern, r) in self.tools {
            if !pattern.contains('/') && pattern != "*" {
                invalid!("{f}: policy.tools.{pattern:?}: write \"server/tool\" (globs allowed, e.g. \"github/*\")");
            }
            tools.push(ToolRule {
                pattern: Glob::new(&pattern),
                tier: r.tier,
                tags: r.tags,
                shadow: r.shadow,
            });
        }
        let mut profiles = BTreeMap::new();
        for (name, p) in self.profiles {
            check_name("profile", &name, file)?;
            for a in &p.annotations {
                let bare = a.strip_prefix('!').unwrap_or(a);
                if !HINTS.contains(&bare) {
                    invalid!(
                        "{f}: policy.profiles.{name}.annotations: {a:?} is not an annotation hint: use {} (prefix \"!\" to exclude)",
                        HINTS.join(", ")
                    );
                }
            }
            for t in &p.tools {
                let bare = t.strip_prefix('!').unwrap_or(t);
                if !bare.contains('/') && bare != "*" {
                    invalid!("{f}: policy.profiles.{name}.tools: {t:?}: write \"server/tool\" globs, e.g. \"github/*\" or \"!github/delete_*\"");
                }
            }
            profiles.insert(
                name.clone(),
                Arc::new(Profile {
                    name,
                    tools: PatternList::parse(&p.tools),
                    annotations: PatternList::parse(&p.annotations),
                    tags: PatternList::parse(&p.tags),
                    tiers: p.tiers,
                }),
            );
        }
        let known = |p: &str| -> String {
            let names: Vec<&str> = profiles.keys().map(String::as_str).collect();
            if names.is_empty() {
                format!("no profile {p:?} is defined: add [policy.profiles.{p}]")
            } else {
                format!("no profile {p:?}; the profiles are: {}", names.join(", "))
            }
        };
        for (setting, value) in [
            ("default_profile", &self.default_profile),
            ("stdio_profile", &self.stdio_profile),
        ] {
            if let Some(p) = value {
                if !profiles.contains_key(p) {
                    invalid!("{f}: policy.{setting}: {}", known(p));
                }
            }
        }
        let mut keys = Vec::new();
        for (name, k) in self.keys {
            check_name("key", &name, file)?;
            let key = format!("policy.keys.{name}");
            let Some(hash_text) = k.hash else {
                invalid!("{f}: {key} needs `hash`: run `toolgate key new {name}` and paste the line it prints");
            };
            let Some(hash) = parse_hash(&hash_text) else {
                invalid!("{f}: {key}.hash is not a SHA-256 hash: write \"{HASH_PREFIX}<64 hex digits>\" as printed by `toolgate key new {name}` (never the key itself)");
            };
            let Some(scopes) = k.scopes else {
                invalid!("{f}: {key} needs `scopes`: the server/tool globs it may call, e.g. [\"github/*\"] (or [\"*\"] for every tool)");
            };
            if scopes.is_empty() {
                invalid!("{f}: {key}.scopes is empty, so the key could call nothing: list globs such as \"github/*\", or set revoked = true");
            }
            if let Some(p) = &k.profile {
                if !profiles.contains_key(p) {
                    invalid!("{f}: {key}.profile: {}", known(p));
                }
            }
            if let Some(other) = keys.iter().find(|e: &&KeyEntry| e.hash == hash) {
                invalid!("{f}: {key}.hash is the same as policy.keys.{}.hash: give each key its own (toolgate key new)", other.grant.name);
            }
            keys.push(KeyEntry {
                hash,
                revoked: k.revoked,
                grant: Arc::new(Grant {
                    name,
                    scopes: PatternList::parse(&scopes),
                    tier: k.tier.unwrap_or(Tier::Read),
                    approval: k.approval,
                    profile: k.profile,
                    subject: None,
                    expires: None,
                    token: None,
                }),
            });
        }
        let config = PolicyConfig {
            default_profile: self.default_profile,
            contact: self.contact,
            approval: self.approval,
            stdio_key: self.stdio_key,
            stdio_profile: self.stdio_profile,
            // Relative to the configuration file, as every other path in it, so `serve` and
            // `toolgate audit verify --config` find the same log (and its `.secret`) from
            // any working directory.
            audit_path: self.audit.path.map(|p| match file.parent() {
                Some(base) if p.is_relative() => base.join(p),
                _ => p,
            }),
            audit_arguments: self.audit.arguments,
            audit_secret,
            tools,
            profiles,
            keys,
            oauth: None,
        };
        if let Some(k) = &config.stdio_key {
            if config.key(k).is_none() {
                invalid!("{f}: policy.stdio_key = {k:?}: no [policy.keys.{k}] is defined");
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn parse(s: &str) -> crate::config_error::Result<Config> {
        Config::from_toml_str(s, Path::new("toolgate.toml"))
    }

    const HASH: &str = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn a_full_policy_parses() {
        let c = parse(&format!(
            r#"
            [policy]
            default_profile = "triage"
            contact = "ops@example.com"
            approval = true
            stdio_key = "ci"
            [policy.audit]
            path = "/tmp/audit.jsonl"
            arguments = true
            [policy.tools."github/delete_*"]
            tier = "destructive"
            tags = ["admin"]
            [policy.tools."new/*"]
            shadow = true
            [policy.profiles.triage]
            tools = ["github/*", "!github/delete_*"]
            annotations = ["readOnlyHint"]
            tags = ["!admin"]
            tiers = ["read"]
            [policy.keys.ci]
            hash = "{HASH}"
            scopes = ["github/*"]
            tier = "write"
            profile = "triage"
            "#
        ))
        .unwrap();
        let p = &c.policy;
        assert_eq!(p.default_profile.as_deref(), Some("triage"));
        assert!(p.approval && p.audit_arguments);
        assert_eq!(p.tools.len(), 2);
        let k = p.key("ci").unwrap();
        assert_eq!(k.grant.tier, super::Tier::Write);
        assert!(!k.revoked);
        assert!(parse("").unwrap().policy.keys.is_empty());
    }

    #[test]
    fn policy_errors_name_the_key_and_the_fix() {
        let err = |s: String| parse(&s).unwrap_err().to_string();
        let e = err("[policy]\ndefault_profile = \"x\"\n".into());
        assert!(
            e.contains("toolgate.toml")
                && e.contains("policy.default_profile")
                && e.contains("[policy.profiles.x]"),
            "{e}"
        );
        let e = err("[policy.keys.ci]\nscopes = [\"*\"]\n".into());
        assert!(
            e.contains("policy.keys.ci") && e.contains("toolgate key new ci"),
            "{e}"
        );
        let e = err("[policy.keys.ci]\nhash = \"tg_abcdef\"\nscopes = [\"*\"]\n".into());
        assert!(
            e.contains("policy.keys.ci.hash") && e.contains("never the key"),
            "{e}"
        );
        let e = err(format!("[policy.keys.ci]\nhash = \"{HASH}\"\n"));
        assert!(e.contains("needs `scopes`"), "{e}");
        let e = err(format!(
            "[policy.keys.ci]\nhash = \"{HASH}\"\nscopes = [\"*\"]\ntier = \"admin\"\n"
        ));
        assert!(e.contains("tier") && e.contains("admin"), "{e}");
        let e = err(format!(
            "[policy.keys.ci]\nhash = \"{HASH}\"\nscopes = [\"*\"]\nscope = 1\n"
        ));
        assert!(e.contains("scope"), "{e}");
        let e = err(format!("[policy.keys.a]\nhash = \"{HASH}\"\nscopes = [\"*\"]\n[policy.keys.b]\nhash = \"{HASH}\"\nscopes = [\"*\"]\n"));
        assert!(
            e.contains("policy.keys.b.hash") && e.contains("policy.keys.a"),
            "{e}"
        );
        let e = err("[policy.profiles.p]\nannotations = [\"readonly\"]\n".into());
        assert!(
            e.contains("policy.profiles.p.annotations") && e.contains("readOnlyHint"),
            "{e}"
        );
        let e = err("[policy.profiles.p]\ntools = [\"github\"]\n".into());
        assert!(e.contains("server/tool"), "{e}");
        let e = err("[policy.tools.github]\nshadow = true\n".into());
        assert!(
            e.contains("policy.tools") && e.contains("server/tool"),
            "{e}"
        );
        let e = err("[policy]\nstdio_key = \"nobody\"\n".into());
        assert!(
            e.contains("policy.stdio_key") && e.contains("nobody"),
            "{e}"
        );
        let e = err("[policy.profiles.\"a b\"]\n".into());
        assert!(e.contains("not allowed"), "{e}");
    }
}
