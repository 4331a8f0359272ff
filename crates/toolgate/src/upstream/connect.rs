//! Opening one connection to an upstream: spawn or dial, initialize (listing its tools is
//! `listing.rs`).

use super::child::{self, ChildProcess};
use super::client::{UpstreamClient, UpstreamEvent};
pub(crate) use super::connect_error::ConnectError;
use super::listing::list_tools;
use super::sse::{OpenError as SseOpenError, SseTransport};
use super::stdio::StdioTransport;
use super::Upstream;
use crate::config::{HttpStyle, Transport, UpstreamProtocol};
use rmcp::model::ProtocolVersion;
use rmcp::service::ClientInitializeError;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::common::client_side_sse::FixedInterval;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A live connection.
pub(crate) struct Connection {
    pub service: RunningService<RoleClient, UpstreamClient>,
    /// The child process, for stdio upstreams.
    pub child: Option<ChildProcess>,
    pub tools: Vec<Map<String, Value>>,
    pub server_info: String,
    /// How long the tool list may be kept (`ttlMs`), when the server says.
    pub list_ttl: Option<std::time::Duration>,
    /// The protocol revision agreed.
    pub protocol: String,
}

/// Connects, initializes and lists tools. The caller applies the connect timeout.
///
/// By default (`protocol = "auto"`) the older revisions' `initialize` is tried first: it is
/// what most servers speak, and there resource subscriptions and log levels pass through
/// to the server. A server that refuses it (a 2026-07-28-only server answers -32022) is
/// asked again, on a fresh process or connection, with `server/discover`.
/// `protocol = "2026-07-28"` tries `server/discover` first (and `initialize` when that is
/// refused); `"2025-11-25"` tries `initialize` only. Sampling, elicitation and roots work
/// in both eras: a 2026-07-28 server's `input_required` goes to the client by MRTR or as
/// requests (`upstream::mrtr`).
pub(crate) async fn connect(
    up: &Arc<Upstream>,
    events: mpsc::Sender<UpstreamEvent>,
) -> Result<Connection, ConnectError> {
    let flood = Arc::new(super::flood::Floodgate::new(
        up.name().into(),
        up.relay.clone(),
    ));
    let handler = || UpstreamClient {
        name: up.name().into(),
        events: events.clone(),
        flood: flood.clone(),
        progress: up.progress.clone(),
        relay: up.relay.clone(),
    };
    let discover = || ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let (first, then) = match up.config.protocol {
        UpstreamProtocol::Auto => (ClientLifecycleMode::Initialize, Some(discover())),
        UpstreamProtocol::Modern => (discover(), Some(ClientLifecycleMode::Initialize)),
        UpstreamProtocol::Legacy => (ClientLifecycleMode::Initialize, None),
    };
    let (service, mut child) = match open(up, handler(), first).await {
        Ok(c) => c,
        Err(Failed::Other(e)) => return Err(ConnectError::Failed(e)),
        Err(Failed::Refused(e)) if then.is_none() => return Err(ConnectError::Refused(e)),
        Err(Failed::Refused(first)) => {
            match open(up, handler(), then.expect("checked above")).await {
                Ok(c) => c,
                Err(Failed::Refused(then) | Failed::Other(then)) => {
                    return Err(ConnectError::RefusedBoth { first, then })
                }
            }
        }
    };
    let protocol = (service.peer().peer_info())
        .map(|i| i.protocol_version.to_string())
        .unwrap_or_default();
    let legacy_sse = matches!(up.config.transport, Transport::Http { .. })
        && up.legacy_sse.load(Ordering::Relaxed);
    let server_info = service
        .peer()
        .peer_info()
        .map(|i| {
            let imp = i.server_info.as_ref();
            format!(
                "{} {} (protocol {}{})",
                imp.map_or("?", |s| s.name.as_str()),
                imp.map_or("?", |s| s.version.as_str()),
                i.protocol_version,
                if legacy_sse { ", HTTP+SSE" } else { "" }
            )
        })
        .unwrap_or_default();
    let (tools, list_ttl) = match list_tools(up.name(), service.peer(), &up.raw_tools).await {
        Ok(t) => t,
        Err(e) => {
            if let Some(c) = child.as_mut() {
                c.terminate(std::time::Duration::from_millis(200)).await;
            }
            return Err(e.into());
        }
    };
    Ok(Connection {
        service,
        child,
        tools,
        server_info,
        list_ttl,
        protocol,
    })
}

