//! The legacy HTTP+SSE transport (protocol 2024-11-05) as rmcp's transport, for servers
//! that have not moved to Streamable HTTP: a `GET` opens an event stream whose first event,
//! `endpoint`, names the URL to `POST` messages to; every message of the server's (answers,
//! notifications, its own requests) arrives as a `message` event on that stream.
//!
//! The stream is read by one task that hands messages to `receive`; a `POST` answers
//! `202 Accepted` and carries nothing back. When the stream ends (the server restarted or
//! went away) `receive` ends and the supervisor reconnects from scratch, as for any other
//! lost connection. An event over `max_message_bytes` ends the stream with that reason.

use super::oauth::TokenSource;
use futures::StreamExt;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Messages read ahead of `receive`; a server that writes faster waits on its stream.
const QUEUE: usize = 256;

/// How a `POST` of a message failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct SendError(String);

/// One open HTTP+SSE session.
pub(super) struct SseTransport {
    client: reqwest::Client,
    /// Where messages are posted: the `endpoint` event's URL, resolved against the stream's.
    endpoint: reqwest::Url,
    headers: http::HeaderMap,
    token: Option<Arc<TokenSource>>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

/// Why a session could not be opened.
#[derive(Debug)]
pub(super) enum OpenError {
    /// The URL answered, but not with an event stream: not a legacy SSE endpoint.
    NotAnEventStream(String),
    /// The server asked for authorization (401), with its `WWW-Authenticate`.
    Unauthorized(String),
    /// Anything else: the connection failed, the stream ended before `endpoint`, ...
    Other(String),
}

/// How to reach one server.
pub(super) struct Target<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub headers: &'a http::HeaderMap,
    pub token: Option<Arc<TokenSource>>,
    pub max_message_bytes: usize,
}

impl SseTransport {
    /// Opens the event stream and waits for its `endpoint` event. The caller bounds the
    /// wait (the connect timeout).
    pub(super) async fn open(client: reqwest::Client, to: Target<'_>) -> Result<Self, OpenError> {
        let url = reqwest::Url::parse(to.url)
            .map_err(|e| OpenError::Other(format!("{} is not a URL: {e}", to.url)))?;
        let mut get = client
            .get(url.clone())
            .headers(to.headers.clone())
            .header(http::header::ACCEPT, "text/event-stream");
        if let Some(t) = &to.token {
            get = get.bearer_auth(
                t.bearer()
                    .await
                    .map_err(|e| OpenError::Other(e.to_string()))?,
            );
        }
        let response = get
            .send()
            .await
            .map_err(|e| OpenError::Other(format!("GET {url}: {}", plain(&e))))?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            if let Some(t) = &to.token {
                t.invalidate();
            }
            let challenge = response
                .headers()
                .get(http::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            return Err(OpenError::Unauthorized(challenge));
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !status.is_success() || !content_type.starts_with("text/event-stream") {
            return Err(OpenError::NotAnEventStream(format!(
                "GET {url} answered {status}{}, not an event stream",
                match content_type.as_str() {
                    "" => String::new(),
                    t => format!(" ({t})"),
                }
            )));
        }
        let max = to.max_message_bytes;
        let mut events =
            sse_stream::SseStream::from_bytes_stream(bounded(response.bytes_stream(), max));
        // The first event names where to post; a server may send comments before it.
        let endpoint = loop {
            match events.next().await {
                Some(Ok(e)) if e.event.as_deref() == Some("endpoint") => {
                    let data = e.data.unwrap_or_default();
                    break resolve(&url, data.trim())
                        .map_err(|e| OpenError::Other(e.to_string()))?;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    return Err(OpenError::Other(format!(
                        "the event stream of {url} failed before its `endpoint` event: {}",
                        plain(&e)
                    )))
                }
                None => {
                    return Err(OpenError::Other(format!(
                        "the event stream of {url} ended before its `endpoint` event"
                    )))
                }
            }
        };
        let (tx, incoming) = mpsc::channel(QUEUE);
        let reader = tokio::spawn(read(to.name.to_string(), events, tx));
        Ok(Self {
            client,
            endpoint,
            headers: to.headers.clone(),
            token: to.token,
            incoming,
            reader,
        })
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The `endpoint` event's URI, resolved against the stream's URL. It must stay on the
/// same origin: a server cannot send the gateway's messages (and headers) elsewhere.
fn resolve(stream: &reqwest::Url, given: &str) -> Result<reqwest::Url, BadEndpoint> {
    let url = stream.join(given).map_err(|e| BadEndpoint::NotAUri {
        stream: stream.to_string(),
        given: given.to_string(),
        reason: e.to_string(),
    })?;
    if url.origin() != stream.origin() {
        return Err(BadEndpoint::OtherOrigin {
            stream: stream.to_string(),
            url: url.to_string(),
        });
    }
    Ok(url)
}

/// Why the `endpoint` event's URI is not where the gateway posts.
#[derive(Debug, thiserror::Error)]
enum BadEndpoint {
    /// It does not parse as a URI reference.
    #[error("the `endpoint` event of {stream} is not a URI ({given:?}): {reason}")]
    NotAUri {
        stream: String,
        given: String,
        reason: String,
    },
    /// It names another origin than the stream's.
    #[error("the `endpoint` event of {stream} names another origin ({url}): refused, messages stay on the server's own origin")]
    OtherOrigin { stream: String, url: String },
}

/// The server's events as messages, until the stream ends or `receive` is gone.
async fn read<S>(name: String, mut events: S, tx: mpsc::Sender<ServerJsonRpcMessage>)
where
    S: futures::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(upstream = %name, "the event stream failed: {}", plain(&e));
                return;
            }
        };
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let Some(data) = event.data else { continue };
        let message = match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
            Ok(m) => m,
            Err(e) => match unreadable(&name, &data, e) {
                Some(m) => m,
                None => continue,
            },
        };
        if tx.send(message).await.is_err() {
            return;
        }
    }
    tracing::info!(upstream = %name, "the server closed its event stream");
}

