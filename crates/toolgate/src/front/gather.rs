//! One write for a quick answer. rmcp answers each request of a (legacy) session as an SSE
//! stream: a priming event, ready at once, then the message when the handler answers, then
//! the end. Sent as they come, that is two writes to the client's socket per call (the
//! headers and the priming event before the call even reaches its upstream, then the
//! message and the end) and two wake-ups of the client. `gather` holds a POST's SSE answer
//! until its stream ends, for at most `WAIT`: an answer that ends in time leaves in one
//! write (with a length, up to `MAX_JOINED`); a slower one sends what it has when the wait
//! is over, then streams the rest as it comes, so progress, logs and server requests are
//! late by `WAIT` at most.

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use futures::StreamExt;
use std::time::Duration;

/// The longest an SSE answer is held for the rest of its events.
const WAIT: Duration = Duration::from_millis(10);
/// The most of an answer joined into one body: a longer one is sent as the chunks it came
/// in (one write still, when they are all there), without a copy.
const MAX_JOINED: usize = 64 * 1024;

/// `response` with its SSE events gathered (see the module); any other response as it is.
pub(super) async fn gather(response: Response) -> Response {
    let sse = (response.headers().get(CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !sse {
        return response;
    }
    let (parts, body) = response.into_parts();
    // Fused: read to its end here, it may still be chained below.
    let mut events = body.into_data_stream().fuse();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut held: Vec<Bytes> = Vec::new();
    let mut size = 0;
    let mut failed = None;
    let ended = loop {
        if size > MAX_JOINED {
            break false;
        }
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(Ok(chunk))) => {
                size += chunk.len();
                held.push(chunk);
            }
            Ok(Some(Err(e))) => {
                failed = Some(e);
                break false;
            }
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    if ended && size <= MAX_JOINED {
        return Response::from_parts(parts, Body::from(held.concat()));
    }
    let head = futures::stream::iter(held.into_iter().map(Ok).chain(failed.map(Err)));
    Response::from_parts(parts, Body::from_stream(head.chain(events)))
}
