//! `toolgate key new NAME`: a new API key, printed once, and the configuration to paste.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use toolgate::new_key;

#[derive(Subcommand)]
pub(crate) enum KeyCommand {
    /// Print a new random key (once: only its hash is kept) and the [policy.keys] table to paste.
    New(NewArgs),
}

#[derive(Args)]
pub(crate) struct NewArgs {
    /// The key's name, as the audit log will show it (letters, digits, '_', '-', '.').
    pub name: String,
}

pub(crate) fn run(cmd: KeyCommand) -> Result<()> {
    match cmd {
        KeyCommand::New(a) => new(&a.name),
    }
}

fn new(name: &str) -> Result<()> {
    if !toolgate::is_simple_name(name) {
        bail!("key name {name:?} is not allowed: use 1 to 48 letters, digits, '_', '-' or '.'");
    }
    let (key, hash) = new_key();
    println!("{key}");
    eprintln!(
        "\nThe line above is the key for {name:?}: give it to its user now; it is not stored anywhere.\n\
         Clients send it as \"Authorization: Bearer <key>\". Paste this into toolgate.toml and adjust the scopes and tier:\n"
    );
    eprintln!(
        "[policy.keys.{name}]\nhash = \"{hash}\"\nscopes = [\"*\"]        # server/tool globs it may call; \"!\" excludes\ntier = \"read\"          # read | write | destructive\n"
    );
    Ok(())
}
