//! An HTTP upstream that wants an OAuth access token (`[upstreams.NAME.oauth]`). Either the
//! gateway is a machine client of the server's authorization server (client credentials,
//! with the upstream's URL as the RFC 8707 resource), or an operator logged in once with
//! `toolgate auth login NAME` (authorization code with PKCE, the client registered
//! dynamically where the server offers it, a loopback redirect) and the gateway keeps the
//! tokens, sealed in the state store, and refreshes them. The token is kept and asked for
//! again shortly before it expires, or at once when the server answers 401. It is the
//! gateway's own identity at the server: a caller's token is never passed on (the MCP
//! authorization spec forbids token passthrough). For a user-delegated server
//! (`grant = "token_exchange"`) each caller's session has a source of its own
//! (`TokenSource::delegated`) that exchanges the caller's token for one of the server
//! (`exchange.rs`, RFC 8693) and keeps it the same way; the shared connection, which lists
//! the tools, is the gateway's client (client credentials). The login itself is
//! `login.rs`. Why there is no token is a [`TokenError`]; why a token endpoint gave none,
//! an [`EndpointError`].

use super::exchange::ExchangeError;
use crate::config::upstream::{OAuthGrant, TokenEndpoint, UpstreamOAuth};
use crate::policy::oauth::keys::{discover, reqwest_reason, FetchError};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use toolgate_core::call::{AccessToken, Exchange};
use toolgate_core::principal::Principal;
use toolgate_core::store::{Kind, Lookup, Record, Store, StoreFault};

/// A token is asked for again this long before the server would refuse it.
const EARLY: Duration = Duration::from_secs(30);
/// Who owns the stored logins (they are the gateway's, not a caller's).
const OWNER: &str = "toolgate";
/// How long a stored login is kept (renewed by every refresh).
const LOGIN_TTL: Duration = Duration::from_secs(3650 * 24 * 3600);

/// One upstream's token, fetched on demand and kept.
pub(crate) struct TokenSource {
    upstream: String,
    config: UpstreamOAuth,
    http: reqwest::Client,
    cached: tokio::sync::Mutex<Option<Cached>>,
    /// Where `toolgate auth login` left the tokens (set once the gateway has its store).
    store: OnceLock<Arc<dyn Store>>,
    /// A caller's session of a token-exchange upstream: whom it acts for, and the caller's
    /// latest access token (the next exchange presents it). `None`: the gateway's own.
    delegate: Option<(Principal, std::sync::Mutex<Option<AccessToken>>)>,
}

struct Cached {
    token: String,
    renew_at: Instant,
}

/// What `toolgate auth login` keeps for an upstream (sealed by the store).
#[derive(Clone, Serialize, Deserialize)]
pub struct Login {
    /// The authorization server's issuer.
    pub issuer: String,
    /// Its token endpoint (for refreshes).
    pub token_endpoint: String,
    /// The client the gateway logged in as.
    pub client_id: String,
    /// Its secret, if the server registered one.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The resource (the upstream's URL) the tokens are for.
    pub resource: String,
    /// The current access token.
    pub access_token: String,
    /// The refresh token, if the server gave one.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// When the access token expires, milliseconds since the Unix epoch.
    pub expires_ms: u64,
}

/// Why a token endpoint gave no access token.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// No answer: the connection failed (`reason` is reqwest's chain).
    #[error("{url}: {reason}")]
    Unreachable {
        /// The endpoint.
        url: String,
        /// What the connection said, causes included.
        reason: String,
    },
    /// An answer that is not JSON.
    #[error("{url} answered {status} with no JSON ({source})")]
    NotJson {
        /// The endpoint.
        url: String,
        /// The answer's status.
        status: reqwest::StatusCode,
        /// What reading it as JSON said.
        source: reqwest::Error,
    },
    /// The server refused the request (RFC 6749 §5.2: `error` and `error_description`,
    /// never a secret).
    #[error("{url} refused client {client_id:?}: {status} {error} {description}")]
    Refused {
        /// The endpoint.
        url: String,
        /// The client the gateway asked as.
        client_id: String,
        /// The answer's status.
        status: reqwest::StatusCode,
        /// Its `error`, `?` when it named none.
        error: String,
        /// Its `error_description`.
        description: String,
    },
    /// A success without an `access_token`.
    #[error("{url} answered without an access_token")]
    NoAccessToken {
        /// The endpoint.
        url: String,
    },
}

