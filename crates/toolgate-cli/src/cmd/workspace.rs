//! `toolgate workspace ls|cat|rm`: the operator's view of code mode's workspaces, the
//! files programs keep per principal (`key:<name>` for an API key, `local` for sessions
//! without one). Reads the folder `[code.workspace] dir` names, the same store a running
//! gateway writes; a gateway keeping workspaces in memory has nothing here to show.

use super::common::ConfigArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::time::SystemTime;
use toolgate::workspace::{paths, Workspace};

#[derive(Subcommand)]
pub(crate) enum WorkspaceCommand {
    /// Principals with files, and their files (one principal: only its files).
    Ls(LsArgs),
    /// Print one file.
    Cat(FileArgs),
    /// Remove one file or folder, or (no path) all of a principal's files.
    Rm(RmArgs),
}

#[derive(Args)]
pub(crate) struct LsArgs {
    /// Only this principal (`key:<name>` or `local`).
    pub principal: Option<String>,
    /// One JSON object per file, one per line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Args)]
pub(crate) struct FileArgs {
    pub principal: String,
    /// A path inside the workspace, e.g. `leads.csv` or `./workspace/leads.csv`.
    pub path: String,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Args)]
pub(crate) struct RmArgs {
    pub principal: String,
    /// A file or folder inside the workspace; without it, every file of the principal.
    pub path: Option<String>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

fn open(config: &ConfigArgs) -> Result<Workspace> {
    let c = config.load()?;
    if c.code.workspace.dir.is_none() {
        bail!(
            "{} keeps code-mode workspaces in the gateway's memory, which only the running gateway sees: \
             set dir under [code.workspace] (a folder relative to the file) to keep them on disk and inspect them here",
            c.source_name()
        );
    }
    Ok(Workspace::new(&c.code.workspace))
}

/// The path below the workspace root, checked as a program's would be.
fn inside(path: &str) -> Result<String> {
    let full = if path.trim_start_matches("./").starts_with("workspace") {
        path.to_string()
    } else {
        format!("./workspace/{path}")
    };
    let checked = paths::check(&full).map_err(|e| anyhow!(e))?;
    Ok(checked.rel())
}

fn age(modified: SystemTime) -> String {
    let secs = SystemTime::now()
        .duration_since(modified)
        .unwrap_or_default()
        .as_secs();
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

pub(crate) fn run(cmd: WorkspaceCommand) -> Result<bool> {
    match cmd {
        WorkspaceCommand::Ls(a) => {
            let ws = open(&a.config)?;
            let owners = match a.principal {
                Some(p) => vec![p],
                None => ws.owners().map_err(|e| anyhow!(e.message))?,
            };
            if !a.json {
                println!("{:<24} {:>10} {:>6}  path", "PRINCIPAL", "BYTES", "AGE");
            }
            for owner in owners {
                for f in ws.files(&owner).map_err(|e| anyhow!(e.message))? {
                    if a.json {
                        let modified = f
                            .modified
                            .duration_since(SystemTime::UNIX_EPOCH)
                            .unwrap_or_default()
                            .as_secs();
                        println!(
                            "{}",
                            json!({"principal": owner, "path": f.path, "bytes": f.bytes, "modified": modified})
                        );
                    } else {
                        println!(
                            "{owner:<24} {:>10} {:>6}  {}",
                            f.bytes,
                            age(f.modified),
                            f.path
                        );
                    }
                }
            }
            Ok(true)
        }
        WorkspaceCommand::Cat(a) => {
            let ws = open(&a.config)?;
            let rel = inside(&a.path)?;
            match ws
                .read(&a.principal, &rel)
                .map_err(|e| anyhow!(e.message))?
            {
                Some(text) => {
                    print!("{text}");
                    Ok(true)
                }
                None => bail!("{} has no file ./workspace/{rel}", a.principal),
            }
        }
        WorkspaceCommand::Rm(a) => {
            let ws = open(&a.config)?;
            let rel = match &a.path {
                Some(p) => inside(p)?,
                None => String::new(),
            };
            let n = ws
                .remove(&a.principal, &rel)
                .map_err(|e| anyhow!(e.message))?;
            println!(
                "removed {n} file{} of {}",
                if n == 1 { "" } else { "s" },
                a.principal
            );
            Ok(n > 0 || a.path.is_none())
        }
    }
}
