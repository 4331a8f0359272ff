//! `[upstreams.NAME]` as written, and its validation into an [`UpstreamConfig`]: a command
//! or a URL, timeouts, the largest message, the protocol era, prefix and renames.

use super::secs;
use super::{check_upstream_name, HttpStyle, Transport, UpstreamConfig};
use super::{invalid, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use toolgate_core::env::substitute;

/// `[upstreams.NAME]` as written (also what `toolgate init` writes).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// The program of a stdio upstream.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for it (`${VAR}` references allowed).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of the gateway's environment to pass to the child besides the minimal set.
    #[serde(default)]
    pub inherit_env: Vec<String>,
    /// Its working directory, relative to the configuration file.
    pub cwd: Option<PathBuf>,
    /// The URL of an HTTP upstream.
    pub url: Option<String>,
    /// `"stdio"`, `"streamable-http"` or `"sse"` (the legacy HTTP+SSE transport); by default
    /// `command` means stdio and `url` Streamable HTTP, falling back to HTTP+SSE.
    pub transport: Option<String>,
    /// Headers sent with every request to it.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `false` keeps it configured but never started.
    pub enabled: Option<bool>,
    /// Seconds to connect, initialize and list the tools.
    pub connect_timeout_secs: Option<f64>,
    /// Seconds a tool call may take.
    pub call_timeout_secs: Option<f64>,
    /// The largest message accepted from the upstream, in bytes (default 16 MiB).
    pub max_message_bytes: Option<u64>,
    /// Which era to speak to a server that speaks both: `auto`, `2026-07-28`, `2025-11-25`.
    pub protocol: Option<String>,
    /// The prefix of its tools' exposed names (default: its name).
    pub prefix: Option<String>,
    /// Exposed names by upstream tool name.
    #[serde(default)]
    pub rename: HashMap<String, String>,
    /// `[upstreams.NAME.oauth]`: the gateway gets its own access token for this server.
    pub oauth: Option<RawUpstreamOAuth>,
}

/// `[upstreams.NAME.oauth]`: a server that wants an OAuth access token. The gateway asks
/// the authorization server for one as a machine client (client credentials), or uses the
/// tokens an operator's `toolgate auth login NAME` left in the state store (authorization
/// code), and renews it before it expires. Callers' own tokens are never passed on.
///
/// ```toml
/// [upstreams.tickets.oauth]
/// issuer = "https://idp.example.com"          # its token endpoint is discovered ...
/// # token_url = "https://idp.example.com/token" # ... or named
/// client_id = "toolgate"
/// client_secret = "${TICKETS_CLIENT_SECRET}"
/// scopes = ["tickets:read"]
/// # resource = "https://tickets.example.com/mcp" # RFC 8707 (default: the upstream's url)
/// # grant = "authorization_code"  # an operator logs in once: `toolgate auth login tickets`
/// #                               # (issuer and client then optional: discovered, registered)
/// # grant = "token_exchange"      # each caller's access token exchanged (RFC 8693) for one
/// #                               # of this server, which then sees the caller, not the gateway
/// # audience = "tickets"          # token_exchange only: RFC 8693 `audience` to ask for
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamOAuth {
    pub grant: Option<String>,
    pub issuer: Option<String>,
    pub token_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
    pub resource: Option<String>,
    /// `grant = "token_exchange"` only: the RFC 8693 `audience` asked for (a logical name
    /// of the upstream at the issuer, beside or instead of the `resource` URL).
    pub audience: Option<String>,
}

