//! A gateway (direct mode) in this process, in front of the fixture over HTTP, also in this
//! process: for tests that read the sockets or the wire of both.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub struct InProcess {
    pub gw: Arc<toolgate::Gateway>,
    /// The gateway's HTTP front.
    pub front: SocketAddr,
    /// The fixture's HTTP server: the gateway's upstream `fx`.
    pub upstream: SocketAddr,
}

/// Starts the fixture serving `catalog` (server `fx`) with `knobs`, and the gateway with it
/// as its HTTP upstream; both stop with `stop` (then `gw.shutdown()`).
pub async fn start(catalog: &str, knobs: &str, stop: &CancellationToken) -> InProcess {
    let catalog = toolgate_fixture::Catalog::parse(catalog).unwrap();
    let knobs = toolgate_fixture::knobs::KnobsFile::parse(knobs).unwrap();
    let server =
        toolgate_fixture::FixtureServer::new("fx", catalog.select(None).unwrap(), knobs, None);
    let fx = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = fx.local_addr().unwrap();
    tokio::spawn(toolgate_fixture::http::serve_listener(
        server,
        fx,
        false,
        stop.child_token(),
    ));
    let toml = format!(
        "[gateway]\nmode = \"direct\"\nstartup_wait_ms = 30000\n[upstreams.fx]\nurl = \"http://{upstream}/mcp\"\n"
    );
    let config = toolgate::Config::from_toml_str(&toml, Path::new("toolgate.toml")).unwrap();
    let gw = toolgate::Gateway::start(config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap();
    tokio::spawn(toolgate::serve_http(
        listener,
        gw.clone(),
        stop.child_token(),
    ));
    InProcess {
        gw,
        front,
        upstream,
    }
}