impl EndpointError {
    /// Whether asking again later can help: the server unreachable or failing, as opposed
    /// to a refusal or an answer that will not change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::NotJson { status, .. } | Self::Refused { status, .. } => {
                status.is_server_error() || *status == reqwest::StatusCode::TOO_MANY_REQUESTS
            }
            Self::NoAccessToken { .. } => false,
        }
    }
}

/// Why an upstream's `TokenSource` has no access token to give.
#[derive(Debug, thiserror::Error)]
#[error("upstreams.{upstream}.oauth: no access token: {reason}")]
pub(crate) struct TokenError {
    upstream: String,
    #[source]
    reason: TokenFailure,
}

/// What kept a token from the gateway (`TokenError`'s reason).
#[derive(Debug, thiserror::Error)]
enum TokenFailure {
    /// Neither `issuer` nor `token_url` is configured.
    #[error("no issuer or token_url")]
    NoEndpoint,
    /// The issuer's metadata could not be read.
    #[error("{0}")]
    Metadata(#[source] FetchError),
    /// The issuer's metadata names no token endpoint.
    #[error("the metadata of {issuer} names no token_endpoint")]
    NoTokenEndpoint { issuer: String },
    /// The token endpoint gave none.
    #[error("{0}")]
    Endpoint(#[from] EndpointError),
    /// A login is asked for, but the state store is in memory.
    #[error("the gateway keeps its state in memory, where no login is kept: use an embedded or redis [store]")]
    InMemory,
    /// Nobody ran `toolgate auth login` for this upstream.
    #[error("nobody has logged in to it yet: run `toolgate auth login {upstream}`")]
    NotLoggedIn { upstream: String },
    /// The login's token expired and cannot be refreshed.
    #[error("the login's access token expired and it has no refresh token: run `toolgate auth login {upstream}` again")]
    LoginExpired { upstream: String },
    /// Refreshing the login's token failed.
    #[error("refreshing the login failed ({source}): run `toolgate auth login {upstream}` again")]
    RefreshFailed {
        upstream: String,
        source: EndpointError,
    },
    /// The stored login could not be read or written.
    #[error("{0}")]
    Stored(#[from] LoginStoreError),
    /// A caller's session has no token of the caller to exchange yet.
    #[error("no access token of the caller to exchange")]
    NoCallerToken,
    /// The exchange of the caller's token failed.
    #[error("{0}")]
    Exchange(#[source] ExchangeError),
}

pub(super) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

impl TokenSource {
    pub(crate) fn new(upstream: &str, config: UpstreamOAuth) -> Self {
        Self {
            upstream: upstream.to_string(),
            config,
            http: client(),
            cached: tokio::sync::Mutex::new(None),
            store: OnceLock::new(),
            delegate: None,
        }
    }

    /// The source of one caller's session of a token-exchange upstream: every token it
    /// gives is exchanged from that caller's access token.
    pub(crate) fn delegated(upstream: &str, config: UpstreamOAuth, principal: Principal) -> Self {
        Self {
            delegate: Some((principal, std::sync::Mutex::new(None))),
            ..Self::new(upstream, config)
        }
    }

    /// For a caller's session: makes sure a token exchanged from the caller's access token
    /// is at hand for the call about to be made (`token`, the one this call presented, is
    /// what the next exchange uses). Says whether it was exchanged now or kept from before.
    pub(crate) async fn exchange_for(
        &self,
        token: &AccessToken,
    ) -> Result<Exchange, super::exchange::ExchangeError> {
        let Some((who, subject)) = &self.delegate else {
            unreachable!("exchange_for is asked of a caller's session's source only")
        };
        *subject.lock().unwrap_or_else(|e| e.into_inner()) = Some(token.clone());
        let mut cached = self.cached.lock().await;
        if let Some(c) = &*cached {
            if Instant::now() < c.renew_at {
                return Ok(Exchange::Cached);
            }
        }
        let fresh = self.exchanged(who, token).await?;
        *cached = Some(fresh);
        tracing::info!(upstream = %self.upstream, principal = %who, "exchanged the caller's access token for one of the upstream (RFC 8693)");
        Ok(Exchange::New)
    }

    /// One exchange of `token`, the access token of `who`.
    async fn exchanged(
        &self,
        who: &Principal,
        token: &AccessToken,
    ) -> Result<Cached, super::exchange::ExchangeError> {
        use super::exchange::{exchange, ExchangeError, Request};
        let endpoint = self
            .token_url()
            .await
            .map_err(|reason| ExchangeError::Failed {
                caller: who.label(),
                endpoint: "the token endpoint".into(),
                reason: reason.to_string(),
            })?;
        let request = Request {
            endpoint: &endpoint,
            client_id: self.config.client_id.as_deref().unwrap_or_default(),
            client_secret: self.config.client_secret.as_deref().unwrap_or_default(),
            resource: &self.config.resource,
            audience: self.config.audience.as_deref(),
            scope: &self.config.scopes.join(" "),
        };
        let (token, lifetime) = exchange(&self.http, &request, token, &who.label()).await?;
        Ok(Cached {
            token: token.secret().to_string(),
            renew_at: renew_at(lifetime),
        })
    }

    /// The state store the logins are in.
    pub(crate) fn use_store(&self, store: Arc<dyn Store>) {
        let _ = self.store.set(store);
    }

    /// The current access token, fetched when there is none or it is about to expire.
    pub(crate) async fn bearer(&self) -> Result<String, TokenError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = &*cached {
            if Instant::now() < c.renew_at {
                return Ok(c.token.clone());
            }
        }
        let fresh = match (self.config.grant, &self.delegate) {
            (OAuthGrant::ClientCredentials, _) | (OAuthGrant::TokenExchange, None) => {
                self.client_credentials().await
            }
            (OAuthGrant::AuthorizationCode, _) => self.login_token().await,
            (OAuthGrant::TokenExchange, Some((who, subject))) => {
                let token = subject.lock().unwrap_or_else(|e| e.into_inner()).clone();
                match token {
                    Some(token) => self
                        .exchanged(who, &token)
                        .await
                        .map_err(TokenFailure::Exchange),
                    None => Err(TokenFailure::NoCallerToken),
                }
            }
        }
        .map_err(|reason| TokenError {
            upstream: self.upstream.clone(),
            reason,
        })?;
        let token = fresh.token.clone();
        *cached = Some(fresh);
        Ok(token)
    }

    /// The server refused the token (401): the next request asks for a new one.
    pub(crate) fn invalidate(&self) {
        if let Ok(mut cached) = self.cached.try_lock() {
            *cached = None;
        }
    }

    /// The token endpoint: `token_url`, or the one the issuer's metadata names.
    async fn token_url(&self) -> Result<String, TokenFailure> {
        match &self.config.endpoint {
            Some(TokenEndpoint::Url(u)) => Ok(u.clone()),
            Some(TokenEndpoint::Issuer(issuer)) => discover(&self.http, issuer)
                .await
                .map_err(TokenFailure::Metadata)?
                .token_endpoint
                .ok_or_else(|| TokenFailure::NoTokenEndpoint {
                    issuer: issuer.clone(),
                }),
            None => Err(TokenFailure::NoEndpoint),
        }
    }

    async fn client_credentials(&self) -> Result<Cached, TokenFailure> {
        let url = self.token_url().await?;
        let scope = self.config.scopes.join(" ");
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("resource", self.config.resource.as_str()),
        ];
        if !scope.is_empty() {
            form.push(("scope", scope.as_str()));
        }
        let id = self.config.client_id.as_deref().unwrap_or_default();
        let secret = self.config.client_secret.as_deref();
        let body = token_request(&self.http, &url, &form, id, secret).await?;
        let (token, lifetime) = access_token(&body, &url)?;
        Ok(Cached {
            token,
            renew_at: renew_at(lifetime),
        })
    }

    /// The stored login's access token, refreshed (and stored again) when it is due.
    async fn login_token(&self) -> Result<Cached, TokenFailure> {
        let store = self.store.get().ok_or(TokenFailure::InMemory)?;
        let mut login =
            load(store.as_ref(), &self.upstream)?.ok_or_else(|| TokenFailure::NotLoggedIn {
                upstream: self.upstream.clone(),
            })?;
        let now = toolgate_core::store::now_ms();
        if login.expires_ms > now + EARLY.as_millis() as u64 {
            let left = Duration::from_millis(login.expires_ms - now);
            return Ok(Cached {
                token: login.access_token,
                renew_at: Instant::now() + left - EARLY,
            });
        }
        let Some(refresh) = login.refresh_token.clone() else {
            return Err(TokenFailure::LoginExpired {
                upstream: self.upstream.clone(),
            });
        };
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.as_str()),
            ("client_id", login.client_id.as_str()),
            ("resource", login.resource.as_str()),
        ];
        let body = token_request(
            &self.http,
            &login.token_endpoint,
            &form,
            &login.client_id,
            login.client_secret.as_deref(),
        )
        .await
        .map_err(|source| TokenFailure::RefreshFailed {
            upstream: self.upstream.clone(),
            source,
        })?;
        let (token, lifetime) = access_token(&body, &login.token_endpoint)?;
        login.access_token = token.clone();
        // Servers that rotate refresh tokens send a new one; others keep the old.
        if let Some(r) = body["refresh_token"].as_str() {
            login.refresh_token = Some(r.to_string());
        }
        login.expires_ms = toolgate_core::store::now_ms() + lifetime.as_millis() as u64;
        save(store.as_ref(), &self.upstream, &login)?;
        tracing::info!(upstream = %self.upstream, "refreshed the login's access token (kept in the state store)");
        Ok(Cached {
            token,
            renew_at: renew_at(lifetime),
        })
    }
}

