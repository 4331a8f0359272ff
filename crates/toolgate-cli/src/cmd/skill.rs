//! `toolgate skill list|show|approve|reject`: the operator's side of skills. Models
//! propose drafts (`propose_skill`); nothing is served until approved here. A running
//! gateway picks up an approved skill by itself (it re-reads the folder when it changes).

use super::common::ConfigArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::PathBuf;
use toolgate::skill::drafts;

#[derive(Subcommand)]
pub(crate) enum SkillCommand {
    /// Approved skills and drafts waiting for review, with any errors.
    List(ListArgs),
    /// A skill's or draft's SKILL.md and skill.js.
    Show(NameArgs),
    /// Move a draft beside the served skills (never over an approved one).
    Approve(NameArgs),
    /// Delete a draft.
    Reject(NameArgs),
}

#[derive(Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// One JSON object per skill or draft, one per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub(crate) struct NameArgs {
    /// The skill's name (its folder).
    pub name: String,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// Exits non-zero from `list` when a skill or draft does not load.
pub(crate) fn run(cmd: SkillCommand) -> Result<bool> {
    match cmd {
        SkillCommand::List(a) => list(&skills_dir(&a.config)?, a.json),
        SkillCommand::Show(a) => show(&skills_dir(&a.config)?, &a.name).map(|()| true),
        SkillCommand::Approve(a) => {
            let dir = skills_dir(&a.config)?;
            let to = drafts::approve(&dir, &a.name, max_source(&a.config)?)
                .map_err(|e| anyhow!("{e}"))?;
            println!("approved {}: now served from {}", a.name, to.display());
            Ok(true)
        }
        SkillCommand::Reject(a) => {
            drafts::reject(&skills_dir(&a.config)?, &a.name).map_err(|e| anyhow!("{e}"))?;
            println!("rejected {}: the draft is deleted", a.name);
            Ok(true)
        }
    }
}

fn skills_dir(config: &ConfigArgs) -> Result<PathBuf> {
    let c = config.load()?;
    match c.code.skills_dir {
        Some(d) => Ok(d),
        None => bail!(
            "{} has no skills folder: set skills_dir under [code] (a folder relative to the file)",
            c.source_name()
        ),
    }
}

fn max_source(config: &ConfigArgs) -> Result<usize> {
    Ok(config.load()?.code.max_source_bytes)
}

fn list(dir: &std::path::Path, as_json: bool) -> Result<bool> {
    let approved = drafts::list_approved(dir);
    let waiting = drafts::list_drafts(dir);
    let ok = approved.errors.is_empty() && waiting.iter().all(|(_, r)| r.is_ok());
    if as_json {
        for s in approved.skills.values() {
            println!(
                "{}",
                json!({"name": s.name, "status": "approved", "servers": s.servers, "description": s.description})
            );
        }
        for e in &approved.errors {
            println!("{}", json!({"status": "error", "error": e}));
        }
        for (name, r) in &waiting {
            match r {
                Ok(s) => println!(
                    "{}",
                    json!({"name": name, "status": "draft", "servers": s.servers, "description": s.description})
                ),
                Err(e) => println!(
                    "{}",
                    json!({"name": name, "status": "draft", "error": e.to_string()})
                ),
            }
        }
        return Ok(ok);
    }
    println!("skills in {}:", dir.display());
    println!(
        "{:<24} {:<9} {:<20} description",
        "NAME", "STATUS", "SERVERS"
    );
    let row = |name: &str, status: &str, servers: &[String], desc: &str| {
        println!(
            "{name:<24} {status:<9} {:<20} {}",
            servers.join(","),
            desc.lines().next().unwrap_or("")
        )
    };
    for s in approved.skills.values() {
        row(&s.name, "approved", &s.servers, &s.description);
    }
    for (name, r) in &waiting {
        match r {
            Ok(s) => row(name, "draft", &s.servers, &s.description),
            Err(e) => row(name, "draft", &[], &format!("does not load: {e}")),
        }
    }
    for e in &approved.errors {
        println!("error: {e}");
    }
    Ok(ok)
}

fn show(dir: &std::path::Path, name: &str) -> Result<()> {
    if !toolgate::skill::is_skill_name(name) {
        bail!("{}", toolgate::skill::name_rule(name));
    }
    let approved = dir.join(name);
    let draft = drafts::drafts_dir(dir).join(name);
    let (folder, status) = if approved.is_dir() {
        (approved, "approved")
    } else if draft.is_dir() {
        (draft, "draft")
    } else {
        bail!("no skill or draft named {name:?} in {}", dir.display());
    };
    println!("# {name} ({status}, {})", folder.display());
    for file in [toolgate::skill::SKILL_MD, toolgate::skill::SKILL_JS] {
        let text = std::fs::read_to_string(folder.join(file))
            .unwrap_or_else(|e| format!("(cannot read: {e})"));
        println!("\n== {file} ==\n{}", text.trim_end());
    }
    Ok(())
}
