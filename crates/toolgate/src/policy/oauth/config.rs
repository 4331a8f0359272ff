//! The `[auth.oauth]` part of `toolgate.toml`: the authorization server whose access tokens
//! the gateway accepts, and what each token's claims map to. Parsed with
//! `deny_unknown_fields`; every error names the file, the key and the fix.
//!
//! ```toml
//! [auth.oauth]
//! issuer = "https://idp.example.com/realms/team"  # its metadata is discovered
//! resource = "https://mcp.example.com/mcp"         # the URL clients use (default http://<listen>/mcp)
//! audience = "https://mcp.example.com/mcp"         # what `aud` must hold (default: resource)
//! required_scopes = ["mcp"]                        # every token must carry these (else 403)
//! # jwks_url = "..."                               # default: the issuer's metadata `jwks_uri`
//! # introspection_url = "..."                      # opaque tokens (RFC 7662), with:
//! # client_id = "toolgate"
//! # client_secret = "${TOOLGATE_OAUTH_SECRET}"
//! # algorithms = ["RS256", "ES256"]                # default: every asymmetric one
//! # clock_skew_secs = 60
//! # jwks_refresh_min_secs = 30                     # an unknown `kid` refetches at most this often
//!
//! [auth.oauth.default]                             # tokens no rule below matches
//! scopes = ["*"]
//! tier = "read"
//!
//! [[auth.oauth.map]]                               # the first rule that matches wins
//! name = "admins"
//! claim = "groups"                                 # any claim: a string, a list, or "scope"
//! values = ["platform-admins"]
//! scopes = ["*", "admin"]
//! tier = "destructive"
//! profile = "everything"
//! ```

use crate::config_error::{invalid, Result};
use crate::policy::glob::PatternList;
use crate::policy::grant::Grant;
use crate::policy::Profile;
use crate::policy::Tier;
use jsonwebtoken::Algorithm;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// `[auth]`: how callers authenticate besides `[policy.keys]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuth {
    pub oauth: Option<RawOAuth>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOAuth {
    pub issuer: Option<String>,
    pub resource: Option<String>,
    pub audience: Option<String>,
    pub jwks_url: Option<String>,
    pub introspection_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    #[serde(default)]
    pub required_scopes: Vec<String>,
    pub algorithms: Option<Vec<String>>,
    pub clock_skew_secs: Option<u64>,
    pub jwks_refresh_min_secs: Option<u64>,
    pub default: Option<RawGrant>,
    #[serde(default)]
    pub map: Vec<RawRule>,
}

/// What a token is allowed: the same keys as a `[policy.keys.NAME]` entry, without a hash.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGrant {
    pub scopes: Option<Vec<String>>,
    pub tier: Option<Tier>,
    pub profile: Option<String>,
    pub approval: Option<bool>,
}

/// One `[[auth.oauth.map]]` rule: a claim and the values that select it, and the grant.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub name: Option<String>,
    pub claim: Option<String>,
    #[serde(default)]
    pub values: Vec<String>,
    pub scopes: Option<Vec<String>>,
    pub tier: Option<Tier>,
    pub profile: Option<String>,
    pub approval: Option<bool>,
}

/// The validated `[auth.oauth]`.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier (exactly as its tokens' `iss`).
    pub issuer: String,
    /// The gateway's canonical URL: what Protected Resource Metadata names.
    pub resource: String,
    /// What a token's `aud` must contain.
    pub audience: String,
    /// `resource` was not configured: it follows the address the gateway listens on.
    resource_from_listen: bool,
    /// `audience` was not configured: it is the resource.
    audience_from_resource: bool,
    pub jwks_url: Option<String>,
    pub introspection: Option<Introspection>,
    pub required_scopes: Vec<String>,
    pub algorithms: Vec<Algorithm>,
    pub clock_skew: Duration,
    pub jwks_refresh_min: Duration,
    /// For tokens no rule matches.
    pub default: Mapping,
    /// Tried in order; the first that matches wins.
    pub rules: Vec<Rule>,
}

