//! An HTTP upstream that wants an OAuth access token (`[upstreams.NAME.oauth]`): the gateway
//! is a machine client of the server's authorization server (client credentials, with the
//! upstream's URL as the RFC 8707 resource). The token is kept and asked for again shortly
//! before it expires, or at once when the server answers 401. It is the gateway's own
//! identity at the server: a caller's token is never passed on (the MCP authorization spec
//! forbids token passthrough).

use crate::config::upstream::{TokenEndpoint, UpstreamOAuth};
use std::time::{Duration, Instant};

/// A token is asked for again this long before the server would refuse it.
const EARLY: Duration = Duration::from_secs(30);

/// One upstream's token, fetched on demand and kept.
pub(crate) struct TokenSource {
    upstream: String,
    config: UpstreamOAuth,
    http: reqwest::Client,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

struct Cached {
    token: String,
    renew_at: Instant,
}

impl TokenSource {
    pub(crate) fn new(upstream: &str, config: UpstreamOAuth) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            upstream: upstream.to_string(),
            config,
            http,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The current access token, fetched when there is none or it is about to expire.
    pub(crate) async fn bearer(&self) -> Result<String, String> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = &*cached {
            if Instant::now() < c.renew_at {
                return Ok(c.token.clone());
            }
        }
        let fresh = self
            .fetch()
            .await
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

    async fn fetch(&self) -> Result<Cached, String> {
        use crate::policy::oauth::keys::{discover, reqwest_reason};
        let url = match &self.config.endpoint {
            TokenEndpoint::Url(u) => u.clone(),
            TokenEndpoint::Issuer(issuer) => discover(&self.http, issuer)
                .await?
                .token_endpoint
                .ok_or_else(|| format!("the metadata of {issuer} names no token_endpoint"))?,
        };
        let scope = self.config.scopes.join(" ");
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("resource", self.config.resource.as_str()),
        ];
        if !scope.is_empty() {
            form.push(("scope", scope.as_str()));
        }
        let response = (self.http.post(&url))
            .basic_auth(&self.config.client_id, Some(&self.config.client_secret))
            .form(&form)
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
                "{url} refused the client credentials of {:?}: {status} {error} {why}",
                self.config.client_id
            ));
        }
        let token = body["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("{url} answered without an access_token"))?
            .to_string();
        let lifetime = Duration::from_secs(body["expires_in"].as_u64().unwrap_or(300));
        Ok(Cached {
            token,
            renew_at: Instant::now() + lifetime.saturating_sub(EARLY).max(lifetime / 2),
        })
    }
}
