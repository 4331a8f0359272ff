//! The issuer's signing keys: its metadata discovered (RFC 8414, then OpenID Connect
//! Discovery), its JWKS fetched and kept. A token whose `kid` is not among them makes one
//! refetch (the issuer rotated its keys), at most every `jwks_refresh_min_secs`, so a
//! flood of made-up `kid`s cannot turn into a flood of requests to the issuer.

use super::{OAuthConfig, TokenRejection};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Why the issuer's metadata or signing keys could not be fetched. The message names the
/// URL and says what to set; [`FetchError::retryable`] says whether asking again can help.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No answer: the address, the connection or TLS failed (`reason` is reqwest's chain).
    #[error("{url}: {reason}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// What the connection said, causes included.
        reason: String,
    },
    /// An answer other than 2xx.
    #[error("{url} answered {status}")]
    Status {
        /// The URL asked.
        url: String,
        /// The status it answered.
        status: reqwest::StatusCode,
    },
    /// A document over the 1 MiB the gateway reads.
    #[error("{url}: the document is over 1 MiB")]
    TooLarge {
        /// The URL asked.
        url: String,
    },
    /// Not the JSON expected (metadata or a JWKS).
    #[error("{url}: not the expected JSON ({source})")]
    NotJson {
        /// The URL asked.
        url: String,
        /// What the JSON reader said.
        source: serde_json::Error,
    },
    /// The metadata names another issuer than the one configured.
    #[error("{url} names the issuer {named:?}, not {issuer:?}: set auth.oauth.issuer to exactly the issuer's identifier")]
    WrongIssuer {
        /// The metadata's URL.
        url: String,
        /// The issuer the metadata names.
        named: String,
        /// The issuer configured.
        issuer: String,
    },
    /// Neither well-known URL gave metadata.
    #[error("no authorization server metadata for {issuer}: {}", join(.tried))]
    NoMetadata {
        /// The issuer configured.
        issuer: String,
        /// What each well-known URL answered.
        tried: Vec<FetchError>,
    },
    /// The metadata names no `jwks_uri`.
    #[error("the metadata of {issuer} names no jwks_uri: set auth.oauth.jwks_url")]
    NoJwksUri {
        /// The issuer configured.
        issuer: String,
    },
    /// The JWKS has no key the gateway can verify with.
    #[error("{url} lists no signing key this gateway can use")]
    NoSigningKey {
        /// The JWKS's URL.
        url: String,
    },
}

impl FetchError {
    /// Whether asking again later can help (the server unreachable or failing), as opposed
    /// to a configuration or a document that has to change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::Status { status, .. } => status.is_server_error(),
            Self::NoMetadata { tried, .. } => tried.iter().any(Self::retryable),
            _ => false,
        }
    }
}