/// The client credentials the gateway introspects opaque tokens with (RFC 7662).
#[derive(Clone)]
pub struct Introspection {
    pub url: String,
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// What a matched token may see and do (a key's grant, without the key).
#[derive(Debug, Clone)]
pub struct Mapping {
    /// The rule's name (`default` for the default): audited with every call.
    pub name: String,
    pub scopes: PatternList,
    pub tier: Tier,
    pub profile: Option<String>,
    pub approval: Option<bool>,
}

impl Mapping {
    /// The grant of a verified token's subject under this mapping.
    pub fn grant(
        &self,
        subject: &super::Subject,
        expires: std::time::SystemTime,
        token: &str,
    ) -> Arc<Grant> {
        Arc::new(Grant {
            name: format!("oauth:{}", self.name),
            scopes: self.scopes.clone(),
            tier: self.tier,
            approval: self.approval,
            profile: self.profile.clone(),
            subject: Some(subject.principal()),
            expires: Some(expires),
            token: Some(toolgate_core::call::AccessToken::new(token)),
        })
    }
}

impl Mapping {
    /// `scopes ["*"], tier read, profile triage`: for `toolgate check`.
    fn describe(&self) -> String {
        let mut text = format!(
            "scopes {:?}, tier {}",
            self.scopes.entries(),
            self.tier.as_str()
        );
        if let Some(p) = &self.profile {
            text.push_str(&format!(", profile {p}"));
        }
        if let Some(a) = self.approval {
            text.push_str(&format!(", approval {a}"));
        }
        text
    }
}

impl OAuthConfig {
    /// The gateway listens on `addr` (`--http` or a port 0 resolved): a resource that was
    /// not configured is `http://<addr>/mcp`, and so is an audience that was not either.
    pub fn listening_on(&mut self, addr: SocketAddr) {
        if self.resource_from_listen {
            self.resource = format!("http://{addr}/mcp");
            if self.audience_from_resource {
                self.audience = self.resource.clone();
            }
        }
    }

    /// What `toolgate check` shows: whose tokens are accepted, for what, and how their
    /// claims map to what the caller may see and do, in the order the rules are tried.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "auth.oauth: access tokens from {} for {} (metadata at {})",
            self.issuer,
            self.audience,
            super::metadata::document_url(self)
        )];
        if !self.required_scopes.is_empty() {
            lines.push(format!(
                "  every token must carry scope {:?}",
                self.required_scopes.join(" ")
            ));
        }
        for r in &self.rules {
            lines.push(format!(
                "  rule {}: {} has any of {:?} -> {}",
                r.mapping.name,
                r.claim,
                r.values,
                r.mapping.describe()
            ));
        }
        lines.push(format!(
            "  {} -> {}",
            if self.rules.is_empty() {
                "every token"
            } else {
                "any other token (default)"
            },
            self.default.describe()
        ));
        lines
    }
}

/// One `[[auth.oauth.map]]` rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub claim: String,
    pub values: Vec<String>,
    pub mapping: Mapping,
}

