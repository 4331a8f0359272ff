//! `toolgate tools`: the catalog as the gateway sees it (server, tool, exposed name, status).

use super::common::{start_and_settle, ConfigArgs};
use anyhow::Result;
use clap::Args;
use serde_json::json;

#[derive(Args, Debug)]
pub(crate) struct ToolsArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// One JSON object per tool, one per line.
    #[arg(long)]
    pub json: bool,
}

/// Exits non-zero when an enabled upstream is not ready (its tools are missing from the list).
pub(crate) async fn run(args: ToolsArgs) -> Result<bool> {
    super::common::init_logging("warn");
    let gw = start_and_settle(args.config.load()?).await;
    let mut all_ok = true;
    let catalog = gw.catalog();
    if !args.json {
        println!("{:<20} {:<40} {:<45} STATUS", "SERVER", "TOOL", "EXPOSED");
    }
    let protocol = |server: &str| gw.upstream(server).and_then(|u| u.protocol());
    for t in catalog.tools() {
        if args.json {
            println!(
                "{}",
                json!({"server": t.id.server, "tool": t.id.name, "exposed": t.exposed, "status": "ready",
                       "protocol": protocol(&t.id.server)})
            );
        } else {
            println!(
                "{:<20} {:<40} {:<45} ready",
                t.id.server, t.id.name, t.exposed
            );
        }
    }
    // Upstreams that are not up have no tools to list; say so rather than omit them.
    for up in gw.upstreams() {
        let status = up.status();
        if up.tools().is_empty() && !matches!(status, toolgate::UpstreamStatus::Ready { .. }) {
            let detail = match &status {
                toolgate::UpstreamStatus::Retrying { error, .. } => error.clone(),
                toolgate::UpstreamStatus::Starting => "still connecting".into(),
                toolgate::UpstreamStatus::Disabled => "enabled = false".into(),
                _ => String::new(),
            };
            all_ok &= !up.config.enabled;
            if args.json {
                println!(
                    "{}",
                    json!({"server": up.name(), "tool": null, "exposed": null, "status": status.label(), "detail": detail})
                );
            } else {
                println!(
                    "{:<20} {:<40} {:<45} {}: {detail}",
                    up.name(),
                    "-",
                    "-",
                    status.label()
                );
            }
        }
    }
    eprintln!(
        "{} tools from {} upstreams",
        catalog.len(),
        gw.upstreams().count()
    );
    for up in gw.upstreams() {
        if let Some(p) = up.protocol() {
            eprintln!("{}: MCP {p}", up.name());
        }
    }
    gw.shutdown().await;
    if !all_ok {
        eprintln!("some upstreams are not connected: `toolgate check` says why");
    }
    Ok(all_ok)
}
