//! `toolgate tokens`: what each surface of a catalog costs in model tokens, and with
//! `--simulate`, what whole tasks cost direct against guided.

use super::common::{start_and_settle, ConfigArgs};
use anyhow::{anyhow, Context, Result};
use clap::Args as ClapArgs;
use std::path::PathBuf;
use std::sync::Arc;
use toolgate::Config;
use toolgate::TokenReport;
use toolgate::UpstreamStatus;
use toolgate_core::catalog::{load_catalog_file, Catalog};
use toolgate_route::shape::{Encoding, SurfaceOptions};

#[derive(ClapArgs)]
pub(crate) struct Args {
    /// A catalog file (see datasets/README.md), instead of a live configuration
    /// (with --config, that file still supplies [direct] options and [policy] profiles).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["mcp_json", "demo"])]
    pub catalog: Option<PathBuf>,
    /// Without --catalog: start the gateway, wait for the upstreams, measure its live catalog.
    #[command(flatten)]
    pub source: ConfigArgs,
    /// BPE encoding: o200k (GPT-4o and later) or cl100k (GPT-4).
    #[arg(long, default_value = "o200k", value_parser = ["o200k", "cl100k"])]
    pub encoding: String,
    /// One JSON object: `servers` rows and `totals` (OpenAI form) of direct, slim, local, guided.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as one static HTML page (the dashboard's catalog view) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Surface options as JSON: {"slim": {...SlimOptions}, "local": {...LocalOptions}}
    /// (default: the configuration's [direct] section, else the defaults).
    #[arg(long, value_name = "FILE")]
    pub options: Option<PathBuf>,
    #[command(flatten)]
    pub simulate: super::simulate::SimArgs,
    /// Measure only what this policy profile lists (from the configuration's [policy.profiles]).
    #[arg(long = "policy-profile", value_name = "NAME")]
    pub policy_profile: Option<String>,
}

/// Reads `--options` (every field optional); else the configuration's `[direct]`
/// options; else the defaults.
pub(crate) fn options(path: &Option<PathBuf>, config: Option<&Config>) -> Result<SurfaceOptions> {
    let Some(path) = path else {
        return Ok(config.map_or_else(SurfaceOptions::default, |c| {
            c.direct.surface_options(&c.gateway.meta_prefix)
        }));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read options file {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("in options file {}", path.display()))
}

/// The catalog a subcommand measures: the `--catalog` file, or the live catalog of the
/// configured gateway (started, settled, shut down), with that configuration.
pub(crate) async fn load(
    catalog: &Option<PathBuf>,
    source: &ConfigArgs,
) -> Result<(Arc<Catalog>, Option<Config>)> {
    if let Some(path) = catalog {
        let config = match &source.config {
            Some(c) => Some(Config::from_toml_file(c)?),
            None => None,
        };
        return Ok((
            Arc::new(Catalog::from_entries(load_catalog_file(path)?)),
            config,
        ));
    }
    let gw = start_and_settle(source.load()?).await;
    let catalog = gw.catalog();
    for up in gw.upstreams().filter(|u| u.config.enabled) {
        match up.status() {
            UpstreamStatus::Ready { .. } => {}
            UpstreamStatus::Retrying { error, .. } => {
                eprintln!(
                    "toolgate: {} is not up ({error}); its tools are not counted",
                    up.name()
                )
            }
            s => eprintln!(
                "toolgate: {} is {}; its tools are not counted",
                up.name(),
                s.label()
            ),
        }
    }
    gw.shutdown().await;
    Ok((catalog, Some(gw.config.clone())))
}

/// The catalog as a policy profile lists it: hidden and shadow tools left out.
fn profile_view(catalog: &Catalog, name: &str, config: &Config) -> Result<Catalog> {
    let mut policy = config.policy.clone();
    // A report must not write to the gateway's audit log.
    policy.audit_path = None;
    let profile = policy.profiles.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = policy.profiles.keys().map(String::as_str).collect();
        anyhow!(
            "--policy-profile {name:?}: not in {}; the profiles are: {}",
            config.source_name(),
            known.join(", ")
        )
    })?;
    let policy = toolgate::Policy::new(&policy);
    let caller = toolgate::Caller::offline(policy.clone(), Some(profile));
    Ok(policy.view(&caller, catalog))
}

pub(crate) async fn run(args: Args) -> Result<()> {
    let (mut catalog, config) = load(&args.catalog, &args.source).await?;
    if let Some(name) = &args.policy_profile {
        let config = config.as_ref().ok_or_else(|| {
            anyhow!("--policy-profile needs the configuration that defines it (--config FILE)")
        })?;
        catalog = Arc::new(profile_view(&catalog, name, config)?);
    }
    let enc = Encoding::parse(&args.encoding).ok_or_else(|| anyhow!("unknown encoding"))?;
    let opts = options(&args.options, config.as_ref())?;
    if args.simulate.simulate.is_some() {
        return super::simulate::run(
            &args.simulate,
            catalog,
            config.as_ref(),
            enc,
            opts,
            args.json,
        );
    }
    // The code column as a code-mode session of this configuration lists itself.
    let skills = config.as_ref().is_some_and(|c| c.code.skills_dir.is_some());
    let report = TokenReport::build_with(&catalog, enc, &opts, skills);
    if let Some(path) = &args.html {
        let page = toolgate::dashboard_page(&report);
        std::fs::write(path, page)
            .with_context(|| format!("--html: cannot write {}", path.display()))?;
        eprintln!("toolgate: wrote the catalog view to {}", path.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{} tools, {}; tokens of each tool's JSON as a client sends it (OpenAI tools form / MCP tools/list form)\n",
        report.tools, report.encoding
    );
    println!(
        "{:<20} {:>5} {:>13} {:>13} {:>9} {:>9}  largest tool (direct, OpenAI)",
        "server", "tools", "direct oai", "direct mcp", "slim oai", "local oai"
    );
    for r in &report.servers {
        println!(
            "{:<20} {:>5} {:>13} {:>13} {:>9} {:>9}  {} ({})",
            r.server,
            r.tools,
            r.direct.openai,
            r.direct.mcp,
            r.slim.openai,
            r.local.openai,
            r.largest.tool,
            r.largest.tokens
        );
    }
    println!(
        "\n{:<8} {:>10} {:>10} {:>8}",
        "surface", "openai", "mcp", "saving"
    );
    let t = &report.totals;
    let m = &report.totals_mcp;
    let s = &report.savings;
    println!(
        "{:<8} {:>10} {:>10} {:>8}",
        "direct", t.direct, m.direct, "-"
    );
    for (name, oai, mcp) in [
        ("slim", t.slim, m.slim),
        ("local", t.local, m.local),
        ("guided", t.guided, m.guided),
        ("code", t.code, m.code),
    ] {
        println!("{name:<8} {oai:>10} {mcp:>10} {:>7.1}%", s[name]);
    }
    println!(
        "\nguided = {} tokens of meta-tool definitions + {} of instructions; code = a code-mode session's list, {} + {}{}; savings are against direct, OpenAI form",
        report.guided_tools,
        report.guided_instructions,
        report.code_tools,
        report.code_instructions,
        if report.code_skills { " (with skills)" } else { " (without skills: no code.skills_dir)" }
    );
    Ok(())
}