impl RawUpstreamOAuth {
    fn validate(self, url: &str, file: &Path, key: &str) -> Result<UpstreamOAuth> {
        let f = file.display();
        let grant = match self.grant.as_deref() {
            None | Some("client_credentials") => OAuthGrant::ClientCredentials,
            Some("authorization_code") => OAuthGrant::AuthorizationCode,
            Some("token_exchange") => OAuthGrant::TokenExchange,
            Some(other) => invalid!(
                "{f}: {key}.grant = {other:?}: use \"client_credentials\" (the gateway's own client), \"authorization_code\" (an operator logs in once with `toolgate auth login`) or \"token_exchange\" (each caller's access token exchanged for one of this server, RFC 8693)"
            ),
        };
        if self.audience.is_some() && grant != OAuthGrant::TokenExchange {
            invalid!("{f}: {key}.audience applies to grant = \"token_exchange\" only (for the other grants the token's audience is `resource`)");
        }
        let endpoint = match (self.issuer, self.token_url) {
            (Some(_), Some(_)) => invalid!(
                "{f}: {key} has both `issuer` and `token_url`: keep one (the token endpoint is discovered from the issuer)"
            ),
            (None, None) if grant == OAuthGrant::AuthorizationCode => None,
            (None, None) => invalid!(
                "{f}: {key} needs `issuer` (its token endpoint is discovered) or `token_url`"
            ),
            (Some(i), None) => Some(TokenEndpoint::Issuer(substitute(&i, file, &format!("{key}.issuer"))?)),
            (None, Some(t)) => Some(TokenEndpoint::Url(substitute(&t, file, &format!("{key}.token_url"))?)),
        };
        let client_id = match self.client_id {
            Some(id) => Some(substitute(&id, file, &format!("{key}.client_id"))?),
            None => None,
        };
        let client_secret = match self.client_secret {
            Some(s) => Some(substitute(&s, file, &format!("{key}.client_secret"))?),
            None => None,
        };
        if grant != OAuthGrant::AuthorizationCode
            && (client_id.is_none() || client_secret.is_none())
        {
            invalid!("{f}: {key} needs `client_id` and `client_secret`: the client the authorization server registered for the gateway");
        }
        if client_secret.is_some() && client_id.is_none() {
            invalid!("{f}: {key}.client_secret without `client_id`: name the client too");
        }
        Ok(UpstreamOAuth {
            grant,
            endpoint,
            client_id,
            client_secret,
            scopes: self.scopes,
            resource: match self.resource {
                Some(r) => substitute(&r, file, &format!("{key}.resource"))?,
                None => url.to_string(),
            },
            audience: match self.audience {
                Some(a) => Some(substitute(&a, file, &format!("{key}.audience"))?),
                None => None,
            },
        })
    }
}

/// How the gateway gets an upstream's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthGrant {
    /// As a machine client of the authorization server.
    ClientCredentials,
    /// From an operator's login (`toolgate auth login NAME`), refreshed by the gateway.
    AuthorizationCode,
    /// Each caller's access token exchanged for one of the upstream (RFC 8693): the upstream
    /// sees the caller. The gateway's own client (client credentials) lists the tools.
    TokenExchange,
}

/// Where an upstream's token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenEndpoint {
    /// Discovered from the issuer's metadata (`token_endpoint`).
    Issuer(String),
    Url(String),
}

/// The validated `[upstreams.NAME.oauth]`.
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamOAuth {
    pub grant: OAuthGrant,
    /// `None`: discovered from the upstream's Protected Resource Metadata (at login).
    pub endpoint: Option<TokenEndpoint>,
    /// `None`: registered at login (dynamic client registration).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
    /// The resource indicator asked for (RFC 8707): the token's audience.
    pub resource: String,
    /// `grant = "token_exchange"`: the RFC 8693 `audience` asked for, if any.
    pub audience: Option<String>,
}

impl std::fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("grant", &self.grant)
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// `upstreams.NAME.max_message_bytes`: from 1 KiB to 1 GiB.
fn message_bytes(v: Option<u64>, file: &Path, key: &str) -> Result<usize> {
    let Some(v) = v else {
        return Ok(super::DEFAULT_MAX_MESSAGE_BYTES);
    };
    if !(1024..=1 << 30).contains(&v) {
        invalid!(
            "{}: {key}.max_message_bytes = {v}: use a number of bytes from 1024 to 1073741824 (default 16777216, 16 MiB)",
            file.display()
        );
    }
    Ok(v as usize)
}

/// `upstreams.NAME.protocol`: the era the handshake tries first.
fn protocol(v: Option<&str>, file: &Path, key: &str) -> Result<super::UpstreamProtocol> {
    use super::UpstreamProtocol as P;
    Ok(match v {
        None | Some("auto") => P::Auto,
        Some("2026-07-28") => P::Modern,
        Some("2025-11-25") => P::Legacy,
        Some(other) => invalid!(
            "{}: {key}.protocol = {other:?}: use \"auto\" (initialize, then server/discover if refused), \"2026-07-28\" (server/discover first) or \"2025-11-25\" (initialize only)",
            file.display()
        ),
    })
}

