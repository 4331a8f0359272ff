//! `toolgate route learned list|show|forget|export|import`: the operator's view of what
//! route learned from the models' choices (`[guided.learning]`), read from and written to
//! the configured state store. The embedded store is one process's file: stop the gateway
//! first (it holds the file, and reads the set at start). With Redis the replicas read the
//! set again within seconds.

use super::common::ConfigArgs;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::json;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use toolgate::route_learning as learning;
use toolgate_core::store::Store;
use toolgate_route::{Learned, LearnedExample};

#[derive(Subcommand)]
pub(crate) enum RouteCommand {
    /// What route learned from the models' choices.
    #[command(subcommand)]
    Learned(LearnedCommand),
}

#[derive(Subcommand)]
pub(crate) enum LearnedCommand {
    /// Every learned example: when, who, which profile, which tool, the task.
    List(ListArgs),
    /// What the learned examples say about one task, as route would weigh them.
    Show(ShowArgs),
    /// Forget the examples that match every filter given (at least one, or --all).
    Forget(ForgetArgs),
    /// Write the examples as `guided.route_examples` lines (with who taught them).
    Export(ExportArgs),
    /// Add examples from a file of such lines (an export, or route_examples lines).
    Import(ImportArgs),
}

#[derive(Args)]
pub(crate) struct ListArgs {
    /// Only this tool's examples (`server/tool`).
    #[arg(long, value_name = "SERVER/TOOL")]
    tool: Option<String>,
    /// Only this principal's examples.
    #[arg(long)]
    principal: Option<String>,
    /// One JSON object per example.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Args)]
pub(crate) struct ShowArgs {
    /// The task, as a model would give it to route.
    task: String,
    /// The caller asking (under mode "principal" only its own examples count).
    #[arg(long, default_value = "")]
    principal: String,
    /// The caller's profile (under mode "profile" only that profile's examples count).
    #[arg(long, default_value = "")]
    profile: String,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Args)]
pub(crate) struct ForgetArgs {
    /// Examples of this tool (`server/tool`).
    #[arg(long, value_name = "SERVER/TOOL")]
    tool: Option<String>,
    /// Examples taught by this principal (for one that taught wrong choices).
    #[arg(long)]
    principal: Option<String>,
    /// Examples whose task is this text (case, spacing and punctuation aside).
    #[arg(long)]
    task: Option<String>,
    /// Every example.
    #[arg(long, conflicts_with_all = ["tool", "principal", "task"])]
    all: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// Write here instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Args)]
pub(crate) struct ImportArgs {
    /// One JSON object a line: `{"query": ..., "expected": ["server/tool"]}`, optionally
    /// with the `principal`, `profile` and `at_ms` an export writes.
    file: PathBuf,
    /// The principal of lines that name none.
    #[arg(long, default_value = "import")]
    principal: String,
    /// The profile of lines that name none ("" is callers without a profile).
    #[arg(long, default_value = "")]
    profile: String,
    #[command(flatten)]
    config: ConfigArgs,
}

/// One line of an export, or of a route_examples file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    query: String,
    expected: Vec<String>,
    principal: Option<String>,
    profile: Option<String>,
    at_ms: Option<u64>,
    /// route_examples lines may carry the datasets' fields; they mean nothing here.
    #[serde(default, rename = "exact")]
    _exact: Option<bool>,
    #[serde(default, rename = "split")]
    _split: Option<String>,
}

pub(crate) fn run(cmd: RouteCommand) -> Result<bool> {
    let RouteCommand::Learned(cmd) = cmd;
    match cmd {
        LearnedCommand::List(a) => list(a),
        LearnedCommand::Show(a) => show(a),
        LearnedCommand::Forget(a) => forget(a),
        LearnedCommand::Export(a) => export(a),
        LearnedCommand::Import(a) => import(a),
    }
}

/// The configured store and the learned set in it.
fn open(config: &ConfigArgs) -> Result<(Arc<dyn Store>, Learned)> {
    let config = config.load_quiet()?;
    let Some(store) = super::serve::open_store(&config, false)? else {
        bail!(
            "{} keeps its state in memory ([store] backend = \"memory\"): nothing learned outlives the gateway, so there is nothing to read here",
            config.source_name()
        );
    };
    let mut set = Learned::new(config.guided.learning.clone());
    set.replace(learning::load(store.as_ref()));
    Ok((store, set))
}

fn save(store: &dyn Store, set: &Learned) -> Result<()> {
    if learning::save(store, set.examples()) {
        Ok(())
    } else {
        Err(anyhow!(
            "the learned examples could not be written to the store (the log above says why)"
        ))
    }
}