/// How one handshake failed.
enum Failed {
    /// The server answered, refusing it: worth asking in the other era.
    Refused(String),
    /// Anything else (could not start or dial, no answer, the process died).
    Other(String),
}

type Opened = (
    RunningService<RoleClient, UpstreamClient>,
    Option<ChildProcess>,
);

/// One handshake (`initialize`, or `server/discover` for 2026-07-28) on a fresh process
/// or connection. A failure says what the server answered, and its last stderr lines.
async fn open(
    up: &Arc<Upstream>,
    handler: UpstreamClient,
    lifecycle: ClientLifecycleMode,
) -> Result<Opened, Failed> {
    let step = step_name(&lifecycle);
    match &up.config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            inherit_env,
            cwd,
        } => {
            let what = child::Spawn {
                command,
                args,
                env,
                inherit_env,
                cwd: cwd.as_ref(),
            };
            let (mut proc, stdout, stdin) =
                child::spawn(up.name(), what).map_err(|e| Failed::Other(e.to_string()))?;
            let (max, raw) = (up.config.max_message_bytes, up.raw_tools.clone());
            let transport = StdioTransport::new(up.name(), stdout, stdin, max, raw);
            let serve = handler.serve_with_lifecycle(transport, lifecycle);
            tokio::pin!(serve);
            // How long an answer may trail the process's exit (a loaded machine is slow).
            let grace = std::time::Duration::from_secs(2);
            let result = tokio::select! {
                biased;
                s = &mut serve => s,
                why = proc.wait() => match tokio::time::timeout(grace, &mut serve).await {
                    // The server may answer (refusing) and then exit: its answer is the news.
                    Ok(s) => s,
                    Err(_) => {
                        let why = format!("{why} before answering {step}");
                        return Err(Failed::Other(proc.with_stderr(why).await));
                    }
                },
            };
            match result {
                Ok(s) => Ok((s, Some(proc))),
                Err(e) => {
                    let refused = refusal(&e);
                    // If the process died without answering, that is the real reason.
                    let exited = match refused {
                        true => None,
                        false => tokio::time::timeout(grace, proc.wait()).await.ok(),
                    };
                    proc.terminate(std::time::Duration::from_millis(200)).await;
                    // `with_stderr` waits briefly for the last lines: a dying child says why
                    // there, and its pipe may still be draining.
                    Err(match exited {
                        Some(why) => Failed::Other(
                            proc.with_stderr(format!("{why} before answering {step}"))
                                .await,
                        ),
                        None if refused => Failed::Refused(
                            proc.with_stderr(format!("{step} was refused: {e}")).await,
                        ),
                        None => Failed::Other(
                            proc.with_stderr(format!("{step} failed: {}", plain_error(&e)))
                                .await,
                        ),
                    })
                }
            }
        }
        Transport::Http {
            url,
            headers,
            style,
            ..
        } => {
            let mut custom = http::HeaderMap::new();
            for (k, v) in headers {
                let name = http::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| Failed::Other(e.to_string()))?;
                let value =
                    http::HeaderValue::from_str(v).map_err(|e| Failed::Other(e.to_string()))?;
                custom.insert(name, value);
            }
            let known_sse = match style {
                HttpStyle::Sse => true,
                HttpStyle::Streamable => false,
                HttpStyle::Auto => up.legacy_sse.load(Ordering::Relaxed),
            };
            if known_sse {
                return match open_sse(up, url, &custom).await {
                    Ok(t) => serve_sse(handler, t, lifecycle, url, step).await,
                    Err(SseOpenError::NotAnEventStream(why)) => Err(Failed::Other(format!(
                        "{why}: is {url} the server's HTTP+SSE endpoint (often …/sse)? For a Streamable HTTP server leave `transport` out"
                    ))),
                    Err(SseOpenError::Unauthorized(c)) => Err(Failed::Other(unauthorized(
                        &up.config.name,
                        url,
                        &c,
                        up.token.is_some(),
                    ))),
                    Err(SseOpenError::Other(e)) => Err(Failed::Other(e)),
                };
            }
            let failed =
                match open_streamable(up, handler.clone(), lifecycle.clone(), url, custom.clone())
                    .await
                {
                    Ok(s) => return Ok((s, None)),
                    Err(e) => e,
                };
            let (challenge, no_token, refused) = (
                (up.challenge.lock().unwrap_or_else(|e| e.into_inner())).take(),
                (up.token_failure.lock().unwrap_or_else(|e| e.into_inner())).take(),
                up.refused.load(Ordering::Relaxed),
            );
            let e = match failed {
                StreamableFailed::Refused(e) => return Err(Failed::Refused(e)),
                StreamableFailed::Other(e) => e,
            };
            // The specification's note for clients of both transports: a server that
            // refuses the POST and answers a GET with an event stream speaks HTTP+SSE.
            let mut as_sse = None;
            if *style == HttpStyle::Auto && !refused && challenge.is_none() && no_token.is_none() {
                match open_sse(up, url, &custom).await {
                    Ok(t) => {
                        tracing::info!(upstream = %up.name(), "{url} speaks the legacy HTTP+SSE transport (2024-11-05); set transport = \"sse\" to skip the Streamable HTTP attempt");
                        return serve_sse(handler, t, lifecycle, url, step).await;
                    }
                    Err(SseOpenError::NotAnEventStream(why)) => as_sse = Some(why),
                    Err(SseOpenError::Unauthorized(c)) => {
                        return Err(Failed::Other(unauthorized(
                            &up.config.name,
                            url,
                            &c,
                            up.token.is_some(),
                        )))
                    }
                    Err(SseOpenError::Other(_)) => {}
                }
            }
            Err(Failed::Other(match (no_token, challenge) {
                (Some(why), _) => why,
                (None, Some(c)) => unauthorized(&up.config.name, url, &c, up.token.is_some()),
                (None, None) => {
                    let failure = http_failure(url, e).await;
                    match as_sse {
                        Some(why) => format!("{failure} (and as HTTP+SSE: {why})"),
                        None => failure,
                    }
                }
            }))
        }
    }
}