impl RawUpstream {
    /// Validates one upstream; `key` is its table path (e.g. `upstreams.github`).
    pub fn validate(self, name: &str, file: &Path, key: &str) -> Result<UpstreamConfig> {
        check_upstream_name(name, file)?;
        let transport = match (self.command, self.url) {
            (Some(_), Some(_)) => invalid!(
                "{}: {key} has both `command` and `url`: keep `command` for a local process or `url` for an HTTP server",
                file.display()
            ),
            (None, None) => invalid!(
                "{}: {key} needs `command` (a local process speaking MCP on stdio) or `url` (an HTTP endpoint: Streamable HTTP, or HTTP+SSE with transport = \"sse\")",
                file.display()
            ),
            (Some(command), None) => {
                if let Some(t) = self.transport.as_deref().filter(|t| *t != "stdio") {
                    invalid!(
                        "{}: {key}.transport = {t:?} with `command`: a local process speaks stdio; for an HTTP server set `url` instead of `command`",
                        file.display()
                    );
                }
                if !self.headers.is_empty() {
                    invalid!("{}: {key}.headers only applies to `url` upstreams", file.display());
                }
                if self.oauth.is_some() {
                    invalid!("{}: {key}.oauth only applies to `url` upstreams (a local process gets its credentials from `env`)", file.display());
                }
                let command = substitute(&command, file, &format!("{key}.command"))?;
                if command.trim().is_empty() {
                    invalid!("{}: {key}.command is empty", file.display());
                }
                let mut args = Vec::new();
                for (i, a) in self.args.iter().enumerate() {
                    args.push(substitute(a, file, &format!("{key}.args[{i}]"))?);
                }
                let mut env = BTreeMap::new();
                for (k, v) in &self.env {
                    env.insert(k.clone(), substitute(v, file, &format!("{key}.env.{k}"))?);
                }
                let cwd = match self.cwd {
                    Some(c) => Some(PathBuf::from(substitute(
                        &c.to_string_lossy(),
                        file,
                        &format!("{key}.cwd"),
                    )?)),
                    None => None,
                };
                for name in &self.inherit_env {
                    if name.is_empty() || name.contains('=') || name.contains('\0') {
                        invalid!(
                            "{}: {key}.inherit_env: {name:?} is not a variable name: list names such as \"AWS_PROFILE\"",
                            file.display()
                        );
                    }
                }
                Transport::Stdio {
                    command,
                    args,
                    env,
                    inherit_env: self.inherit_env,
                    cwd,
                }
            }
            (None, Some(url)) => {
                if !self.args.is_empty()
                    || !self.env.is_empty()
                    || !self.inherit_env.is_empty()
                    || self.cwd.is_some()
                {
                    invalid!(
                        "{}: {key}: `args`, `env`, `inherit_env` and `cwd` only apply to `command` upstreams",
                        file.display()
                    );
                }
                let style = match self.transport.as_deref() {
                    None => HttpStyle::Auto,
                    Some("streamable-http" | "http") => HttpStyle::Streamable,
                    Some("sse") => HttpStyle::Sse,
                    Some(other) => invalid!(
                        "{}: {key}.transport = {other:?}: use \"streamable-http\" or \"sse\" (the legacy HTTP+SSE transport of 2024-11-05), or leave it out to try Streamable HTTP and fall back to HTTP+SSE",
                        file.display()
                    ),
                };
                let url = substitute(&url, file, &format!("{key}.url"))?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    invalid!(
                        "{}: {key}.url = {url:?}: use an http:// or https:// URL of an MCP endpoint (Streamable HTTP, or HTTP+SSE's event stream)",
                        file.display()
                    );
                }
                let mut headers = BTreeMap::new();
                for (k, v) in &self.headers {
                    if http::HeaderName::from_bytes(k.as_bytes()).is_err() {
                        invalid!("{}: {key}.headers: {k:?} is not a valid header name", file.display());
                    }
                    let v = substitute(v, file, &format!("{key}.headers.{k}"))?;
                    if http::HeaderValue::from_str(&v).is_err() {
                        invalid!("{}: {key}.headers.{k}: the value is not a valid header value", file.display());
                    }
                    headers.insert(k.clone(), v);
                }
                let oauth = match self.oauth {
                    Some(o) => {
                        if headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")) {
                            invalid!("{}: {key} has both `oauth` and an Authorization header: keep one", file.display());
                        }
                        let o = o.validate(&url, file, &format!("{key}.oauth"))?;
                        if o.grant == OAuthGrant::TokenExchange && style == HttpStyle::Sse {
                            invalid!("{}: {key}.oauth.grant = \"token_exchange\" needs a Streamable HTTP server (each caller gets a session of its own): leave `transport` out or set \"streamable-http\"", file.display());
                        }
                        Some(o)
                    }
                    None => None,
                };
                Transport::Http {
                    url,
                    style,
                    headers,
                    oauth,
                }
            }
        };
        Ok(UpstreamConfig {
            name: name.to_string(),
            transport,
            enabled: self.enabled.unwrap_or(true),
            connect_timeout: secs(
                self.connect_timeout_secs,
                30.0,
                file,
                &format!("{key}.connect_timeout_secs"),
            )?,
            call_timeout: secs(
                self.call_timeout_secs,
                60.0,
                file,
                &format!("{key}.call_timeout_secs"),
            )?,
            max_message_bytes: message_bytes(self.max_message_bytes, file, key)?,
            protocol: protocol(self.protocol.as_deref(), file, key)?,
            prefix: self.prefix.unwrap_or_else(|| name.to_string()),
            rename: self.rename,
        })
    }
}
