//! `toolgate serve`: run the gateway over Streamable HTTP (default) or stdio.

use super::common::ConfigArgs;
use anyhow::{anyhow, Result};
use clap::Args;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use toolgate::Gateway;
use toolgate::Mode;
use toolgate::UpstreamStatus;

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Serve one session on stdin/stdout (for clients that start toolgate themselves).
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,
    /// Serve Streamable HTTP on ADDR, path /mcp (default: gateway.listen, 127.0.0.1:8377).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub http: Option<String>,
    /// guided (three meta-tools), direct (every tool) or auto.
    #[arg(long)]
    pub mode: Option<Mode>,
    /// With --stdio: the profile this session sees (overrides policy.stdio_profile).
    #[arg(long, value_name = "NAME", requires = "stdio")]
    pub profile: Option<String>,
    /// With --stdio: act as this configured key (overrides policy.stdio_key; default: the
    /// local identity, which may call every tool).
    #[arg(long, value_name = "NAME", requires = "stdio")]
    pub key: Option<String>,
}

pub(crate) async fn run(args: ServeArgs) -> Result<()> {
    let config = args.config.load_quiet()?;
    let default = if args.stdio {
        "warn,toolgate=info"
    } else {
        "info"
    };
    let telemetry = super::telemetry::init(default, &config.telemetry)?;
    super::common::warn_unused(&config);
    let served = serve(args, config).await;
    telemetry.shutdown();
    served
}

async fn serve(args: ServeArgs, mut config: toolgate::Config) -> Result<()> {
    set_sandbox_worker(&mut config)?;
    if let Some(mode) = args.mode {
        config.gateway.mode = mode;
    }
    apply_identity(&mut config, args.profile, args.key)?;
    toolgate::Policy::preflight(&config.policy)?;
    let stop = CancellationToken::new();
    spawn_signal_handler(stop.clone());
    // A grandchild that leaves its upstream's process group (`setsid`) is reparented
    // here when its parent exits, and killed with what is left at shutdown.
    toolgate::adopt_orphans();
    if args.stdio {
        let durable = open_store(&config, args.stdio)?;
        let gw = Gateway::start_with_store(config, durable);
        let mode = gw.config.gateway.mode;
        let serving = toolgate::serve_stdio(gw.clone(), mode);
        let mut serving = std::pin::pin!(serving);
        let served = tokio::select! {
            r = &mut serving => r,
            _ = stop.cancelled() => drain_stdio(&gw, serving).await,
        };
        gw.shutdown().await;
        toolgate::kill_orphans();
        toolgate::audit::flush_all();
        return served;
    }
    let addr: SocketAddr = match args.http.as_deref() {
        None | Some("") => config.gateway.listen,
        Some(a) => a.parse().map_err(|_| {
            anyhow!("--http {a:?} is not an address: write IP:PORT, e.g. 127.0.0.1:8377")
        })?,
    };
    // The port first: a clash there is the user's problem to see, not a store message
    // that follows from it.
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => anyhow!(
            "cannot listen on {addr}: the port is in use (another toolgate, or another program, listens there): stop it, or pass --http 127.0.0.1:PORT or set gateway.listen"
        ),
        _ => anyhow!("cannot listen on {addr}: {e}; pass --http 127.0.0.1:PORT or set gateway.listen"),
    })?;
    let local = listener.local_addr()?;
    if config.policy.keys.is_empty() && config.policy.oauth.is_none() && !local.ip().is_loopback() {
        tracing::warn!("listening on {local} with no API keys: anyone who can reach it may call every tool; add [policy.keys] (toolgate key new NAME)");
    }
    // The bound address also names the demo's default store (`store::state_folder`).
    config.gateway.listen = local;
    // ... and the default resource of `[auth.oauth]` (`http://<listen>/mcp`).
    if let Some(oauth) = &mut config.policy.oauth {
        oauth.listening_on(local);
    }
    let durable = open_store(&config, args.stdio)?;
    let gw = Gateway::start_with_store(config, durable);
    let banner = {
        let gw = gw.clone();
        tokio::spawn(async move {
            gw.wait_settled(gw.config.gateway.startup_wait).await;
            print_banner(&gw, local);
        })
    };
    let served = toolgate::serve_http(listener, gw.clone(), stop.clone()).await;
    banner.abort();
    gw.shutdown().await;
    tracing::info!("shutting down: upstreams stopped");
    toolgate::kill_orphans();
    toolgate::audit::flush_all();
    served
}

/// SIGTERM on stdio: the session keeps being served while the calls in flight drain
/// (`gateway.limits.shutdown_grace_secs`; the rest are answered with an error saying the
/// gateway is shutting down), and a moment more for those answers to be written.
async fn drain_stdio(
    gw: &Arc<Gateway>,
    mut serving: std::pin::Pin<&mut impl std::future::Future<Output = Result<()>>>,
) -> Result<()> {
    let grace = gw.config.gateway.limits.shutdown_grace;
    tokio::select! {
        r = &mut serving => return r,
        _ = gw.drain(grace) => {}
    }
    // The last answers are one channel hop from stdout; the client may also just close.
    match tokio::time::timeout(std::time::Duration::from_secs(2), serving).await {
        Ok(r) => r,
        Err(_) => Ok(()),
    }
}