/// How a Streamable HTTP handshake failed.
enum StreamableFailed {
    /// The server answered, refusing the handshake.
    Refused(String),
    /// Anything else, as a person reads it.
    Other(String),
}

/// One Streamable HTTP handshake.
async fn open_streamable(
    up: &Arc<Upstream>,
    handler: UpstreamClient,
    lifecycle: ClientLifecycleMode,
    url: &str,
    headers: http::HeaderMap,
) -> Result<RunningService<RoleClient, UpstreamClient>, StreamableFailed> {
    let step = step_name(&lifecycle);
    let custom: HashMap<_, _> = headers
        .into_iter()
        .filter_map(|(k, v)| Some((k?, v)))
        .collect();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    // rmcp's default retries a lost stream forever; give up after a few tries so
    // the supervisor sees the connection end and reconnects from scratch, and at
    // once when the server refuses the connection (it is down: a killed upstream
    // is reported in milliseconds, not after the tries).
    let mut retry = FixedInterval::default();
    retry.max_times = Some(3);
    up.refused.store(false, Ordering::Relaxed);
    config.retry_config = Arc::new(super::oversize::Reconnect {
        tries: retry,
        refused: up.refused.clone(),
    });
    config.max_sse_event_size = up.config.max_message_bytes;
    config.max_json_response_size = up.config.max_message_bytes;
    let client = super::oversize::MeasuredClient {
        inner: http_client().map_err(|e| StreamableFailed::Other(e.to_string()))?,
        oversized: up.oversized.clone(),
        refused: up.refused.clone(),
        token: up.token.clone(),
        challenge: up.challenge.clone(),
        token_failure: up.token_failure.clone(),
        raw_tools: Some(up.raw_tools.clone()),
    };
    let transport = StreamableHttpClientTransport::with_client(client, config);
    match handler.serve_with_lifecycle(transport, lifecycle).await {
        Ok(s) => Ok(s),
        Err(e) if refusal(&e) => Err(StreamableFailed::Refused(format!(
            "{step} at {url} was refused: {e}"
        ))),
        Err(e) => Err(StreamableFailed::Other(plain_error(&e))),
    }
}

