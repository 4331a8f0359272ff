//! `toolgate check`: connect to each upstream once and report status, tools, latency, error;
//! and where `serve` keeps its state. `--config-only` reads and validates the configuration
//! without starting anything (what CI runs on every TOML example of the docs).

use super::common::ConfigArgs;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use toolgate::UpstreamStatus;

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// One JSON object per upstream, one per line.
    #[arg(long)]
    pub json: bool,
    /// Read and validate the configuration (its keys, variables and the files it names)
    /// without starting the upstreams.
    #[arg(long)]
    pub config_only: bool,
}

/// Exits non-zero when an enabled upstream is not ready.
pub(crate) async fn run(args: CheckArgs) -> Result<bool> {
    super::common::init_logging("warn");
    let config = args.config.load()?;
    let source = config.source_name();
    let store = store_line(&config);
    let oauth = config.policy.oauth.clone();
    if let Some(o) = &oauth {
        for line in o.describe() {
            if args.json {
                println!("{}", json!({"auth": "oauth", "detail": line.trim()}));
            } else {
                println!("{line}");
            }
        }
    }
    if args.config_only {
        let names: Vec<&str> = config.upstreams.keys().map(String::as_str).collect();
        if args.json {
            println!(
                "{}",
                json!({"config": "ok", "source": source, "upstreams": names})
            );
            println!("{}", store.1);
        } else {
            println!(
                "{source}: configuration valid; {} upstreams ({}), not started",
                names.len(),
                names.join(", ")
            );
            println!("{}", store.0);
        }
        return Ok(true);
    }
    let (config_skills, max_source) =
        (config.code.skills_dir.clone(), config.code.max_source_bytes);
    // Upstreams that log in (`toolgate auth login`) find their tokens in the state store;
    // an embedded store the running gateway holds is left alone (those upstreams then say so).
    let logins = config.upstreams.values().any(|u| {
        matches!(&u.transport, toolgate::Transport::Http { oauth: Some(o), .. }
            if o.grant == toolgate::OAuthGrant::AuthorizationCode)
    });
    let durable = if logins {
        match super::serve::open_store(&config, false) {
            Ok(s) => s,
            Err(e) => {
                println!(
                    "state store not opened ({e:#}): upstreams that log in cannot be checked now"
                );
                None
            }
        }
    } else {
        None
    };
    let gw = super::common::start_and_settle_with(config, durable).await;
    let mut all_ok = true;
    // The issuer: its metadata and keys fetched as `serve` will fetch them.
    if let Some(o) = oauth {
        let issuer = o.issuer.clone();
        let (ok, detail) = match toolgate::oauth::Verifier::new(o).warm().await {
            Ok(n) => (
                true,
                format!("issuer {issuer}: reachable, {n} signing keys"),
            ),
            Err(e) => (false, format!("issuer {issuer}: {e}")),
        };
        all_ok &= ok;
        if args.json {
            println!(
                "{}",
                json!({"auth": "oauth", "status": if ok { "ready" } else { "error" }, "detail": detail})
            );
        } else {
            println!("{detail}");
        }
    }
    if !args.json {
        println!("upstreams from {source}:");
        println!(
            "{:<20} {:<9} {:>5} {:>8}  detail",
            "UPSTREAM", "STATUS", "TOOLS", "MS"
        );
    }
    for up in gw.upstreams() {
        let status = up.status();
        let tools = up.tools().len();
        let (ms, detail) = match &status {
            UpstreamStatus::Ready { latency } => (
                Some(latency.as_secs_f64() * 1000.0),
                up.server_info().unwrap_or_default(),
            ),
            UpstreamStatus::Retrying { error, .. } => (None, error.clone()),
            UpstreamStatus::Starting => (None, "still connecting".into()),
            UpstreamStatus::Disabled => (None, "enabled = false".into()),
            UpstreamStatus::Stopped => (None, String::new()),
        };
        if up.config.enabled && !matches!(status, UpstreamStatus::Ready { .. }) {
            all_ok = false;
        }
        if args.json {
            println!(
                "{}",
                json!({"upstream": up.name(), "status": status.label(), "tools": tools,
                       "latency_ms": ms, "protocol": up.protocol(), "detail": detail})
            );
        } else {
            let ms = ms.map_or("-".into(), |m| format!("{m:.0}"));
            println!(
                "{:<20} {:<9} {:>5} {:>8}  {detail}",
                up.name(),
                status.label(),
                tools,
                ms
            );
        }
    }
    // Configuration the upstreams' tool lists contradict (a rename of a missing tool, a
    // pinned tool that is not there): the gateway serves on, but check fails.
    let warnings = gw.config_warnings();
    for w in &warnings {
        if args.json {
            println!("{}", json!({"config": "warning", "detail": w}));
        } else {
            println!("warning: {w}");
        }
    }
    all_ok &= warnings.is_empty();
    gw.shutdown().await;
    println!("{}", if args.json { &store.1 } else { &store.0 });
    // Skills: a bad one is skipped by the gateway (the rest keep working); reported here.
    if let Some(dir) = &config_skills {
        let set = toolgate::skill::SkillSet::scan(dir, max_source);
        if args.json {
            for name in set.skills.keys() {
                println!("{}", json!({"skill": name, "status": "ready"}));
            }
            for e in &set.errors {
                println!("{}", json!({"skill": null, "status": "error", "detail": e}));
            }
        } else {
            println!(
                "skills from {}: {} ready, {} skipped",
                dir.display(),
                set.skills.len(),
                set.errors.len()
            );
            for e in &set.errors {
                println!("  skipped: {e}");
            }
        }
        all_ok &= set.errors.is_empty();
    }
    Ok(all_ok)
}

/// Where `serve` over HTTP keeps its state with this configuration, as a line for people
/// and as a JSON line: the embedded database's file is per configuration, so this is how a
/// user finds it.
fn store_line(config: &toolgate::Config) -> (String, String) {
    use toolgate::StoreBackend;
    let store = &config.store;
    match store.backend_for(false) {
        StoreBackend::Memory => (
            "state store: memory (nothing kept across restarts)".into(),
            json!({"store": "memory"}).to_string(),
        ),
        // The URL may hold a password: named by its key only.
        StoreBackend::Redis => (
            "state store: redis (store.url)".into(),
            json!({"store": "redis"}).to_string(),
        ),
        StoreBackend::Embedded => {
            match store.embedded_path(config.source.as_deref(), config.gateway.listen) {
                Ok(path) => (
                    format!(
                        "state store: embedded at {} (serve over HTTP; --stdio keeps state in memory)",
                        path.display()
                    ),
                    json!({"store": "embedded", "path": path}).to_string(),
                ),
                Err(e) => (
                    format!("state store: {e}"),
                    json!({"store": "embedded", "error": e.to_string()}).to_string(),
                ),
            }
        }
    }
}
