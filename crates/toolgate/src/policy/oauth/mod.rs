//! OAuth 2.1 at the front: the gateway as a resource server (the MCP authorization spec).
//!
//! A caller presents an access token its team's authorization server issued for this
//! gateway. [`Verifier`] checks it (a JWT against the issuer's published keys, or an opaque
//! token by introspection, RFC 7662), and maps its claims to a [`Grant`] by
//! `[[auth.oauth.map]]` rules. The grant's principal is the token's subject (`iss` + `sub`),
//! so everything a request leaves behind belongs to a person, not to a shared key. The token
//! itself goes nowhere: upstreams never see it.
//!
//! - [`config`]: `[auth.oauth]` in `toolgate.toml`.
//! - [`keys`]: the issuer's metadata and its signing keys (JWKS), cached, refetched on an
//!   unknown `kid` at most every `jwks_refresh_min_secs`.
//! - [`metadata`]: Protected Resource Metadata (RFC 9728) and the `WWW-Authenticate` answers.

pub(crate) mod config;
pub(crate) mod keys;
pub(crate) mod metadata;

pub(crate) use config::OAuthConfig;

use super::grant::Grant;
use jsonwebtoken::Validation;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use toolgate_core::principal::Principal;

/// A token longer than this is refused unread (a JWT with a few claims is under 2 KiB).
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// How long an introspection answer is reused (never past the token's own expiry).
const INTROSPECTION_TTL: Duration = Duration::from_secs(30);
/// How many introspection answers, and how many checked JWTs, are kept.
const INTROSPECTION_CACHE: usize = 10_000;
const CHECKED_CACHE: usize = 10_000;

/// Who a token speaks for: the issuer and the subject it names there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub iss: String,
    pub sub: String,
}

impl Subject {
    /// The principal that owns this subject's handles, sessions and state.
    pub fn principal(&self) -> Principal {
        Principal::subject(&self.iss, &self.sub)
    }
}

/// Why a token was not accepted. The messages say what to do and never repeat the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenRejection {
    #[error("the access token is not a token this gateway can read ({0}): get one from the authorization server")]
    Malformed(String),
    #[error("the access token is longer than {MAX_TOKEN_BYTES} bytes")]
    TooLarge,
    #[error("the access token is signed with {0}, which this gateway does not accept (auth.oauth.algorithms)")]
    Algorithm(String),
    #[error("the access token was signed with a key the authorization server does not publish")]
    UnknownKey,
    #[error("the access token's signature is not valid")]
    Signature,
    #[error("the access token has expired: get a new one (refresh it)")]
    Expired,
    #[error("the access token is not valid yet (its nbf is in the future)")]
    NotYetValid,
    #[error(
        "the access token was issued by another authorization server than this gateway's ({0})"
    )]
    Issuer(String),
    #[error("the access token was issued for another resource: ask for one with resource (audience) {0}")]
    Audience(String),
    #[error("the access token has no {0:?} claim")]
    MissingClaim(String),
    #[error("the access token has the claim {0:?} more than once")]
    DuplicateClaim(String),
    #[error("the access token is not active (revoked or expired at the authorization server)")]
    Inactive,
    #[error("the access token could not be checked: the authorization server did not answer ({0}); try again")]
    Unavailable(String),
    #[error("the access token lacks the scope this gateway requires: ask for scope {0:?}")]
    InsufficientScope(String),
}

impl TokenRejection {
    /// The RFC 6750 error code for `WWW-Authenticate`.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            TokenRejection::InsufficientScope(_) => "insufficient_scope",
            TokenRejection::Unavailable(_) => "temporarily_unavailable",
            _ => "invalid_token",
        }
    }

    /// The HTTP status: 403 for a missing scope, 503 when the issuer could not be asked, 401
    /// (the client gets or refreshes a token) otherwise.
    pub(crate) fn status(&self) -> u16 {
        match self {
            TokenRejection::InsufficientScope(_) => 403,
            TokenRejection::Unavailable(_) => 503,
            _ => 401,
        }
    }
}

/// A token that passed: who it is for, until when, and its claims.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    pub subject: Subject,
    pub expires: SystemTime,
    pub scopes: Vec<String>,
    pub claims: Map<String, Value>,
}

/// An introspection answer and when it was had (the key is the token's SHA-256).
type Introspected = (Instant, Result<Verified, TokenRejection>);

/// A checked JWT's grant, and until when it may be used (its `exp` plus the skew).
type Checked = (Arc<Grant>, SystemTime);