/// Every asymmetric algorithm `jsonwebtoken` verifies: what `algorithms` allows by default.
/// HMAC (`HS*`) would need a secret shared with the issuer, and `none` is never accepted.
pub(crate) const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl RawOAuth {
    /// Validates against the gateway's listen address (the default resource) and the
    /// configured profiles.
    pub(crate) fn validate(
        self,
        file: &Path,
        listen: SocketAddr,
        profiles: &BTreeMap<String, Arc<Profile>>,
    ) -> Result<OAuthConfig> {
        let f = file.display();
        let sub = |v: &str, key: &str| toolgate_core::env::substitute(v, file, key);
        let Some(issuer) = self.issuer else {
            invalid!("{f}: auth.oauth needs `issuer`: the URL of the authorization server whose tokens to accept (its `iss`)");
        };
        let issuer = sub(&issuer, "auth.oauth.issuer")?;
        check_url(&issuer, "auth.oauth.issuer", file)?;
        let resource_from_listen = self.resource.is_none();
        let resource = match self.resource {
            Some(r) => {
                let r = sub(&r, "auth.oauth.resource")?;
                check_url(&r, "auth.oauth.resource", file)?;
                r
            }
            None if listen.ip().is_unspecified() => invalid!(
                "{f}: auth.oauth.resource is needed when the gateway listens on all interfaces ({listen}): write the URL clients use, e.g. \"https://mcp.example.com/mcp\""
            ),
            None => format!("http://{listen}/mcp"),
        };
        let audience_from_resource = self.audience.is_none();
        let audience = match self.audience {
            Some(a) => sub(&a, "auth.oauth.audience")?,
            None => resource.clone(),
        };
        let jwks_url = match self.jwks_url {
            Some(u) => {
                let u = sub(&u, "auth.oauth.jwks_url")?;
                check_url(&u, "auth.oauth.jwks_url", file)?;
                Some(u)
            }
            None => None,
        };
        let introspection = match (self.introspection_url, self.client_id, self.client_secret) {
            (None, None, None) => None,
            (Some(url), Some(id), Some(secret)) => {
                let url = sub(&url, "auth.oauth.introspection_url")?;
                check_url(&url, "auth.oauth.introspection_url", file)?;
                Some(Introspection {
                    url,
                    client_id: sub(&id, "auth.oauth.client_id")?,
                    client_secret: sub(&secret, "auth.oauth.client_secret")?,
                })
            }
            _ => invalid!(
                "{f}: auth.oauth: introspection_url, client_id and client_secret go together (the gateway introspects opaque tokens as that client): set all three or none"
            ),
        };
        let algorithms = match self.algorithms {
            None => ASYMMETRIC.to_vec(),
            Some(names) if names.is_empty() => {
                invalid!("{f}: auth.oauth.algorithms is empty, so no token could be accepted: list e.g. [\"RS256\"], or leave it out for every asymmetric one")
            }
            Some(names) => {
                let mut algs = Vec::new();
                for n in names {
                    let alg: Algorithm = n.parse().ok().filter(|a| ASYMMETRIC.contains(a)).ok_or_else(|| {
                        crate::config_error::ConfigError::Invalid(format!(
                            "{f}: auth.oauth.algorithms: {n:?} is not accepted: use {} (symmetric HS* and \"none\" never are)",
                            ASYMMETRIC.map(|a| format!("{a:?}")).join(", ")
                        ))
                    })?;
                    algs.push(alg);
                }
                algs
            }
        };
        let known = |p: &str, key: &str| -> Result<()> {
            if profiles.contains_key(p) {
                return Ok(());
            }
            let names: Vec<&str> = profiles.keys().map(String::as_str).collect();
            invalid!(
                "{f}: {key}.profile: no profile {p:?}{}",
                if names.is_empty() {
                    format!(" is defined: add [policy.profiles.{p}]")
                } else {
                    format!("; the profiles are: {}", names.join(", "))
                }
            )
        };
        let mapping = |name: String, g: RawGrant, key: &str| -> Result<Mapping> {
            let scopes = g.scopes.unwrap_or_else(|| vec!["*".to_string()]);
            if scopes.is_empty() {
                invalid!("{f}: {key}.scopes is empty, so its tokens could call nothing: list globs such as \"github/*\", or leave it out for every tool");
            }
            if let Some(p) = &g.profile {
                known(p, key)?;
            }
            Ok(Mapping {
                name,
                scopes: PatternList::parse(&scopes),
                tier: g.tier.unwrap_or(Tier::Read),
                profile: g.profile,
                approval: g.approval,
            })
        };
        let default = mapping(
            "default".into(),
            self.default.unwrap_or_default(),
            "auth.oauth.default",
        )?;
        let mut rules: Vec<Rule> = Vec::new();
        for (i, r) in self.map.into_iter().enumerate() {
            let key = format!("auth.oauth.map[{i}]");
            let Some(claim) = r.claim else {
                invalid!("{f}: {key} needs `claim`: the claim to look at, e.g. \"groups\", \"roles\" or \"scope\"");
            };
            if r.values.is_empty() {
                invalid!("{f}: {key} needs `values`: the values of {claim:?} that select this rule, e.g. [\"admins\"]");
            }
            let name = r.name.unwrap_or_else(|| format!("map{i}"));
            if !toolgate_core::ids::is_simple_name(&name) || name == "default" {
                invalid!("{f}: {key}.name {name:?} is not allowed: use 1 to 48 letters, digits, '_', '-' or '.' (and not \"default\")");
            }
            if rules.iter().any(|o| o.mapping.name == name) {
                invalid!("{f}: {key}.name {name:?} is used twice: give each rule its own");
            }
            let grant = RawGrant {
                scopes: r.scopes,
                tier: r.tier,
                profile: r.profile,
                approval: r.approval,
            };
            rules.push(Rule {
                claim,
                values: r.values,
                mapping: mapping(name, grant, &key)?,
            });
        }
        Ok(OAuthConfig {
            issuer,
            resource,
            audience,
            resource_from_listen,
            audience_from_resource,
            jwks_url,
            introspection,
            required_scopes: self.required_scopes,
            algorithms,
            clock_skew: Duration::from_secs(self.clock_skew_secs.unwrap_or(60)),
            jwks_refresh_min: Duration::from_secs(self.jwks_refresh_min_secs.unwrap_or(30)),
            default,
            rules,
        })
    }
}

/// An `http(s)://host...` URL; plain `http` only for loopback (tokens and keys must not
/// cross a network in the clear).
fn check_url(url: &str, key: &str, file: &Path) -> Result<()> {
    let f = file.display();
    let Ok(parsed) = url.parse::<http::Uri>() else {
        invalid!("{f}: {key} = {url:?} is not a URL: write e.g. \"https://idp.example.com\"");
    };
    let host = parsed.host().unwrap_or("");
    match parsed.scheme_str() {
        Some("https") if !host.is_empty() => Ok(()),
        Some("http") if matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1") => Ok(()),
        Some("http") => {
            invalid!("{f}: {key} = {url:?}: plain http is accepted only on loopback; use https")
        }
        _ => invalid!(
            "{f}: {key} = {url:?} is not an http(s) URL: write e.g. \"https://idp.example.com\""
        ),
    }
}
