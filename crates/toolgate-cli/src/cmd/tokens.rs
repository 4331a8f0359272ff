//! `toolgate tokens`: what each surface of a catalog costs in model tokens.

use anyhow::{anyhow, Context, Result};
use clap::Args as ClapArgs;
use std::path::PathBuf;
use toolgate::catalog::{load_catalog_file, Catalog};
use toolgate::shape::{Encoding, SurfaceOptions, TokenReport};

#[derive(ClapArgs)]
pub struct Args {
    /// A catalog file (see shared/datasets/README.md).
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// BPE encoding: o200k (GPT-4o and later) or cl100k (GPT-4).
    #[arg(long, default_value = "o200k", value_parser = ["o200k", "cl100k"])]
    pub encoding: String,
    /// One JSON object: `servers` rows and `totals` (OpenAI form) of direct, slim, local, guided.
    #[arg(long)]
    pub json: bool,
    /// Surface options as JSON: {"slim": {...SlimOptions}, "local": {...LocalOptions}}.
    #[arg(long, value_name = "FILE")]
    pub options: Option<PathBuf>,
    /// Measure only what this profile lists (from --config's [policy.profiles]).
    #[arg(long, value_name = "NAME", requires = "config")]
    pub profile: Option<String>,
    /// The toolgate.toml that defines --profile.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Reads `--options` (every field optional), or the defaults.
pub fn options(path: &Option<PathBuf>) -> Result<SurfaceOptions> {
    let Some(path) = path else {
        return Ok(SurfaceOptions::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read options file {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("in options file {}", path.display()))
}

/// The catalog as a profile lists it: hidden and shadow tools left out.
fn profile_view(catalog: Catalog, name: &str, config: &std::path::Path) -> Result<Catalog> {
    let mut policy = toolgate::config::Config::from_toml_file(config)?.policy;
    // A report must not write to the gateway's audit log.
    policy.audit_path = None;
    let profile = policy.profiles.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = policy.profiles.keys().map(String::as_str).collect();
        anyhow!(
            "--profile {name:?}: not in {}; the profiles are: {}",
            config.display(),
            known.join(", ")
        )
    })?;
    let policy = toolgate::policy::Policy::new(&policy);
    let caller = toolgate::policy::Caller::offline(policy.clone(), Some(profile));
    Ok(policy.view(&caller, &catalog))
}

/// Loads the catalog a subcommand was pointed at.
pub fn load(catalog: &Option<PathBuf>) -> Result<Catalog> {
    let path = catalog
        .as_ref()
        .ok_or_else(|| anyhow!("give the catalog to measure with --catalog FILE"))?;
    Ok(Catalog::from_entries(load_catalog_file(path)?))
}

pub fn run(args: Args) -> Result<()> {
    let mut catalog = load(&args.catalog)?;
    if let (Some(name), Some(path)) = (&args.profile, &args.config) {
        catalog = profile_view(catalog, name, path)?;
    }
    let enc = Encoding::parse(&args.encoding).ok_or_else(|| anyhow!("unknown encoding"))?;
    let report = TokenReport::build(&catalog, enc, &options(&args.options)?);
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
    ] {
        println!("{name:<8} {oai:>10} {mcp:>10} {:>7.1}%", s[name]);
    }
    println!(
        "\nguided = {} tokens of meta-tool definitions + {} of instructions; savings are against direct, OpenAI form",
        report.guided_tools, report.guided_instructions
    );
    Ok(())
}