/// Checks access tokens for one `[auth.oauth]`. Cheap to share (`Arc`).
pub struct Verifier {
    pub(crate) config: OAuthConfig,
    keys: keys::KeyCache,
    http: reqwest::Client,
    introspected: Mutex<HashMap<[u8; 32], Introspected>>,
    /// JWTs already checked, by SHA-256: their grant, until their expiry (plus the skew). A
    /// client sends the same token with every request until it refreshes, and checking its
    /// RS256 signature again each time cost 60 µs of CPU per call (docs/auth.md).
    checked: Mutex<HashMap<[u8; 32], Checked>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier for `config`; the issuer's keys are fetched on the first token (or by [`Verifier::warm`]).
    pub fn new(config: OAuthConfig) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Arc::new(Self {
            keys: keys::KeyCache::new(&config, http.clone()),
            config,
            http,
            introspected: Mutex::new(HashMap::new()),
            checked: Mutex::new(HashMap::new()),
        })
    }

    /// Fetches the issuer's metadata and keys now (at start): a failure is reported, and
    /// tried again on the first token.
    pub async fn warm(&self) -> Result<usize, keys::FetchError> {
        self.keys.refresh(true).await
    }

    /// Checks `token` and maps it to a grant. A JWT checked before is not checked again
    /// until it expires (its signature, issuer, audience and scopes cannot have changed).
    pub(crate) async fn authenticate(&self, token: &str) -> Result<Arc<Grant>, TokenRejection> {
        use sha2::{Digest, Sha256};
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = SystemTime::now();
        {
            let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
            match checked.get(&digest) {
                Some((grant, until)) if now < *until => return Ok(grant.clone()),
                Some(_) => {
                    checked.remove(&digest);
                }
                None => {}
            }
        }
        let v = self.verify(token).await?;
        let grant = self.grant(&v, token);
        if token.split('.').count() == 3 {
            let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
            if checked.len() >= CHECKED_CACHE {
                checked.retain(|_, (_, until)| now < *until);
                if checked.len() >= CHECKED_CACHE {
                    checked.clear();
                }
            }
            checked.insert(digest, (grant.clone(), v.expires + self.config.clock_skew));
        }
        Ok(grant)
    }

    /// The grant of a verified token: the first `[[auth.oauth.map]]` rule that matches its
    /// claims, else `[auth.oauth.default]`. The grant keeps `token`, for an upstream that
    /// exchanges it (RFC 8693) for one of its own.
    pub(crate) fn grant(&self, v: &Verified, token: &str) -> Arc<Grant> {
        let mapping = (self.config.rules.iter())
            .find(|r| {
                claim_values(&v.claims, &r.claim)
                    .iter()
                    .any(|x| r.values.iter().any(|want| want == x))
            })
            .map_or(&self.config.default, |r| &r.mapping);
        mapping.grant(&v.subject, v.expires, token)
    }

    /// Checks a token: signature, issuer, audience, time, the required scopes.
    pub(crate) async fn verify(&self, token: &str) -> Result<Verified, TokenRejection> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenRejection::TooLarge);
        }
        let v = if token.split('.').count() == 3 {
            self.verify_jwt(token).await?
        } else if self.config.introspection.is_some() {
            self.introspect(token).await?
        } else {
            return Err(TokenRejection::Malformed("not a JWT".into()));
        };
        let missing: Vec<&str> = (self.config.required_scopes.iter())
            .filter(|s| !v.scopes.contains(s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(TokenRejection::InsufficientScope(
                self.config.required_scopes.join(" "),
            ));
        }
        Ok(v)
    }

    async fn verify_jwt(&self, token: &str) -> Result<Verified, TokenRejection> {
        // The algorithm by name first, so `none` or `HS256` is refused as what it is.
        let alg = header_alg(token)?;
        let allowed = (self.config.algorithms.iter()).any(|a| format!("{a:?}") == alg);
        if !allowed {
            return Err(TokenRejection::Algorithm(alg));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| TokenRejection::Malformed(format!("its header: {e}")))?;
        if !self.config.algorithms.contains(&header.alg) {
            return Err(TokenRejection::Algorithm(format!("{:?}", header.alg)));
        }
        let key = self.keys.key_for(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.leeway = self.config.clock_skew.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| self.rejection(e))?;
        let claims = data.claims;
        let sub = match claims.get("sub") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(TokenRejection::MissingClaim("sub".into())),
        };
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok(Verified {
            subject: Subject {
                iss: self.config.issuer.clone(),
                sub,
            },
            expires: UNIX_EPOCH + Duration::from_secs(exp),
            scopes: scopes_of(&claims),
            claims,
        })
    }

    fn rejection(&self, e: jsonwebtoken::errors::Error) -> TokenRejection {
        use jsonwebtoken::errors::ErrorKind as K;
        match e.kind() {
            K::ExpiredSignature => TokenRejection::Expired,
            K::ImmatureSignature => TokenRejection::NotYetValid,
            K::InvalidIssuer => TokenRejection::Issuer(self.config.issuer.clone()),
            K::InvalidAudience => TokenRejection::Audience(self.config.audience.clone()),
            K::InvalidSignature => TokenRejection::Signature,
            K::InvalidAlgorithm | K::InvalidAlgorithmName => {
                TokenRejection::Algorithm("an algorithm that does not match its key".into())
            }
            K::MissingRequiredClaim(c) => TokenRejection::MissingClaim(c.clone()),
            // Parsers disagree on which of two equal claims wins: such a token is refused.
            K::Json(e) if e.to_string().starts_with("duplicate field") => {
                let name = e.to_string().split('`').nth(1).unwrap_or("?").to_string();
                TokenRejection::DuplicateClaim(name)
            }
            K::InvalidEcdsaKey | K::InvalidRsaKey(_) | K::InvalidKeyFormat => {
                TokenRejection::UnknownKey
            }
            _ => TokenRejection::Malformed(e.to_string()),
        }
    }

    /// RFC 7662: asks the authorization server about an opaque token (answers reused for
    /// [`INTROSPECTION_TTL`], never past the token's expiry).
    async fn introspect(&self, token: &str) -> Result<Verified, TokenRejection> {
        use sha2::{Digest, Sha256};
        let Some(intro) = &self.config.introspection else {
            return Err(TokenRejection::Malformed("not a JWT".into()));
        };
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some((at, answer)) = self.cached(&digest) {
            let fresh = at.elapsed() < INTROSPECTION_TTL;
            let alive = answer
                .as_ref()
                .map_or(true, |v| v.expires > SystemTime::now());
            if fresh && alive {
                return answer;
            }
        }
        let response = (self.http.post(&intro.url))
            .basic_auth(&intro.client_id, Some(&intro.client_secret))
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .map_err(|e| TokenRejection::Unavailable(keys::reqwest_reason(&e)))?;
        if !response.status().is_success() {
            return Err(TokenRejection::Unavailable(format!(
                "introspection answered {}",
                response.status()
            )));
        }
        let body: Map<String, Value> = response
            .json()
            .await
            .map_err(|e| TokenRejection::Unavailable(format!("introspection: {e}")))?;
        let answer = self.judge_introspection(body);
        let mut cache = self.introspected.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= INTROSPECTION_CACHE {
            cache.retain(|_, (at, _)| at.elapsed() < INTROSPECTION_TTL);
            if cache.len() >= INTROSPECTION_CACHE {
                cache.clear();
            }
        }
        cache.insert(digest, (Instant::now(), answer.clone()));
        answer
    }

    fn cached(&self, digest: &[u8; 32]) -> Option<Introspected> {
        let cache = self.introspected.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(digest).cloned()
    }

    /// An introspection answer as a verdict: active, ours, for us, in time.
    fn judge_introspection(&self, claims: Map<String, Value>) -> Result<Verified, TokenRejection> {
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(TokenRejection::Inactive);
        }
        if let Some(iss) = claims.get("iss") {
            if iss.as_str() != Some(&self.config.issuer) {
                return Err(TokenRejection::Issuer(self.config.issuer.clone()));
            }
        }
        // `aud` is optional in RFC 7662; when present it must name this gateway.
        if claims.contains_key("aud")
            && !claim_values(&claims, "aud").contains(&self.config.audience)
        {
            return Err(TokenRejection::Audience(self.config.audience.clone()));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let skew = self.config.clock_skew.as_secs();
        let exp = claims.get("exp").and_then(Value::as_u64);
        if exp.is_some_and(|e| e + skew < now) {
            return Err(TokenRejection::Expired);
        }
        if claims
            .get("nbf")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > now + skew)
        {
            return Err(TokenRejection::NotYetValid);
        }
        // RFC 7662 makes `sub` optional: a client-credentials token may name only its
        // client, which is then the subject, marked so no client can pass for a person.
        let sub = match (claims.get("sub"), claims.get("client_id")) {
            (Some(Value::String(s)), _) if !s.is_empty() => s.clone(),
            (_, Some(Value::String(c))) if !c.is_empty() => format!("client:{c}"),
            _ => return Err(TokenRejection::MissingClaim("sub".into())),
        };
        Ok(Verified {
            subject: Subject {
                iss: self.config.issuer.clone(),
                sub,
            },
            expires: UNIX_EPOCH + Duration::from_secs(exp.unwrap_or(now + 300)),
            scopes: scopes_of(&claims),
            claims,
        })
    }
}