fn renew_at(lifetime: Duration) -> Instant {
    Instant::now() + lifetime.saturating_sub(EARLY).max(lifetime / 2)
}

/// POSTs a token request (HTTP Basic when there is a secret, else the client id in the
/// form) and returns the JSON answer, or the server's `error` and `error_description`.
pub(super) async fn token_request(
    http: &reqwest::Client,
    url: &str,
    form: &[(&str, &str)],
    client_id: &str,
    secret: Option<&str>,
) -> Result<serde_json::Value, EndpointError> {
    let mut request = http.post(url);
    let mut fields: Vec<(&str, &str)> = form.to_vec();
    match secret {
        Some(s) => request = request.basic_auth(client_id, Some(s)),
        None if !fields.iter().any(|(k, _)| *k == "client_id") => {
            fields.push(("client_id", client_id))
        }
        None => {}
    }
    let (status, body) = json_answer(request.form(&fields), url).await?;
    if !status.is_success() {
        // RFC 6749 §5.2: `error` and `error_description` say why (never a secret).
        return Err(EndpointError::Refused {
            url: url.to_string(),
            client_id: client_id.to_string(),
            status,
            error: body["error"].as_str().unwrap_or("?").to_string(),
            description: body["error_description"].as_str().unwrap_or("").to_string(),
        });
    }
    Ok(body)
}