/// The `[store]` in force: nothing for memory, else the embedded database opened now, so
/// a store that cannot be used stops the command before anything is served.
pub(crate) fn open_store(
    config: &toolgate::Config,
    stdio: bool,
) -> Result<Option<Arc<dyn toolgate_core::store::Store>>> {
    use toolgate::StoreBackend;
    let store = &config.store;
    match store.backend_for(stdio) {
        StoreBackend::Memory => Ok(None),
        StoreBackend::Embedded => {
            let path = store.embedded_path(config.source.as_deref(), config.gateway.listen)?;
            let db = toolgate_core::store::EmbeddedStore::open_with_key(&path, &store.key_env)
                .map_err(|e| anyhow!("[store] backend = \"embedded\": {e}"))?;
            tracing::info!(path = %path.display(), "state store: embedded");
            Ok(Some(Arc::new(db)))
        }
        #[cfg(feature = "redis")]
        StoreBackend::Redis => {
            let url = store.url.as_deref().expect("validated: redis has a url");
            let Some(sealer) = toolgate_core::store::Sealer::from_env(&store.key_env)
                .map_err(|e| anyhow!("[store] backend = \"redis\": {e}"))?
            else {
                return Err(anyhow!(
                    "[store] backend = \"redis\" needs the key that seals stored values: set {} to 64 hex digits, the same on every replica (make one with `openssl rand -hex 32`)",
                    store.key_env
                ));
            };
            let db = toolgate_core::store::RedisStore::open(url, sealer)
                .map_err(|e| anyhow!("[store] backend = \"redis\": {e}"))?;
            tracing::info!("state store: redis");
            Ok(Some(Arc::new(db)))
        }
        #[cfg(not(feature = "redis"))]
        StoreBackend::Redis => Err(anyhow!(
            "this toolgate was built without the `redis` feature"
        )),
    }
}

/// `--profile` and `--key` for stdio: checked against the configuration here, so a typo
/// stops the command instead of silently serving everything.
fn apply_identity(
    config: &mut toolgate::Config,
    profile: Option<String>,
    key: Option<String>,
) -> Result<()> {
    let source = config.source_name();
    let p = &mut config.policy;
    if let Some(name) = profile {
        if !p.profiles.contains_key(&name) {
            let known: Vec<&str> = p.profiles.keys().map(String::as_str).collect();
            return Err(anyhow!(
                "--profile {name:?}: no such profile in {source}; the profiles are: {}",
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
        p.stdio_profile = Some(name);
    }
    if let Some(name) = key {
        match p.key(&name) {
            None => {
                return Err(anyhow!(
                    "--key {name:?}: no [policy.keys.{name}] in {source}"
                ))
            }
            Some(k) if k.revoked => return Err(anyhow!("--key {name:?}: that key is revoked")),
            Some(_) => p.stdio_key = Some(name),
        }
    }
    if let Some(k) = p.stdio_key.as_deref().and_then(|k| p.key(k)) {
        if k.revoked {
            return Err(anyhow!("policy.stdio_key {:?} is revoked", k.grant.name));
        }
    }
    Ok(())
}

fn print_banner(gw: &Arc<Gateway>, addr: SocketAddr) {
    let catalog = gw.catalog();
    let mode = gw.config.gateway.mode;
    eprintln!(
        "toolgate {} serving {}",
        env!("CARGO_PKG_VERSION"),
        gw.config.source_name()
    );
    for up in gw.upstreams() {
        let detail = match up.status() {
            UpstreamStatus::Ready { latency } => {
                format!("{} tools, {} ms", up.tools().len(), latency.as_millis())
            }
            UpstreamStatus::Retrying { error, .. } => error,
            s => s.label().to_string(),
        };
        eprintln!("  {:<16} {:<9} {detail}", up.name(), up.status().label());
    }
    // What the runtime really runs (gateway.worker_threads, else one fewer than the cores).
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    eprintln!(
        "{} tools; mode {}; {workers} worker threads",
        catalog.len(),
        mode.as_str()
    );
    eprintln!("MCP endpoint: http://{addr}/mcp   (also /mcp/guided and /mcp/direct)");
    let policy = &gw.config.policy;
    if !policy.profiles.is_empty() {
        let names: Vec<&str> = policy.profiles.keys().map(String::as_str).collect();
        eprintln!(
            "profiles: http://{addr}/mcp/p/<profile> for {}",
            names.join(", ")
        );
    }
    if let Some(oauth) = &policy.oauth {
        eprintln!(
            "access tokens from {} (audience {}); clients discover it from the 401 (OAuth 2.1){}",
            oauth.issuer,
            oauth.audience,
            match policy.keys.len() {
                0 => String::new(),
                n => format!(", or send one of {n} API keys"),
            }
        );
    } else if policy.keys.is_empty() {
        eprintln!("no API keys configured: HTTP is open to whoever can reach {addr}");
    } else {
        eprintln!(
            "{} API keys configured: clients send Authorization: Bearer <key>",
            policy.keys.len()
        );
    }
    eprintln!(
        "connect a client, e.g.:  claude mcp add --transport http toolgate http://{addr}/mcp"
    );
}

/// Code mode runs programs in this binary's `sandbox-worker` subcommand unless
/// `code.worker` names another command.
fn set_sandbox_worker(config: &mut toolgate::Config) -> Result<()> {
    if config.code.worker.is_some() {
        return Ok(());
    }
    if cfg!(feature = "code-mode") {
        let exe = std::env::current_exe()
            .map_err(|e| anyhow!("cannot find this program's path for code mode: {e}"))?;
        config.code.worker = Some(vec![exe.display().to_string(), "sandbox-worker".into()]);
    } else if config.code.enabled {
        return Err(anyhow!(
            "{}: code.enabled = true, but this toolgate was built without the code-mode feature; rebuild with it or set code.worker",
            config.source_name()
        ));
    }
    Ok(())
}

fn spawn_signal_handler(stop: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    tokio::spawn(async move {
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        // SIGHUP is what logrotate sends: reopen the audit log, never stop.
        let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = hup.recv() => {
                    tracing::info!("SIGHUP: reopening the audit log");
                    toolgate::audit::reopen_all();
                }
            }
        }
        tracing::info!("shutting down");
        stop.cancel();
    });
}
