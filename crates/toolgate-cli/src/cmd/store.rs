//! `toolgate store check|reset`: the operator's tools for the embedded state store. `check`
//! opens the file as the gateway would, checks every page and whether each value opens
//! with the key; `reset` moves a damaged file (and a copy of its key file) aside, never
//! deleting anything, so the next start (or the running gateway, which reopens by
//! itself) begins a new store.

use super::common::ConfigArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use toolgate::StoreBackend;
use toolgate_core::store::{key_file, Sealer};

#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Check the embedded store's file: every page, and every value against the key.
    Check(StoreArgs),
    /// Move the embedded store's file aside (`<file>.damaged-<time>`), to start a new one.
    Reset(StoreArgs),
}

#[derive(Args)]
pub(crate) struct StoreArgs {
    /// The store file (default: the one `[store]` of the configuration names).
    #[arg(long, value_name = "FILE")]
    pub path: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// Returns whether everything was fine (exit 0), else 1.
pub(crate) fn run(cmd: StoreCommand) -> Result<bool> {
    match cmd {
        StoreCommand::Check(a) => check(a),
        StoreCommand::Reset(a) => reset(a),
    }
}

/// The file and the variable of its key, from `--path` or the configuration.
fn store_file(args: &StoreArgs) -> Result<(PathBuf, String)> {
    let config = args.config.load_quiet()?;
    let key_env = config.store.key_env.clone();
    if let Some(p) = &args.path {
        return Ok((p.clone(), key_env));
    }
    if config.store.backend_for(false) != StoreBackend::Embedded {
        bail!(
            "{} has no embedded store ([store] backend is not \"embedded\"): `toolgate store` checks the embedded file; a Redis store is checked with redis-cli",
            config.source_name()
        );
    }
    let path = config
        .store
        .embedded_path(config.source.as_deref(), config.gateway.listen)?;
    Ok((path, key_env))
}

fn check(args: StoreArgs) -> Result<bool> {
    let (path, key_env) = store_file(&args)?;
    let key = key_file(&path);
    // The typed errors' messages already say what their sources said: taken as text, so
    // `{e:#}` does not repeat them.
    let sealer = match Sealer::from_env(&key_env).map_err(|e| anyhow!("{e}"))? {
        Some(s) => Some(s),
        None if key.exists() => {
            if let Some(w) = toolgate_core::store::key_file_warning(&key) {
                println!("warning: {w}");
            }
            Some(Sealer::from_key_file(&key).map_err(|e| anyhow!("{e}"))?)
        }
        None => None,
    };
    let report = toolgate_core::store::check_file(&path, sealer.as_ref());
    let Some(bytes) = report.bytes else {
        println!(
            "{}: no store yet (a gateway makes it on its first start)",
            path.display()
        );
        return Ok(true);
    };
    for note in &report.notes {
        println!("note: {note}");
    }
    if let Some(fault) = &report.fault {
        println!("{}: {bytes} bytes: {fault}", path.display());
        return Ok(false);
    }
    println!("{}: {bytes} bytes, every page whole", path.display());
    if sealer.is_none() {
        println!(
            "no key ({key_env} unset and no {}): the values were not tried; a gateway would refuse this store",
            key.display()
        );
    }
    for (kind, live, bad) in &report.kinds {
        if *bad > 0 {
            println!("  {kind}: {live} values, {bad} do not open with this key");
        } else {
            println!("  {kind}: {live} values");
        }
    }
    if !report.ok() {
        println!("some values do not open with this key: is it the key they were written with ({key_env}, or {})?", key.display());
    }
    Ok(report.ok() && sealer.is_some())
}

fn reset(args: StoreArgs) -> Result<bool> {
    let (path, _) = store_file(&args)?;
    let key = key_file(&path);
    let aside = toolgate_core::store::move_aside(&path, Some(&key)).map_err(|e| anyhow!("{e}"))?;
    println!(
        "moved {} to {} (nothing deleted; its key file copied beside it); the next start, or the running gateway by itself, begins a new store with the same key",
        path.display(),
        aside.display()
    );
    Ok(true)
}