fn join(errors: &[FetchError]) -> String {
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// One usable key from the JWKS.
struct Key {
    kid: Option<String>,
    /// The algorithm the JWK pins (`alg`), if any.
    alg: Option<Algorithm>,
    family: Family,
    key: DecodingKey,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Okp,
}

fn family_of(alg: Algorithm) -> Option<Family> {
    use Algorithm::*;
    match alg {
        RS256 | RS384 | RS512 | PS256 | PS384 | PS512 => Some(Family::Rsa),
        ES256 | ES384 => Some(Family::Ec),
        EdDSA => Some(Family::Okp),
        HS256 | HS384 | HS512 => None,
    }
}

#[derive(Default)]
struct Keys {
    keys: Vec<Arc<Key>>,
    /// When the set was last fetched (or last tried).
    fetched: Option<Instant>,
    /// The JWKS URL, once discovered.
    jwks_url: Option<String>,
    /// Why the last fetch failed (cleared by one that works).
    error: Option<String>,
}

/// While no key is held (the issuer was down at start), every token may make a fetch: the
/// gateway heals as soon as the issuer is back. Fetches stay one at a time, and the tokens
/// that waited for one use its outcome (`refresh`), so a flood makes no more of them.
const EMPTY_FLOOR: Duration = Duration::ZERO;

/// The cached keys of one issuer.
pub(crate) struct KeyCache {
    issuer: String,
    configured_jwks: Option<String>,
    floor: Duration,
    http: reqwest::Client,
    keys: RwLock<Keys>,
    /// One refetch at a time; the others wait for it and use its keys.
    refreshing: tokio::sync::Mutex<()>,
}

impl KeyCache {
    pub(crate) fn new(config: &OAuthConfig, http: reqwest::Client) -> Self {
        Self {
            issuer: config.issuer.clone(),
            configured_jwks: config.jwks_url.clone(),
            floor: config.jwks_refresh_min,
            http,
            keys: RwLock::new(Keys::default()),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// The key that verifies a token with this `kid` and `alg`.
    pub(crate) async fn key_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, TokenRejection> {
        if let Some(k) = self.find(kid, alg) {
            return Ok(k.key.clone());
        }
        let never_fetched = self.read().fetched.is_none();
        if let Err(e) = self.refresh(never_fetched).await {
            tracing::warn!("auth.oauth: fetching the issuer's keys failed: {e}");
        }
        let failed = {
            let keys = self.read();
            keys.keys.is_empty().then(|| keys.error.clone()).flatten()
        };
        if let Some(e) = failed {
            return Err(TokenRejection::Unavailable(e));
        }
        self.find(kid, alg)
            .map(|k| k.key.clone())
            .ok_or(TokenRejection::UnknownKey)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Keys> {
        self.keys.read().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<Arc<Key>> {
        let family = family_of(alg)?;
        let keys = self.read();
        let fits = |k: &&Arc<Key>| k.family == family && k.alg.is_none_or(|a| a == alg);
        match kid {
            Some(kid) => keys
                .keys
                .iter()
                .filter(fits)
                .find(|k| k.kid.as_deref() == Some(kid))
                .cloned(),
            // No `kid`: only when exactly one key could have signed it.
            None => {
                let mut fitting = keys.keys.iter().filter(fits);
                match (fitting.next(), fitting.next()) {
                    (Some(k), None) => Some(k.clone()),
                    _ => None,
                }
            }
        }
    }

    /// Fetches the keys again, unless they were fetched less than the floor ago (`force`
    /// ignores the floor: the first fetch). Returns how many keys are usable.
    pub(crate) async fn refresh(&self, force: bool) -> Result<usize, FetchError> {
        let before = self.read().fetched;
        let _one = self.refreshing.lock().await;
        {
            let keys = self.read();
            // Another request refetched while this one waited: use its keys.
            if keys.fetched != before && keys.fetched.is_some() {
                return Ok(keys.keys.len());
            }
            let floor = if keys.keys.is_empty() {
                EMPTY_FLOOR
            } else {
                self.floor
            };
            if !force && keys.fetched.is_some_and(|t| t.elapsed() < floor) {
                return Ok(keys.keys.len());
            }
        }
        let result = self.fetch().await;
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        keys.fetched = Some(Instant::now());
        match result {
            Ok((url, set)) => {
                keys.jwks_url = Some(url);
                keys.keys = set;
                keys.error = None;
                Ok(keys.keys.len())
            }
            Err(e) => {
                keys.error = Some(e.to_string());
                Err(e)
            }
        }
    }

    async fn fetch(&self) -> Result<(String, Vec<Arc<Key>>), FetchError> {
        let known = (self.configured_jwks.clone()).or_else(|| self.read().jwks_url.clone());
        let url = match known {
            Some(u) => u,
            None => Some(discover(&self.http, &self.issuer).await?.jwks_uri)
                .filter(|u| !u.is_empty())
                .ok_or_else(|| FetchError::NoJwksUri {
                    issuer: self.issuer.clone(),
                })?,
        };
        let set: JwkSet = get_json(&self.http, &url).await?;
        let keys: Vec<Arc<Key>> = set
            .keys
            .iter()
            .filter(|j| !matches!(j.common.public_key_use, Some(PublicKeyUse::Encryption)))
            .filter_map(|j| {
                let family = match &j.algorithm {
                    AlgorithmParameters::RSA(_) => Family::Rsa,
                    AlgorithmParameters::EllipticCurve(_) => Family::Ec,
                    AlgorithmParameters::OctetKeyPair(_) => Family::Okp,
                    // A symmetric key in a public set is never used.
                    AlgorithmParameters::OctetKey(_) => return None,
                };
                let alg = j.common.key_algorithm.and_then(signing_alg);
                Some(Arc::new(Key {
                    kid: j.common.key_id.clone(),
                    alg,
                    family,
                    key: DecodingKey::from_jwk(j).ok()?,
                }))
            })
            .collect();
        if keys.is_empty() {
            return Err(FetchError::NoSigningKey { url });
        }
        Ok((url, keys))
    }
}

fn signing_alg(k: KeyAlgorithm) -> Option<Algorithm> {
    use KeyAlgorithm as K;
    Some(match k {
        K::RS256 => Algorithm::RS256,
        K::RS384 => Algorithm::RS384,
        K::RS512 => Algorithm::RS512,
        K::PS256 => Algorithm::PS256,
        K::PS384 => Algorithm::PS384,
        K::PS512 => Algorithm::PS512,
        K::ES256 => Algorithm::ES256,
        K::ES384 => Algorithm::ES384,
        K::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// What the gateway reads of an authorization server's metadata.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ServerMetadata {
    pub issuer: String,
    #[serde(default)]
    pub jwks_uri: String,
    #[serde(default)]
    pub token_endpoint: Option<String>,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
}

/// The issuer's metadata: RFC 8414's well-known URL (path-inserted), then OpenID Connect
/// Discovery's (path-appended). The document's `issuer` must be the one configured.
pub(crate) async fn discover(
    http: &reqwest::Client,
    issuer: &str,
) -> Result<ServerMetadata, FetchError> {
    let trimmed = issuer.trim_end_matches('/');
    let (origin, path) = match trimmed.find("://").map(|i| i + 3) {
        Some(start) => match trimmed[start..].find('/') {
            Some(p) => trimmed.split_at(start + p),
            None => (trimmed, ""),
        },
        None => (trimmed, ""),
    };
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ];
    let mut errors = Vec::new();
    for url in candidates {
        match get_json::<ServerMetadata>(http, &url).await {
            Ok(m) if m.issuer == issuer => return Ok(m),
            Ok(m) => {
                return Err(FetchError::WrongIssuer {
                    url,
                    named: m.issuer,
                    issuer: issuer.to_string(),
                })
            }
            Err(e) => errors.push(e),
        }
    }
    Err(FetchError::NoMetadata {
        issuer: issuer.to_string(),
        tried: errors,
    })
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, FetchError> {
    let unreachable = |e: reqwest::Error| FetchError::Unreachable {
        url: url.to_string(),
        reason: reqwest_reason(&e),
    };
    let response = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(unreachable)?;
    if !response.status().is_success() {
        return Err(FetchError::Status {
            url: url.to_string(),
            status: response.status(),
        });
    }
    let bytes = response.bytes().await.map_err(unreachable)?;
    if bytes.len() > 1024 * 1024 {
        return Err(FetchError::TooLarge {
            url: url.to_string(),
        });
    }
    serde_json::from_slice(&bytes).map_err(|source| FetchError::NotJson {
        url: url.to_string(),
        source,
    })
}

/// A reqwest error's cause, without the URL it already names.
pub(crate) fn reqwest_reason(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}
