//! Serving over Streamable HTTP at `/mcp`, with rmcp's `StreamableHttpService`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::ListenerExt;
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::server::FixtureServer;
use crate::wire::restore_raw_tools_text;

/// Binds `addr`, prints `listening http://IP:PORT/mcp` on stdout, serves until `shutdown`.
///
/// With `hang`, every request is read and never answered (`--fault no-initialize`).
pub async fn serve_http(
    server: FixtureServer,
    addr: SocketAddr,
    hang: bool,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    // Tests and the gateway read the real port from this line: it is the only stdout line.
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("listening http://{local}/mcp\n").as_bytes())
        .await?;
    stdout.flush().await?;
    serve_listener(server, listener, hang, shutdown).await
}

/// Serves `/mcp` on `listener` until `shutdown` (for embedding: prints nothing).
pub async fn serve_listener(
    server: FixtureServer,
    listener: TcpListener,
    hang: bool,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr()?;
    let router = if hang {
        axum::Router::new().fallback(std::future::pending::<String>)
    } else {
        let service = StreamableHttpService::new(
            {
                let server = server.clone();
                move || Ok(server.clone())
            },
            Arc::new(LocalSessionManager::default()),
            // Plain JSON answers where rmcp serves statelessly (2026-07-28), as the gateway.
            StreamableHttpServerConfig::default()
                .with_json_response(true)
                .with_cancellation_token(shutdown.child_token()),
        );
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(server, restore_layer))
    };
    tracing::info!(%local, "serving Streamable HTTP at /mcp");
    // Each write goes out at once: see `set_nodelay` in toolgate's `front/http.rs` for the 40 ms
    // a streamed answer otherwise waits on a keep-alive connection.
    let listener = listener.tap_io(|stream| {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY on an accepted connection: {e}");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}

/// Restores raw tools in answers, both plain JSON bodies and SSE event streams.
async fn restore_layer(
    State(server): State<FixtureServer>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    let content_type = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let (mut parts, body) = response.into_parts();
    if content_type.starts_with("application/json") {
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return Response::from_parts(parts, Body::empty());
        };
        let text = String::from_utf8_lossy(&bytes);
        let Some(restored) = restore_raw_tools_text(&server, &text) else {
            return Response::from_parts(parts, Body::from(bytes));
        };
        parts.headers.remove(axum::http::header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::from(restored));
    }
    if content_type.starts_with("text/event-stream") {
        let mut pending: Vec<u8> = Vec::new();
        let events = body.into_data_stream().filter_map(move |chunk| {
            let out = chunk.map(|bytes| {
                pending.extend_from_slice(&bytes);
                // Only whole events (ending in a blank line) can be parsed and rewritten.
                let end = pending.windows(2).rposition(|pair| pair == b"\n\n")? + 2;
                let complete: Vec<u8> = pending.drain(..end).collect();
                Some(Bytes::from(restore_sse(&server, &complete)))
            });
            std::future::ready(out.transpose())
        });
        return Response::from_parts(parts, Body::from_stream(events));
    }
    Response::from_parts(parts, body)
}

/// Rewrites the `data:` lines of complete SSE events.
fn restore_sse(server: &FixtureServer, events: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(events);
    if !text.contains("\"tools\"") {
        return events.to_vec();
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let restored = line
            .strip_prefix("data:")
            .and_then(|data| restore_raw_tools_text(server, data.trim()));
        match restored {
            Some(json) => {
                out.push_str("data: ");
                out.push_str(&json);
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    out.into_bytes()
}