/// The `alg` a JWT's header names.
fn header_alg(token: &str) -> Result<String, TokenRejection> {
    use base64::Engine as _;
    let head = token.split('.').next().unwrap_or("");
    let bytes = (base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(head))
        .map_err(|_| TokenRejection::Malformed("its header is not base64url".into()))?;
    let header: Value = serde_json::from_slice(&bytes)
        .map_err(|_| TokenRejection::Malformed("its header is not JSON".into()))?;
    match header.get("alg") {
        Some(Value::String(alg)) => Ok(alg.chars().take(32).collect()),
        _ => Err(TokenRejection::Malformed("its header names no alg".into())),
    }
}

/// A claim's values as strings: a string (space-separated for `scope`), a list of strings,
/// or a number or boolean as written.
pub(crate) fn claim_values(claims: &Map<String, Value>, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(Value::String(s)) if claim == "scope" => {
            s.split_whitespace().map(str::to_string).collect()
        }
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
                _ => None,
            })
            .collect(),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => vec![v.to_string()],
        _ => Vec::new(),
    }
}

/// The scopes a token carries: `scope` (RFC 9068, space-separated) or `scp` (a list, as
/// some providers write it).
fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    let mut scopes = claim_values(claims, "scope");
    for s in claim_values(claims, "scp") {
        scopes.extend(s.split_whitespace().map(str::to_string));
    }
    scopes
}

#[cfg(test)]
mod tests;