pub(super) fn access_token(
    body: &serde_json::Value,
    url: &str,
) -> Result<(String, Duration), EndpointError> {
    let token = body["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| EndpointError::NoAccessToken {
            url: url.to_string(),
        })?
        .to_string();
    Ok((
        token,
        Duration::from_secs(body["expires_in"].as_u64().unwrap_or(300)),
    ))
}

/// Why a login could not be read from, or written to, the state store.
#[derive(Debug, thiserror::Error)]
pub enum LoginStoreError {
    /// The state store failed (its message says how, and whether to retry).
    #[error("{0}")]
    Store(StoreFault),
    /// The stored login is not one this version reads.
    #[error("the stored login cannot be read ({0}): log in again")]
    Unreadable(serde_json::Error),
}

/// The login kept for `upstream`, if any.
pub fn load(store: &dyn Store, upstream: &str) -> Result<Option<Login>, LoginStoreError> {
    let now = toolgate_core::store::now_ms();
    match store.lookup(Kind::Credential, upstream, OWNER, now) {
        Ok(Lookup::Found(r)) => serde_json::from_slice(&r.value)
            .map(Some)
            .map_err(LoginStoreError::Unreadable),
        Ok(_) => Ok(None),
        Err(e) => Err(LoginStoreError::Store(e)),
    }
}

pub(super) fn save(
    store: &dyn Store,
    upstream: &str,
    login: &Login,
) -> Result<(), LoginStoreError> {
    let record = Record {
        owner: OWNER.into(),
        expires_ms: toolgate_core::store::expiry_after(LOGIN_TTL),
        value: serde_json::to_vec(login).expect("strings serialize"),
    };
    store
        .put(Kind::Credential, upstream, &record)
        .map_err(LoginStoreError::Store)
}

/// Removes the login kept for `upstream` (`toolgate auth logout`).
pub fn forget(store: &dyn Store, upstream: &str) -> Result<(), LoginStoreError> {
    store
        .remove(Kind::Credential, upstream, toolgate_core::store::now_ms())
        .map_err(LoginStoreError::Store)
}

/// Sends `request` to the endpoint at `url` and reads its answer's status and JSON body; an
/// endpoint that cannot be reached, or answers something other than JSON, says so.
pub(super) async fn json_answer(
    request: reqwest::RequestBuilder,
    url: &str,
) -> Result<(reqwest::StatusCode, serde_json::Value), EndpointError> {
    let response = request
        .send()
        .await
        .map_err(|e| EndpointError::Unreachable {
            url: url.to_string(),
            reason: reqwest_reason(&e),
        })?;
    let status = response.status();
    let body = (response.json().await).map_err(|source| EndpointError::NotJson {
        url: url.to_string(),
        status,
        source,
    })?;
    Ok((status, body))
}
