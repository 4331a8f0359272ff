//! Streamable HTTP: `/mcp` (the configured surface), `/mcp/guided` and `/mcp/direct`.

use super::Session;
use crate::config::Mode;
use crate::gateway::Gateway;
use crate::guided::Engine;
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The axum router with every MCP endpoint.
pub fn router(gw: Arc<Gateway>, shutdown: CancellationToken) -> axum::Router {
    let g = &gw.config.gateway;
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(g.allowed_hosts.iter().cloned());
    let ip = g.listen.ip();
    if !ip.is_unspecified() {
        hosts.push(ip.to_string());
    }
    // Browsers send Origin: a page on another site must not drive a local gateway.
    let origins = super::relay::allowed_origins(&hosts);
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    config.cancellation_token = shutdown;
    config.max_request_body_bytes = g.max_body_bytes;
    // One engine for every endpoint: pages and operations are shared state.
    let engine = Engine::new(gw.clone());
    let endpoint = |mode: Mode| {
        let engine = engine.clone();
        StreamableHttpService::new(
            move || Ok(Session::new(engine.clone(), mode)),
            Arc::new(LocalSessionManager::default()),
            config.clone(),
        )
    };
    axum::Router::new()
        .nest_service("/mcp/guided", endpoint(Mode::Guided))
        .nest_service("/mcp/direct", endpoint(Mode::Direct))
        .nest_service("/mcp", endpoint(g.mode))
}

/// Serves HTTP on `listener` until `shutdown` is cancelled.
pub async fn serve_http(
    listener: TcpListener,
    gw: Arc<Gateway>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let app = router(gw, shutdown.child_token());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}