/// A caller's own session with a user-delegated upstream (`delegated.rs`): Streamable HTTP
/// with the caller's exchanged token (`token`), in the era the shared connection agreed, its
/// progress and relay its own; no tools listed (the shared connection does that), and its
/// `list_changed` notices dropped (the shared connection sees them too).
pub(crate) async fn open_delegated(
    up: &Upstream,
    token: Arc<super::oauth::TokenSource>,
    progress: super::client::ProgressRoutes,
    relay: Arc<super::requests::Relay>,
) -> Result<RunningService<RoleClient, UpstreamClient>, ConnectError> {
    let Transport::Http { url, headers, .. } = &up.config.transport else {
        return Err(ConnectError::NotHttp);
    };
    let lifecycle = match up.protocol().as_deref() {
        Some("2026-07-28") => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        _ => ClientLifecycleMode::Initialize,
    };
    let (events, _) = mpsc::channel(1);
    let handler = UpstreamClient {
        name: up.name().into(),
        events,
        flood: Arc::new(super::flood::Floodgate::new(
            up.name().into(),
            relay.clone(),
        )),
        progress,
        relay,
    };
    let mut custom = HashMap::new();
    for (k, v) in headers {
        let name = http::HeaderName::from_bytes(k.as_bytes())?;
        custom.insert(name, http::HeaderValue::from_str(v)?);
    }
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
    let refused: Arc<std::sync::atomic::AtomicBool> = Default::default();
    let mut retry = FixedInterval::default();
    retry.max_times = Some(3);
    config.retry_config = Arc::new(super::oversize::Reconnect {
        tries: retry,
        refused: refused.clone(),
    });
    config.max_sse_event_size = up.config.max_message_bytes;
    config.max_json_response_size = up.config.max_message_bytes;
    let (challenge, token_failure) = (Arc::default(), Arc::default());
    let client = super::oversize::MeasuredClient {
        inner: http_client()?,
        oversized: up.oversized.clone(),
        refused,
        token: Some(token),
        challenge: Arc::clone(&challenge),
        token_failure: Arc::clone(&token_failure),
        raw_tools: None,
    };
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let step = step_name(&lifecycle);
    handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| {
            let no_token = token_failure.lock().unwrap_or_else(|p| p.into_inner()).take();
            let challenge = challenge.lock().unwrap_or_else(|p| p.into_inner()).take();
            ConnectError::Failed(match (no_token, challenge) {
                (Some(why), _) => why,
                (None, Some(c)) => format!(
                    "{url} refused the exchanged token at {step} (401, WWW-Authenticate: {c}): check upstreams.{}.oauth's resource, audience and scopes",
                    up.name()
                ),
                (None, None) => format!("{step} at {url} failed: {}", plain_error(&e)),
            })
        })
}

/// Opens a legacy HTTP+SSE session's event stream (`upstream::sse`) and notes that the
/// server speaks it, so a reconnect goes there first.
async fn open_sse(
    up: &Arc<Upstream>,
    url: &str,
    headers: &http::HeaderMap,
) -> Result<SseTransport, SseOpenError> {
    let client = http_client().map_err(|e| SseOpenError::Other(e.to_string()))?;
    let target = super::sse::Target {
        name: up.name(),
        url,
        headers,
        token: up.token.clone(),
        max_message_bytes: up.config.max_message_bytes,
    };
    let transport = SseTransport::open(client, target).await?;
    up.legacy_sse.store(true, Ordering::Relaxed);
    Ok(transport)
}

