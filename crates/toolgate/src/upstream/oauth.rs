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
//! the tools, is the gateway's client (client credentials).

use crate::config::upstream::{OAuthGrant, TokenEndpoint, UpstreamOAuth};
use crate::policy::oauth::keys::{discover, reqwest_reason, ServerMetadata};
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

fn client() -> reqwest::Client {
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
                reason,
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
    pub(crate) async fn bearer(&self) -> Result<String, String> {
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
                let token = (subject.lock().unwrap_or_else(|e| e.into_inner()).clone())
                    .ok_or_else(|| "no access token of the caller to exchange".to_string())?;
                self.exchanged(who, &token).await.map_err(|e| e.to_string())
            }
        }
        .map_err(|e| format!("upstreams.{}.oauth: no access token: {e}", self.upstream))?;
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
    async fn token_url(&self) -> Result<String, String> {
        match &self.config.endpoint {
            Some(TokenEndpoint::Url(u)) => Ok(u.clone()),
            Some(TokenEndpoint::Issuer(issuer)) => discover(&self.http, issuer)
                .await
                .map_err(|e| e.to_string())?
                .token_endpoint
                .ok_or_else(|| format!("the metadata of {issuer} names no token_endpoint")),
            None => Err("no issuer or token_url".into()),
        }
    }

    async fn client_credentials(&self) -> Result<Cached, String> {
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
    async fn login_token(&self) -> Result<Cached, String> {
        let store = self.store.get().ok_or_else(|| {
            "the gateway keeps its state in memory, where no login is kept: use an embedded or redis [store]".to_string()
        })?;
        let mut login = load(store.as_ref(), &self.upstream)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!(
                    "nobody has logged in to it yet: run `toolgate auth login {}`",
                    self.upstream
                )
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
            return Err(format!(
                "the login's access token expired and it has no refresh token: run `toolgate auth login {}` again",
                self.upstream
            ));
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
        .map_err(|e| {
            format!(
                "refreshing the login failed ({e}): run `toolgate auth login {}` again",
                self.upstream
            )
        })?;
        let (token, lifetime) = access_token(&body, &login.token_endpoint)?;
        login.access_token = token.clone();
        // Servers that rotate refresh tokens send a new one; others keep the old.
        if let Some(r) = body["refresh_token"].as_str() {
            login.refresh_token = Some(r.to_string());
        }
        login.expires_ms = toolgate_core::store::now_ms() + lifetime.as_millis() as u64;
        save(store.as_ref(), &self.upstream, &login).map_err(|e| e.to_string())?;
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
async fn token_request(
    http: &reqwest::Client,
    url: &str,
    form: &[(&str, &str)],
    client_id: &str,
    secret: Option<&str>,
) -> Result<serde_json::Value, String> {
    let mut request = http.post(url);
    let mut fields: Vec<(&str, &str)> = form.to_vec();
    match secret {
        Some(s) => request = request.basic_auth(client_id, Some(s)),
        None if !fields.iter().any(|(k, _)| *k == "client_id") => {
            fields.push(("client_id", client_id))
        }
        None => {}
    }
    let response = request
        .form(&fields)
        .send()
        .await
        .map_err(|e| format!("{url}: {}", reqwest_reason(&e)))?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| format!("{url} answered {status} with no JSON ({e})"))?;
    if !status.is_success() {
        // RFC 6749 §5.2: `error` and `error_description` say why (never a secret).
        let error = body["error"].as_str().unwrap_or("?");
        let why = body["error_description"].as_str().unwrap_or("");
        return Err(format!(
            "{url} refused client {client_id:?}: {status} {error} {why}"
        ));
    }
    Ok(body)
}

fn access_token(body: &serde_json::Value, url: &str) -> Result<(String, Duration), String> {
    let token = body["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("{url} answered without an access_token"))?
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

fn save(store: &dyn Store, upstream: &str, login: &Login) -> Result<(), LoginStoreError> {
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

/// `toolgate auth login`: the authorization code flow with PKCE against the authorization
/// server of the upstream at `url`, through the operator's browser and a redirect to a
/// loopback port of this process. `show` is given the URL to open. The tokens are kept in
/// `store` under the upstream's name.
pub async fn login(
    upstream: &str,
    url: &str,
    config: &UpstreamOAuth,
    store: &dyn Store,
    show: impl Fn(&str),
    wait: Duration,
) -> Result<Login, String> {
    use base64::Engine as _;
    use sha2::{Digest, Sha256};
    let http = client();
    let issuer = match &config.endpoint {
        Some(TokenEndpoint::Issuer(i)) => i.clone(),
        Some(TokenEndpoint::Url(_)) => {
            return Err(format!(
                "upstreams.{upstream}.oauth: a login needs `issuer` (its authorization endpoint is discovered), not `token_url`"
            ))
        }
        None => authorization_server_of(&http, url).await?,
    };
    let meta: ServerMetadata = discover(&http, &issuer).await.map_err(|e| e.to_string())?;
    let authorize = (meta.authorization_endpoint.clone())
        .ok_or_else(|| format!("the metadata of {issuer} names no authorization_endpoint"))?;
    let token_endpoint = (meta.token_endpoint.clone())
        .ok_or_else(|| format!("the metadata of {issuer} names no token_endpoint"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on a loopback port for the redirect: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let (client_id, client_secret) = match &config.client_id {
        Some(id) => (id.clone(), config.client_secret.clone()),
        None => register(&http, &meta, &issuer, &redirect).await?,
    };
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let verifier = b64.encode(rand::random::<[u8; 32]>());
    let challenge = b64.encode(Sha256::digest(verifier.as_bytes()));
    let state = toolgate_core::ids::random_hex(16);
    let scope = config.scopes.join(" ");
    let mut link = reqwest::Url::parse(&authorize).map_err(|e| format!("{authorize}: {e}"))?;
    {
        let mut q = link.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", &redirect)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &config.resource);
        if !scope.is_empty() {
            q.append_pair("scope", &scope);
        }
    }
    show(link.as_str());
    let code = tokio::time::timeout(wait, callback(&listener, &state))
        .await
        .map_err(|_| {
            format!(
                "no answer from the browser within {} s: run the command again",
                wait.as_secs()
            )
        })??;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("code_verifier", verifier.as_str()),
        ("client_id", client_id.as_str()),
        ("resource", config.resource.as_str()),
    ];
    let body = token_request(
        &http,
        &token_endpoint,
        &form,
        &client_id,
        client_secret.as_deref(),
    )
    .await?;
    let (access, lifetime) = access_token(&body, &token_endpoint)?;
    let login = Login {
        issuer,
        token_endpoint,
        client_id,
        client_secret,
        resource: config.resource.clone(),
        access_token: access,
        refresh_token: body["refresh_token"].as_str().map(str::to_string),
        expires_ms: toolgate_core::store::now_ms() + lifetime.as_millis() as u64,
    };
    save(store, upstream, &login).map_err(|e| e.to_string())?;
    Ok(login)
}

/// The authorization server an upstream names in its Protected Resource Metadata (RFC
/// 9728): at the well-known URL under its path, else where its 401 points.
async fn authorization_server_of(http: &reqwest::Client, url: &str) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let origin = parsed.origin().ascii_serialization();
    let path = parsed.path().trim_end_matches('/');
    let mut candidates = vec![format!(
        "{origin}{}{path}",
        crate::policy::oauth::metadata::WELL_KNOWN
    )];
    let probe = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await;
    if let Ok(r) = probe {
        let hint = (r.headers().get("www-authenticate"))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split("resource_metadata=\"").nth(1))
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string);
        if let Some(h) = hint {
            candidates.insert(0, h);
        }
    }
    for c in &candidates {
        let Ok(r) = http.get(c).send().await else {
            continue;
        };
        let Ok(doc) = r.json::<serde_json::Value>().await else {
            continue;
        };
        if let Some(s) = doc["authorization_servers"][0].as_str() {
            return Ok(s.to_string());
        }
    }
    Err(format!(
        "{url} names no authorization server (no Protected Resource Metadata at {}): set `issuer` in its [upstreams.NAME.oauth]",
        candidates.join(" or ")
    ))
}

/// Dynamic client registration (RFC 7591): a public client with this redirect.
async fn register(
    http: &reqwest::Client,
    meta: &ServerMetadata,
    issuer: &str,
    redirect: &str,
) -> Result<(String, Option<String>), String> {
    let Some(endpoint) = &meta.registration_endpoint else {
        return Err(format!(
            "{issuer} offers no dynamic client registration: register a client there (redirect URIs on http://127.0.0.1) and set its client_id in [upstreams.NAME.oauth]"
        ));
    };
    let response = http
        .post(endpoint)
        .json(&serde_json::json!({
            "client_name": "toolgate",
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "native",
        }))
        .send()
        .await
        .map_err(|e| format!("{endpoint}: {}", reqwest_reason(&e)))?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|e| format!("{endpoint} answered {status} with no JSON ({e})"))?;
    let Some(id) = body["client_id"].as_str() else {
        return Err(format!(
            "{endpoint} refused the registration: {status} {} {}",
            body["error"].as_str().unwrap_or("?"),
            body["error_description"].as_str().unwrap_or("")
        ));
    };
    Ok((
        id.to_string(),
        body["client_secret"].as_str().map(str::to_string),
    ))
}

/// Waits for the browser's redirect to `/callback` and answers it; returns the code.
async fn callback(listener: &tokio::net::TcpListener, state: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut conn, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 8192];
        let n = conn.read(&mut buf).await.unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        let target = head.split_whitespace().nth(1).unwrap_or("/");
        if !target.starts_with("/callback") {
            let _ = conn
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let url =
            reqwest::Url::parse(&format!("http://127.0.0.1{target}")).map_err(|e| e.to_string())?;
        let q: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
        let (answer, result) = match (q.get("code"), q.get("state"), q.get("error")) {
            (_, _, Some(e)) => (
                "The authorization server refused the login; see the terminal.",
                Err(format!(
                    "the authorization server answered {e}: {}",
                    q.get("error_description").map_or("", String::as_str)
                )),
            ),
            (Some(code), Some(s), None) if s == state => (
                "toolgate is logged in; you can close this window.",
                Ok(code.clone()),
            ),
            _ => (
                "This answer does not belong to the login in progress.",
                Err("the redirect carried no code, or another login's state".to_string()),
            ),
        };
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        );
        let _ = conn.write_all(reply.as_bytes()).await;
        return result;
    }
}
