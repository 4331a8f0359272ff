//! An HTTP upstream's answers over `max_message_bytes`, named exactly: rmcp's HTTP client
//! ends a response stream whose event is over its limit (or refuses a JSON body over it)
//! and the call then fails as if the connection had closed. This wraps the client rmcp is
//! given, notes which request's answer was too large, and `Upstream::call` says so.
//! It also notes when the server refuses connections (it is down): `Reconnect` then stops
//! retrying a lost stream at once, and the call it ended says the server is down.
//! It also sends a call's W3C `traceparent` header (the `observe::trace::Traceparent` in
//! the request's extensions, set by `Upstream::call` with the `otel` feature), and keeps
//! a streamed `tools/list` answer's tools as the server wrote them (`listing::capture_tools`).

use futures::stream::{BoxStream, StreamExt};
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::common::client_side_sse::{FixedInterval, SseRetryPolicy};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use toolgate_core::observe::trace::{Traceparent, TRACEPARENT};

/// Request keys (`requests::request_key`) whose answer was over the limit, until taken.
pub(crate) type Oversized = Arc<Mutex<HashSet<String>>>;

/// The most keys kept; a flood of oversized answers nobody asks about stays bounded.
const KEPT: usize = 1024;

/// `reqwest::Client` as rmcp's HTTP client, noting oversized answers, and whether the
/// server refused the last connection.
#[derive(Clone)]
pub(crate) struct MeasuredClient {
    pub inner: reqwest::Client,
    pub oversized: Oversized,
    /// Set when a request could not connect (the server is down), cleared when one could.
    pub refused: Arc<AtomicBool>,
    /// `[upstreams.NAME.oauth]`: every request carries this token (`upstream::oauth`).
    pub token: Option<Arc<super::oauth::TokenSource>>,
    /// The `WWW-Authenticate` of the last 401 the server answered (cleared by a success).
    pub challenge: Arc<Mutex<Option<String>>>,
    /// Why the last request had no token to send (`[upstreams.NAME.oauth]`).
    pub token_failure: Arc<Mutex<Option<String>>>,
    /// Where the answer to `tools/list` is kept as the server wrote it, when streamed
    /// (`listing::capture_tools`: rmcp's `Tool` drops keys such as `execution`).
    pub raw_tools: Option<super::RawTools>,
}

/// How a lost stream is retried: a few tries, none once the server refuses connections
/// (`MeasuredClient::refused`; rmcp asks this after each failed try).
#[derive(Debug)]
pub(crate) struct Reconnect {
    pub tries: FixedInterval,
    pub refused: Arc<AtomicBool>,
}

impl SseRetryPolicy for Reconnect {
    fn retry(&self, current_times: usize) -> Option<std::time::Duration> {
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        self.tries.retry(current_times)
    }
}

impl MeasuredClient {
    /// The `Authorization` token a request carries: the upstream's own, when it has one.
    async fn auth(
        &self,
        given: Option<String>,
    ) -> Result<Option<String>, StreamableHttpError<reqwest::Error>> {
        match &self.token {
            None => Ok(given),
            Some(t) => match t.bearer().await {
                Ok(token) => Ok(Some(token)),
                Err(e) => {
                    let e = e.to_string();
                    *self.token_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
                    Err(StreamableHttpError::UnexpectedServerResponse(e.into()))
                }
            },
        }
    }

    /// Notes whether `r` reached the server, and a refused token (the next request asks
    /// for a new one).
    fn seen<T>(&self, r: &Result<T, StreamableHttpError<reqwest::Error>>) {
        let mut challenge = self.challenge.lock().unwrap_or_else(|e| e.into_inner());
        match r {
            Err(StreamableHttpError::AuthRequired(e)) => {
                *challenge = Some(e.www_authenticate_header.clone());
                if let Some(t) = &self.token {
                    t.invalidate();
                }
            }
            Ok(_) => *challenge = None,
            Err(_) => {}
        }
        drop(challenge);
        let refused = match r {
            Err(StreamableHttpError::Client(e)) => e.is_connect(),
            Err(StreamableHttpError::Io(e)) => e.kind() == std::io::ErrorKind::ConnectionRefused,
            Err(_) => return,
            Ok(_) => false,
        };
        self.refused.store(refused, Ordering::Relaxed);
    }
}

fn note(set: &Oversized, key: Option<&String>) {
    if let Some(k) = key {
        let mut s = set.lock().expect("oversized");
        if s.len() >= KEPT {
            s.clear();
        }
        s.insert(k.clone());
    }
}

/// The `traceparent` header a request carries, if its extensions hold one.
fn traceparent(message: &ClientJsonRpcMessage) -> Option<HeaderValue> {
    use rmcp::model::GetExtensions;
    let rmcp::model::JsonRpcMessage::Request(r) = message else {
        return None;
    };
    let tp = r.request.extensions().get::<Traceparent>()?;
    HeaderValue::from_str(&tp.0).ok()
}

/// The id of a `tools/list` request (sent raw, `listing.rs`).
fn listing_id(message: &ClientJsonRpcMessage) -> Option<rmcp::model::RequestId> {
    match message {
        rmcp::model::JsonRpcMessage::Request(r) => match &r.request {
            rmcp::model::ClientRequest::CustomRequest(c) if c.method == "tools/list" => {
                Some(r.id.clone())
            }
            _ => None,
        },
        _ => None,
    }
}

fn too_large(e: &SseError) -> bool {
    e.to_string().contains("exceeded the maximum size")
}

impl StreamableHttpClient for MeasuredClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let key = match &message {
            rmcp::model::JsonRpcMessage::Request(r) => Some(super::requests::request_key(&r.id)),
            _ => None,
        };
        let listing = self.raw_tools.clone().zip(listing_id(&message));
        let auth_header = self.auth(auth_header).await?;
        let mut custom_headers = custom_headers;
        if let Some(tp) = traceparent(&message) {
            custom_headers.insert(HeaderName::from_static(TRACEPARENT), tp);
        }
        let sent = self.inner.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        );
        let sent = sent.await;
        self.seen(&sent);
        match sent {
            Err(e @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                note(&self.oversized, key.as_ref());
                Err(e)
            }
            Ok(StreamableHttpPostResponse::Sse(stream, sid)) => {
                let set = self.oversized.clone();
                let watched = stream.inspect(move |item| match item {
                    Err(e) if too_large(e) => note(&set, key.as_ref()),
                    Ok(Sse {
                        data: Some(data), ..
                    }) => {
                        if let Some((raw, id)) = &listing {
                            super::listing::capture_tools(data, Some(id), raw);
                        }
                    }
                    _ => {}
                });
                Ok(StreamableHttpPostResponse::Sse(watched.boxed(), sid))
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let auth_header = self.auth(auth_header).await?;
        (self.inner)
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let auth_header = self.auth(auth_header).await?;
        let r = (self.inner)
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.seen(&r);
        r
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let auth_header = self.auth(auth_header).await?;
        let r = (self.inner)
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.seen(&r);
        r
    }
}