/// The handshake over an open HTTP+SSE session.
async fn serve_sse(
    handler: UpstreamClient,
    transport: SseTransport,
    lifecycle: ClientLifecycleMode,
    url: &str,
    step: &str,
) -> Result<Opened, Failed> {
    match handler.serve_with_lifecycle(transport, lifecycle).await {
        Ok(s) => Ok((s, None)),
        Err(e) if refusal(&e) => Err(Failed::Refused(format!(
            "{step} at {url} (HTTP+SSE) was refused: {e}"
        ))),
        Err(e) => Err(Failed::Other(format!(
            "{step} at {url} (HTTP+SSE) failed: {}",
            plain_error(&e)
        ))),
    }
}

/// Whether a failed handshake was the server's refusal (worth asking in the other era).
fn refusal(e: &ClientInitializeError) -> bool {
    matches!(
        e,
        ClientInitializeError::JsonRpcError(_)
            | ClientInitializeError::NoCompatibleProtocolVersion { .. }
    )
}

fn step_name(lifecycle: &ClientLifecycleMode) -> &'static str {
    match lifecycle {
        ClientLifecycleMode::Initialize => "initialize",
        _ => "server/discover",
    }
}

/// The client an HTTP upstream is dialed with. `TCP_NODELAY` is said here rather than left
/// to reqwest's default, so a change there cannot bring back Nagle's wait on small writes.
/// The rest is rmcp's own default client: no idle connections kept (a reused connection
/// can stall ~40 ms on a server's delayed ACK), and only same-origin 307/308 redirects,
/// which keep the POST body, and never replay the session id or headers to another host.
fn http_client() -> Result<reqwest::Client, ConnectError> {
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > 10 {
            attempt.error("more than 10 redirects")
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(0)
        .redirect(redirects)
        .build()
        .map_err(ConnectError::HttpClient)
}

/// An error as a person reads it: rmcp's transport errors display the transport's Rust
/// type (`WorkerTransport<StreamableHttpClientWorker<reqwest::Client>>`); the causes
/// below it (connection refused, a status code) are what matter.
fn plain_error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        let typeish = text.contains("::") && text.contains('<');
        if !typeish && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    if parts.is_empty() {
        return "the connection failed".into();
    }
    parts.join(": ")
}

/// A 401 at connect: what the server asks for, and what to configure.
fn unauthorized(name: &str, url: &str, challenge: &str, has_oauth: bool) -> String {
    let metadata = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next());
    let fix = if has_oauth {
        format!("the token upstreams.{name}.oauth got was refused: check its client, scopes and resource")
    } else {
        format!(
            "add [upstreams.{name}.oauth] with grant = \"authorization_code\" and run `toolgate auth login {name}`, or with a client of its authorization server (client credentials; docs/auth.md)"
        )
    };
    match metadata {
        Some(m) => format!(
            "{url} requires an OAuth access token (401; its authorization server is named at {m}, e.g. `curl {m}`): {fix}"
        ),
        None => format!("{url} requires authorization (401, WWW-Authenticate: {challenge}): {fix}, or set an Authorization header in upstreams.{name}.headers"),
    }
}

/// Why an HTTP upstream could not be reached. rmcp reports a refused connection only as a
/// closed channel (the cause goes to its log), so a failed dial is asked again directly.
async fn http_failure(url: &str, error: String) -> String {
    let authority = url.parse::<http::Uri>().ok().and_then(|u| {
        let port = u.port_u16().unwrap_or(if u.scheme_str() == Some("https") {
            443
        } else {
            80
        });
        u.host()
            .map(|h| format!("{}:{port}", h.trim_start_matches('[').trim_end_matches(']')))
    });
    if let Some(addr) = authority {
        let dial = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio::net::TcpStream::connect(&addr),
        )
        .await;
        match dial {
            Ok(Err(io)) => {
                return format!(
                    "cannot connect to {url}: {io}: is the server running and listening on {addr}?"
                )
            }
            Err(_) => return format!("cannot connect to {url}: no answer from {addr} within 5 s"),
            Ok(Ok(_)) => {}
        }
    }
    format!("cannot connect to {url}: {error}")
}