fn list(args: ListArgs) -> Result<bool> {
    let (_, set) = open(&args.config)?;
    let picked: Vec<&LearnedExample> = set
        .examples()
        .iter()
        .filter(|e| args.tool.as_ref().is_none_or(|t| &e.tool() == t))
        .filter(|e| args.principal.as_ref().is_none_or(|p| &e.principal == p))
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        for e in &picked {
            writeln!(out, "{}", serde_json::to_string(e)?)?;
        }
        return Ok(true);
    }
    if picked.is_empty() {
        writeln!(out, "nothing learned yet")?;
        return Ok(true);
    }
    let now = toolgate_core::store::now_ms();
    writeln!(out, "AGE\tPRINCIPAL\tPROFILE\tTOOL\tTASK")?;
    for e in &picked {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}",
            age(now.saturating_sub(e.at_ms)),
            e.principal,
            if e.profile.is_empty() {
                "-"
            } else {
                &e.profile
            },
            e.tool(),
            e.task
        )?;
    }
    writeln!(out, "{} of {} examples", picked.len(), set.len())?;
    Ok(true)
}

fn show(args: ShowArgs) -> Result<bool> {
    let (_, set) = open(&args.config)?;
    let evidence = set.evidence(&args.task, &args.principal, &args.profile);
    if evidence.votes.is_empty() {
        println!(
            "no learned example counts for this task (mode {:?}, principal {:?}, profile {:?})",
            set.settings.mode, args.principal, args.profile
        );
        return Ok(true);
    }
    println!("TOOL\tEXAMPLES\tPRINCIPALS\tNEAREST\tWEIGHT");
    for v in &evidence.votes {
        println!(
            "{}/{}\t{}\t{}\t{:.2}\t{:.2}",
            v.server, v.name, v.examples, v.principals, v.best, v.weight
        );
    }
    match (evidence.leader(), evidence.agreed(&set.settings, None)) {
        (_, Some(v)) => println!(
            "agreed: route selects {}/{} for this task unless it is destructive (then it asks, with it first)",
            v.server, v.name
        ),
        (Some(v), None) => println!(
            "{}/{} moves to the front of the candidates; route selects it when it also ranks it first on its own and the votes agree (min_agreement {}), else it asks",
            v.server, v.name, set.settings.min_agreement
        ),
        (None, None) => println!(
            "no clear lead ({:.0}% of the votes for the first): route's own order stands",
            evidence.share * 100.0
        ),
    }
    Ok(true)
}

fn forget(args: ForgetArgs) -> Result<bool> {
    if !args.all && args.tool.is_none() && args.principal.is_none() && args.task.is_none() {
        bail!("say what to forget: --tool SERVER/TOOL, --principal NAME, --task TEXT (together: examples matching all), or --all");
    }
    let (store, mut set) = open(&args.config)?;
    let task = args.task.as_deref().map(toolgate_route::normal_task);
    let gone = set.forget(&|e| {
        args.all
            || (args.tool.as_ref().is_none_or(|t| &e.tool() == t)
                && args.principal.as_ref().is_none_or(|p| &e.principal == p)
                && task
                    .as_ref()
                    .is_none_or(|t| &toolgate_route::normal_task(&e.task) == t))
    });
    if gone > 0 {
        save(store.as_ref(), &set)?;
    }
    println!("forgot {gone} examples; {} remain", set.len());
    Ok(true)
}

fn export(args: ExportArgs) -> Result<bool> {
    let (_, set) = open(&args.config)?;
    let mut text = String::new();
    for e in set.examples() {
        let line = json!({
            "query": e.task,
            "expected": [e.tool()],
            "principal": e.principal,
            "profile": e.profile,
            "at_ms": e.at_ms,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    match &args.out {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {} examples to {}", set.len(), path.display());
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(true)
}

fn import(args: ImportArgs) -> Result<bool> {
    let file = std::fs::File::open(&args.file)
        .with_context(|| format!("opening {}", args.file.display()))?;
    // Read and check every line before anything is written.
    let now = toolgate_core::store::now_ms();
    let mut new = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", args.file.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", args.file.display(), i + 1);
        let l: Line = serde_json::from_str(&line).with_context(|| {
            format!(
                "{}: expected {{\"query\": \"...\", \"expected\": [\"server/tool\"]}}",
                at()
            )
        })?;
        if l.expected.is_empty() {
            bail!("{}: \"expected\" names no tool", at());
        }
        for tool in &l.expected {
            let Some((server, name)) = tool.split_once('/') else {
                bail!("{}: {tool:?} is not `server/tool`", at());
            };
            new.push(LearnedExample {
                task: l.query.clone(),
                server: server.to_string(),
                name: name.to_string(),
                principal: l
                    .principal
                    .clone()
                    .unwrap_or_else(|| args.principal.clone()),
                profile: l.profile.clone().unwrap_or_else(|| args.profile.clone()),
                at_ms: l.at_ms.unwrap_or(now).min(now),
            });
        }
    }
    let (store, mut set) = open(&args.config)?;
    let before = set.len();
    let mut kept = 0;
    for ex in new {
        kept += usize::from(set.record(ex));
    }
    set.expire(now);
    save(store.as_ref(), &set)?;
    println!(
        "imported {kept} examples ({before} before, {} now; caps and expiry as [guided.learning] says)",
        set.len()
    );
    Ok(true)
}

/// `3d`, `5h`, `12m`, `40s`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}
