//! `toolgate check`: connect to each upstream once and report status, tools, latency, error.

use super::common::{start_and_settle, ConfigArgs};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use toolgate::upstream::UpstreamStatus;

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// One JSON object per upstream, one per line.
    #[arg(long)]
    pub json: bool,
}

/// Exits non-zero when an enabled upstream is not ready.
pub(crate) async fn run(args: CheckArgs) -> Result<bool> {
    super::common::init_logging("warn");
    let config = args.config.load()?;
    let source = config.source_name();
    let (config_skills, max_source) =
        (config.code.skills_dir.clone(), config.code.max_source_bytes);
    let gw = start_and_settle(config).await;
    let mut all_ok = true;
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
    // Skills: a bad one is skipped by the gateway (the rest keep working); reported here.
    if let Some(dir) = &config_skills {
        let set = toolgate::skills::SkillSet::scan(dir, max_source);
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
