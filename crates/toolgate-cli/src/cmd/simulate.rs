//! `toolgate tokens --simulate QUERIES`: whole tasks run by an oracle agent, direct against
//! guided against code mode, with the input tokens of every request summed.

use anyhow::{anyhow, Result};
use clap::Args as ClapArgs;
use std::path::PathBuf;
use std::sync::Arc;
use toolgate::simulate::{simulate, ResultForm, SimOptions, SimReport};
use toolgate::surface::Detail;
use toolgate::Config;
use toolgate_core::catalog::{load_queries_file, Catalog};
use toolgate_route::shape::{Encoding, ShapeProfile, SurfaceOptions};

#[derive(ClapArgs)]
pub(crate) struct SimArgs {
    /// A query file (JSON lines of {"query", "expected"}): simulate each task direct,
    /// guided and in code mode.
    #[arg(long, value_name = "QUERIES")]
    pub simulate: Option<PathBuf>,
    /// What the direct loop sends (default: raw; with a configuration, its [direct] profile).
    #[arg(long, requires = "simulate", value_parser = ["raw", "slim", "local"])]
    pub profile: Option<String>,
    /// The schema detail the oracle asks route for.
    #[arg(long, requires = "simulate", default_value = "signature",
          value_parser = ["summary", "signature", "full"])]
    pub detail: String,
    /// What a route answer puts in context: the whole MCP result (mcp: content and
    /// structuredContent) or its text blocks only (text).
    #[arg(long, requires = "simulate", default_value = "mcp", value_parser = ["mcp", "text"])]
    pub result_form: String,
}

pub(crate) fn run(
    args: &SimArgs,
    catalog: Arc<Catalog>,
    config: Option<&Config>,
    encoding: Encoding,
    surface: SurfaceOptions,
    json: bool,
) -> Result<()> {
    let path = args.simulate.as_ref().expect("--simulate given");
    let tasks = load_queries_file(path)?;
    let profile = match &args.profile {
        Some(p) => ShapeProfile::parse(p).ok_or_else(|| anyhow!("unknown profile {p}"))?,
        None => config.map_or(ShapeProfile::Raw, |c| c.direct.profile),
    };
    let opts = SimOptions {
        encoding,
        profile,
        surface,
        detail: Detail::parse(&args.detail).ok_or_else(|| anyhow!("unknown detail"))?,
        threshold: config.map_or(toolgate_route::DEFAULT_THRESHOLD, |c| {
            c.guided.route_threshold
        }),
        result_form: match args.result_form.as_str() {
            "text" => ResultForm::Text,
            _ => ResultForm::Mcp,
        },
        skills: config.is_some_and(|c| c.code.skills_dir.is_some()),
        steps: config.is_some_and(|c| c.guided.route_steps),
    };
    let report = simulate(
        catalog,
        &tasks,
        &opts,
        &toolgate_fixture::instance::minimal_instance,
    );
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report, &path.display().to_string());
    }
    Ok(())
}

fn print_text(r: &SimReport, source: &str) {
    println!(
        "{} tasks from {source}; {}; direct profile {}; route detail {}; route answers counted as {}",
        r.tasks.len(),
        r.encoding,
        serde_json::to_value(r.profile).map_or_else(|_| "?".into(), |v| v.as_str().unwrap_or("?").to_string()),
        r.detail,
        match r.result_form {
            ResultForm::Mcp => "whole MCP results (content + structuredContent)",
            ResultForm::Text => "their text blocks",
        }
    );
    println!("oracle: {}", r.oracle);
    println!(
        "every request carries: direct {} tokens of definitions (OpenAI tools form); guided {} (meta-tools + instructions); code {} (meta-tools with execute_code and describe_tools + instructions)",
        r.direct_definitions, r.guided_surface, r.code_surface
    );
    println!("tool results are left out of every column (in code mode intermediate results never reach the model at all).\n");
    println!(
        "{:<38} {:>5} {:>10} {:>8} {:>7} {:>8} {:>7} {:>6} {:>12}",
        "task", "tools", "direct", "guided", "g/d", "code", "c/d", "routes", "requests d/g/c"
    );
    for t in &r.tasks {
        let mut note = String::new();
        if !t.missing.is_empty() {
            note.push_str(&format!("  missing: {}", t.missing.join(", ")));
        }
        if !t.unrouted.is_empty() {
            note.push_str(&format!("  not routed: {}", t.unrouted.join(", ")));
        }
        println!(
            "{:<38} {:>5} {:>10} {:>8} {:>6.2}% {:>8} {:>6.2}% {:>6} {:>4}/{}/{}{note}",
            t.id,
            t.tools,
            t.direct,
            t.guided,
            t.ratio * 100.0,
            t.code,
            t.code_ratio * 100.0,
            t.routes,
            t.direct_requests,
            t.guided_requests,
            t.code_requests
        );
    }
    let s = &r.stats;
    let t = &r.totals;
    println!(
        "\ntotal: direct {} guided {} code {}; guided/direct {:.2}%, code/direct {:.2}%, code/guided {:.2}%",
        t.direct,
        t.guided,
        t.code,
        t.ratio * 100.0,
        t.code_ratio * 100.0,
        t.code_vs_guided * 100.0
    );
    println!(
        "per-task guided/direct: min {:.2}%, median {:.2}%, max {:.2}%; tasks where guided >= direct: {}",
        s.min * 100.0,
        s.median * 100.0,
        s.max * 100.0,
        s.guided_not_cheaper
    );
    println!(
        "per-task code/direct: median {:.2}%; tasks where code >= direct: {}, where code >= guided: {}",
        s.code_median * 100.0,
        s.code_not_cheaper,
        s.code_not_cheaper_than_guided
    );
    let routes: usize = r.tasks.iter().map(|t| t.routes).sum();
    println!(
        "route selected the expected tool from the task text alone in {} of {} steps; {routes} route calls for {} executed tools ({:.2} each: a question's candidate runs by execute at once, else a second route by exact name)",
        s.first_route_selected,
        s.steps,
        s.steps,
        routes as f64 / s.steps.max(1) as f64
    );
}
