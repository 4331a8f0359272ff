//! Opening one connection to an upstream: spawn or dial, initialize, list the tools.

use super::child::{self, ChildProcess};
use super::client::{UpstreamClient, UpstreamEvent};
use super::Upstream;
use crate::config::Transport;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::common::client_side_sse::FixedInterval;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{Peer, ServiceExt};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A live connection.
pub(crate) struct Connection {
    pub service: RunningService<RoleClient, UpstreamClient>,
    /// The child process, for stdio upstreams.
    pub child: Option<ChildProcess>,
    pub tools: Vec<Map<String, Value>>,
    pub server_info: String,
}

/// Connects, initializes and lists tools. The caller applies the connect timeout.
pub(crate) async fn connect(
    up: &Arc<Upstream>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
) -> Result<Connection, String> {
    let handler = UpstreamClient {
        name: up.name().into(),
        events,
        progress: up.progress.clone(),
        relay: up.relay.clone(),
    };
    let (service, mut child) = match &up.config.transport {
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
                child::spawn(up.name(), what, up.raw_tools.clone()).map_err(|e| e.to_string())?;
            let service = tokio::select! {
                s = handler.serve((stdout, stdin)) => s,
                why = proc.wait() => {
                    return Err(proc.with_stderr(format!("{why} before answering initialize")).await)
                }
            };
            match service {
                Ok(s) => (s, Some(proc)),
                Err(e) => {
                    // If the process died, that is the real reason; say so.
                    let exited =
                        tokio::time::timeout(std::time::Duration::from_millis(300), proc.wait())
                            .await;
                    proc.terminate(std::time::Duration::from_millis(200)).await;
                    return Err(match exited {
                        Ok(why) => {
                            proc.with_stderr(format!("{why} before answering initialize"))
                                .await
                        }
                        Err(_) => format!("initialize failed: {}", plain_error(&e)),
                    });
                }
            }
        }
        Transport::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| e.to_string())?;
                let value = http::HeaderValue::from_str(v).map_err(|e| e.to_string())?;
                custom.insert(name, value);
            }
            let mut config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            // rmcp's default retries a lost stream forever; give up after a few tries so
            // the supervisor sees the connection end and reconnects from scratch.
            let mut retry = FixedInterval::default();
            retry.max_times = Some(3);
            config.retry_config = Arc::new(retry);
            let transport = StreamableHttpClientTransport::with_client(http_client()?, config);
            let service = match handler.serve(transport).await {
                Ok(s) => s,
                Err(e) => return Err(http_failure(url, plain_error(&e)).await),
            };
            (service, None)
        }
    };
    let server_info = service
        .peer()
        .peer_info()
        .map(|i| {
            let imp = i.server_info.as_ref();
            format!(
                "{} {} (protocol {})",
                imp.map_or("?", |s| s.name.as_str()),
                imp.map_or("?", |s| s.version.as_str()),
                i.protocol_version
            )
        })
        .unwrap_or_default();
    let tools = match list_tools(service.peer(), &up.raw_tools).await {
        Ok(t) => t,
        Err(e) => {
            if let Some(c) = child.as_mut() {
                c.terminate(std::time::Duration::from_millis(200)).await;
            }
            return Err(e);
        }
    };
    Ok(Connection {
        service,
        child,
        tools,
        server_info,
    })
}

/// The client an HTTP upstream is dialed with. `TCP_NODELAY` is said here rather than left
/// to reqwest's default, so a change there cannot bring back Nagle's wait on small writes.
/// The rest is rmcp's own default client: no idle connections kept (a reused connection
/// can stall ~40 ms on a server's delayed ACK), and only same-origin 307/308 redirects,
/// which keep the POST body, and never replay the session id or headers to another host.
fn http_client() -> Result<reqwest::Client, String> {
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
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
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

/// Every tool, following `nextCursor` to the end (bounded, against a looping server).
pub(crate) async fn list_tools(
    peer: &Peer<RoleClient>,
    raw: &super::RawTools,
) -> Result<Vec<Map<String, Value>>, String> {
    raw.lock().expect("raw tools").clear();
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..1000 {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        for t in page.tools {
            // Prefer the object as the server wrote it (stdio upstreams), else rmcp's view.
            let kept = raw.lock().expect("raw tools").remove(t.name.as_ref());
            match kept {
                Some(o) => out.push(o),
                None => {
                    if let Ok(Value::Object(o)) = serde_json::to_value(&t) {
                        out.push(o);
                    }
                }
            }
        }
        match page.next_cursor {
            Some(c) if !c.is_empty() => cursor = Some(c),
            _ => return Ok(out),
        }
    }
    Err("tools/list returned more than 1000 pages; giving up".into())
}
