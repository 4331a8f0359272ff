//! `toolgate lint`: schema features that break or slow grammar-constrained local models.
//!
//! Exit status: 0 when the report was produced, findings or not (lint informs, and raw
//! upstream schemas nearly always have some); 1 with `--deny` when there are findings
//! (for CI); 2 when the catalog cannot be read.

use anyhow::{anyhow, Result};
use clap::Args as ClapArgs;
use std::io::Write;
use std::path::PathBuf;
use toolgate::LintReport;
use toolgate_route::shape::{listing, ShapeProfile};

#[derive(ClapArgs)]
pub(crate) struct Args {
    /// A catalog file (see datasets/README.md), instead of a live configuration.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "mcp_json", "demo"])]
    pub catalog: Option<PathBuf>,
    /// Without --catalog: start the gateway, wait for the upstreams, lint its live catalog.
    #[command(flatten)]
    pub source: super::common::ConfigArgs,
    /// Which schemas to check: as the upstreams sent them, slimmed, or local-model-safe
    /// (default: raw; with a configuration, its [direct] profile).
    #[arg(long, value_parser = ["raw", "slim", "local"])]
    pub profile: Option<String>,
    /// One JSON object: `findings` and `counts` by rule.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when anything is found.
    #[arg(long)]
    pub deny: bool,
    /// Instead of linting, print each tool's input schema under the profile, one JSON
    /// object per line: {"server", "tool", "schema"} (for external grammar checks).
    #[arg(long)]
    pub dump_schemas: bool,
    /// Surface options as JSON: {"slim": {...SlimOptions}, "local": {...LocalOptions}}.
    #[arg(long, value_name = "FILE")]
    pub options: Option<PathBuf>,
}

pub(crate) async fn run(args: Args) -> Result<()> {
    let (catalog, config) = super::tokens::load(&args.catalog, &args.source).await?;
    let profile = match &args.profile {
        Some(p) => ShapeProfile::parse(p).ok_or_else(|| anyhow!("unknown profile"))?,
        None => config
            .as_ref()
            .map_or(ShapeProfile::Raw, |c| c.direct.profile),
    };
    let opts = super::tokens::options(&args.options, config.as_ref())?;
    let mut out = std::io::stdout().lock();
    if args.dump_schemas {
        for t in listing(&catalog, profile, &opts) {
            let line = serde_json::json!({"server": t.id.server, "tool": t.id.name,
                "schema": t.tool.get("inputSchema")});
            writeln!(out, "{line}")?;
        }
        return Ok(());
    }
    let report = LintReport::build(&catalog, profile, &opts);
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        for f in &report.findings {
            writeln!(
                out,
                "{}/{}  {}  [{}]  {}",
                f.server,
                f.tool,
                if f.pointer.is_empty() {
                    "/"
                } else {
                    &f.pointer
                },
                f.rule.id(),
                f.why
            )?;
        }
        writeln!(
            out,
            "\n{} findings in {} of {} tools (profile {})",
            report.findings.len(),
            report.tools_with_findings,
            report.tools,
            profile_name(profile)
        )?;
        for (rule, n) in report.counts.iter().filter(|(_, n)| **n > 0) {
            writeln!(out, "  {rule:<20} {n}")?;
        }
    }
    out.flush()?;
    if args.deny && !report.findings.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

fn profile_name(p: ShapeProfile) -> &'static str {
    match p {
        ShapeProfile::Raw => "raw",
        ShapeProfile::Slim => "slim",
        ShapeProfile::Local => "local",
    }
}