/// An event that is not an MCP message: an answer to a request of ours fails that request
/// now, saying why; anything else is skipped with a warning.
fn unreadable(name: &str, data: &str, e: serde_json::Error) -> Option<ServerJsonRpcMessage> {
    let clip = super::child::clip(data);
    let value = serde_json::from_str::<Value>(data).ok();
    let id = value
        .as_ref()
        .filter(|v| v.get("method").is_none())
        .and_then(|v| v.get("id"))
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    let why = format!("upstream {name:?} sent a message that is not valid MCP ({e}): {clip}");
    tracing::warn!(upstream = %name, "{why}");
    id.map(|id| super::stdio::failed(id, why))
}

/// The server's bytes, ended with an error once an event grows past `max` bytes (counted
/// from the last blank line, which ends an event), so a hostile server cannot fill memory.
fn bounded<S, B>(stream: S, max: usize) -> impl futures::Stream<Item = std::io::Result<B>>
where
    S: futures::Stream<Item = reqwest::Result<B>>,
    B: AsRef<[u8]>,
{
    let mut pending = 0usize;
    let mut after_newline = false;
    stream.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &b in chunk.as_ref() {
            match b {
                b'\n' if after_newline => pending = 0,
                b'\n' => after_newline = true,
                b'\r' => {}
                _ => {
                    after_newline = false;
                    pending += 1;
                }
            }
        }
        if pending > max {
            return Err(std::io::Error::other(format!(
                "an event is over max_message_bytes ({max} bytes)"
            )));
        }
        Ok(chunk)
    })
}

/// An error and its causes, as a person reads them.
fn plain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let c = cause.to_string();
        if !text.contains(&c) {
            text = format!("{text}: {c}");
        }
        next = cause.source();
    }
    text
}

impl rmcp::transport::Transport<RoleClient> for SseTransport {
    type Error = SendError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        let token = self.token.clone();
        async move {
            let body = serde_json::to_vec(&item).map_err(|e| SendError(e.to_string()))?;
            let mut post = client
                .post(endpoint.clone())
                .headers(headers)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body);
            if let Some(t) = &token {
                post = post.bearer_auth(t.bearer().await.map_err(|e| SendError(e.to_string()))?);
            }
            let response = post
                .send()
                .await
                .map_err(|e| SendError(format!("POST {endpoint}: {}", plain(&e))))?;
            let status = response.status();
            if status == reqwest::StatusCode::UNAUTHORIZED {
                if let Some(t) = &token {
                    t.invalidate();
                }
            }
            if !status.is_success() {
                let text = response.text().await.unwrap_or_default();
                return Err(SendError(format!(
                    "POST {endpoint} answered {status}: {}",
                    super::child::clip(text.trim())
                )));
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{bounded, resolve};
    use futures::StreamExt;

    #[test]
    fn the_endpoint_resolves_against_the_stream_and_stays_on_its_origin() {
        let stream = reqwest::Url::parse("http://127.0.0.1:3001/sse").unwrap();
        assert_eq!(
            resolve(&stream, "/message?sessionId=a").unwrap().as_str(),
            "http://127.0.0.1:3001/message?sessionId=a"
        );
        assert_eq!(
            resolve(&stream, "messages?s=1").unwrap().as_str(),
            "http://127.0.0.1:3001/messages?s=1"
        );
        let e = resolve(&stream, "http://evil.example/steal")
            .unwrap_err()
            .to_string();
        assert!(e.contains("another origin"), "{e}");
        let e = (resolve(&stream, "http://127.0.0.1:3002/message").unwrap_err()).to_string();
        assert!(e.contains("another origin"), "{e}");
    }

    #[tokio::test]
    async fn an_event_over_the_limit_ends_the_stream_and_small_ones_pass() {
        let chunks = |parts: Vec<&'static str>| {
            futures::stream::iter(
                parts
                    .into_iter()
                    .map(|p| Ok::<_, reqwest::Error>(p.as_bytes())),
            )
        };
        // Many small events, split across chunks: never over 16 bytes each.
        let ok = vec!["data: 0123456789\n", "\ndata: 01234", "56789\r\n\r\n"];
        let got: Vec<_> = bounded(chunks(ok), 16).collect().await;
        assert!(got.iter().all(|c| c.is_ok()), "{got:?}");
        // One event that keeps growing across chunks without a blank line.
        let big = vec!["data: 0123456789\n", "data: 0123456789\n"];
        let got: Vec<_> = bounded(chunks(big), 16).collect().await;
        let e = got.last().unwrap().as_ref().unwrap_err();
        assert!(e.to_string().contains("max_message_bytes"), "{e}");
    }
}
