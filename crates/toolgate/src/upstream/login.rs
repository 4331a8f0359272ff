//! `toolgate auth login`: an operator logs the gateway in to an upstream once, with the
//! authorization code flow and PKCE (the client registered dynamically where the server
//! offers it, a loopback redirect); the tokens are kept in the state store, where
//! `oauth.rs`'s `TokenSource` reads and refreshes them. Why a login failed is a
//! [`LoginError`].

use super::oauth::LoginStoreError;
use super::oauth::{access_token, client, json_answer, save, token_request, EndpointError, Login};
use crate::config::upstream::{TokenEndpoint, UpstreamOAuth};
use crate::policy::oauth::keys::{discover, FetchError, ServerMetadata};
use std::time::Duration;
use toolgate_core::store::Store;

/// Why `toolgate auth login` did not log the gateway in.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The upstream's `[oauth]` names a `token_url`, from which no authorization endpoint
    /// can be found.
    #[error("upstreams.{upstream}.oauth: a login needs `issuer` (its authorization endpoint is discovered), not `token_url`")]
    NeedsIssuer {
        /// The upstream's name.
        upstream: String,
    },
    /// The upstream names no authorization server, where the gateway looked.
    #[error("{url} names no authorization server (no Protected Resource Metadata at {}): set `issuer` in its [upstreams.NAME.oauth]", .tried.join(" or "))]
    NoAuthorizationServer {
        /// The upstream's URL.
        url: String,
        /// The metadata URLs asked.
        tried: Vec<String>,
    },
    /// A URL that does not parse (the upstream's, or the authorization endpoint).
    #[error("{url}: {reason}")]
    NotAUrl {
        /// The text given.
        url: String,
        /// Why it is not a URL.
        reason: String,
    },
    /// The authorization server's metadata could not be read.
    #[error("{0}")]
    Metadata(#[source] FetchError),
    /// The metadata lacks an endpoint the login needs.
    #[error("the metadata of {issuer} names no {field}")]
    MetadataLacks {
        /// The issuer.
        issuer: String,
        /// The field missing (`authorization_endpoint`, `token_endpoint`).
        field: &'static str,
    },
    /// No loopback port to receive the browser's redirect.
    #[error("cannot listen on a loopback port for the redirect: {0}")]
    Listen(#[source] std::io::Error),
    /// The loopback listener failed after it was opened.
    #[error("{0}")]
    Loopback(#[source] std::io::Error),
    /// No `client_id` configured and the server registers none.
    #[error("{issuer} offers no dynamic client registration: register a client there (redirect URIs on http://127.0.0.1) and set its client_id in [upstreams.NAME.oauth]")]
    NoRegistration {
        /// The issuer.
        issuer: String,
    },
    /// The registration endpoint refused the client (RFC 7591's `error`).
    #[error("{endpoint} refused the registration: {status} {error} {description}")]
    RegistrationRefused {
        /// The registration endpoint.
        endpoint: String,
        /// Its answer's status.
        status: reqwest::StatusCode,
        /// Its `error`, `?` when it named none.
        error: String,
        /// Its `error_description`.
        description: String,
    },
    /// A token or registration endpoint gave no usable answer.
    #[error("{0}")]
    Endpoint(#[from] EndpointError),
    /// The browser did not come back in time.
    #[error("no answer from the browser within {secs} s: run the command again")]
    NoBrowserAnswer {
        /// How long the command waited.
        secs: u64,
    },
    /// The redirect's target does not parse.
    #[error("{reason}")]
    BadRedirect {
        /// Why it does not parse.
        reason: String,
    },
    /// The authorization server refused the login (the redirect's `error`).
    #[error("the authorization server answered {error}: {description}")]
    Denied {
        /// Its `error`.
        error: String,
        /// Its `error_description`.
        description: String,
    },
    /// The redirect belongs to no login in progress.
    #[error("the redirect carried no code, or another login's state")]
    StrayRedirect,
    /// The tokens could not be kept.
    #[error("{0}")]
    Store(#[source] LoginStoreError),
}

impl LoginError {
    /// Whether running the command again later can help (a server unreachable or
    /// failing, the store busy), as opposed to configuration that has to change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Metadata(e) => e.retryable(),
            Self::Endpoint(e) => e.retryable(),
            Self::Store(LoginStoreError::Store(f)) => f.retryable(),
            Self::RegistrationRefused { status, .. } => status.is_server_error(),
            Self::Listen(_) | Self::Loopback(_) | Self::NoBrowserAnswer { .. } => true,
            _ => false,
        }
    }
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
) -> Result<Login, LoginError> {
    use base64::Engine as _;
    use sha2::{Digest, Sha256};
    let http = client();
    let issuer = match &config.endpoint {
        Some(TokenEndpoint::Issuer(i)) => i.clone(),
        Some(TokenEndpoint::Url(_)) => {
            return Err(LoginError::NeedsIssuer {
                upstream: upstream.to_string(),
            })
        }
        None => authorization_server_of(&http, url).await?,
    };
    let meta: ServerMetadata = (discover(&http, &issuer).await).map_err(LoginError::Metadata)?;
    let lacks = |field| LoginError::MetadataLacks {
        issuer: issuer.clone(),
        field,
    };
    let authorize =
        (meta.authorization_endpoint.clone()).ok_or_else(|| lacks("authorization_endpoint"))?;
    let token_endpoint = (meta.token_endpoint.clone()).ok_or_else(|| lacks("token_endpoint"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(LoginError::Listen)?;
    let port = listener.local_addr().map_err(LoginError::Loopback)?.port();
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
    let mut link = reqwest::Url::parse(&authorize).map_err(|e| LoginError::NotAUrl {
        url: authorize.clone(),
        reason: e.to_string(),
    })?;
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
        .map_err(|_| LoginError::NoBrowserAnswer {
            secs: wait.as_secs(),
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
    save(store, upstream, &login).map_err(LoginError::Store)?;
    Ok(login)
}

/// The authorization server an upstream names in its Protected Resource Metadata (RFC
/// 9728): at the well-known URL under its path, else where its 401 points.
async fn authorization_server_of(http: &reqwest::Client, url: &str) -> Result<String, LoginError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| LoginError::NotAUrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
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
    Err(LoginError::NoAuthorizationServer {
        url: url.to_string(),
        tried: candidates,
    })
}

/// Dynamic client registration (RFC 7591): a public client with this redirect.
async fn register(
    http: &reqwest::Client,
    meta: &ServerMetadata,
    issuer: &str,
    redirect: &str,
) -> Result<(String, Option<String>), LoginError> {
    let Some(endpoint) = &meta.registration_endpoint else {
        return Err(LoginError::NoRegistration {
            issuer: issuer.to_string(),
        });
    };
    let request = http.post(endpoint).json(&serde_json::json!({
        "client_name": "toolgate",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }));
    let (status, body) = json_answer(request, endpoint).await?;
    let Some(id) = body["client_id"].as_str() else {
        return Err(LoginError::RegistrationRefused {
            endpoint: endpoint.clone(),
            status,
            error: body["error"].as_str().unwrap_or("?").to_string(),
            description: body["error_description"].as_str().unwrap_or("").to_string(),
        });
    };
    Ok((
        id.to_string(),
        body["client_secret"].as_str().map(str::to_string),
    ))
}

/// Waits for the browser's redirect to `/callback` and answers it; returns the code.
async fn callback(listener: &tokio::net::TcpListener, state: &str) -> Result<String, LoginError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut conn, _) = listener.accept().await.map_err(LoginError::Loopback)?;
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
        let url = reqwest::Url::parse(&format!("http://127.0.0.1{target}")).map_err(|e| {
            LoginError::BadRedirect {
                reason: e.to_string(),
            }
        })?;
        let q: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
        let (answer, result) = match (q.get("code"), q.get("state"), q.get("error")) {
            (_, _, Some(e)) => (
                "The authorization server refused the login; see the terminal.",
                Err(LoginError::Denied {
                    error: e.clone(),
                    description: (q.get("error_description").cloned()).unwrap_or_default(),
                }),
            ),
            (Some(code), Some(s), None) if s == state => (
                "toolgate is logged in; you can close this window.",
                Ok(code.clone()),
            ),
            _ => (
                "This answer does not belong to the login in progress.",
                Err(LoginError::StrayRedirect),
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
