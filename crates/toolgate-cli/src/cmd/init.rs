//! `toolgate init`: writes a minimal, working `toolgate.toml`; with `--from CLIENT|FILE` its
//! upstreams are the MCP servers that client already has (`init_sources` knows where each
//! keeps them). The file written is read back as `serve` would read it, so what `check`
//! would refuse is said at once.

use super::init_sources::{self as sources, Source, CLIENTS};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toolgate::Config;
use toolgate::RawUpstream;

#[derive(Args, Debug)]
pub(crate) struct InitArgs {
    /// Import the MCP servers a client already has configured: claude, cursor, vscode,
    /// codex, or a file (mcpServers JSON, VS Code settings.json, Codex config.toml).
    #[arg(long, value_name = "CLIENT|FILE")]
    pub from: Option<String>,
    /// Replace the file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Where to write.
    #[arg(long, short, value_name = "FILE", default_value = "toolgate.toml")]
    pub output: PathBuf,
}

/// One upstream to write: its name, where it came from, its table as written there.
struct Entry {
    from: String,
    raw: RawUpstream,
}

pub(crate) fn run(args: InitArgs) -> Result<bool> {
    let out = &args.output;
    if out.exists() && !args.force {
        bail!(
            "{} exists: pass --force to replace it, or --output FILE to write elsewhere",
            out.display()
        );
    }
    let here = std::env::current_dir().context("cannot read the current folder")?;
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut warnings = Vec::new();
    let (entries, read) = match args.from.as_deref() {
        None => (demo_entries()?, Vec::new()),
        Some(from) => {
            let files = if Path::new(from).is_file() {
                vec![sources::named_file(Path::new(from))]
            } else if CLIENTS.contains(&from) {
                let home = home.as_deref().ok_or_else(|| {
                    anyhow!("--from {from}: HOME is not set, so the client's files cannot be found; pass the file itself")
                })?;
                sources::client_files(from, &here, home)?
            } else {
                bail!(
                    "--from {from:?}: not a file, nor a client: use {} or the path of a client's configuration file",
                    CLIENTS.join(", ")
                );
            };
            let home = home.clone().unwrap_or_else(|| here.clone());
            import(from, &files, &here, &home, &mut warnings)?
        }
    };
    let text = render(&entries, args.from.as_deref(), &read);
    std::fs::write(out, &text).with_context(|| format!("cannot write {}", out.display()))?;
    let names: Vec<&str> = entries.keys().map(String::as_str).collect();
    println!(
        "wrote {}: {} upstreams ({}){}",
        out.display(),
        names.len(),
        names.join(", "),
        if read.is_empty() {
            String::new()
        } else {
            format!(" from {}", read.join(", "))
        }
    );
    for w in &warnings {
        println!("  note: {w}");
    }
    // Read back as `serve` and `check` will: an unset variable or a name toolgate refuses
    // is said now, with the file already written for the user to fix.
    let ok = match Config::from_toml_file(out) {
        Ok(config) => {
            for w in &config.warnings {
                println!("  note: {w}");
            }
            true
        }
        Err(e) => {
            // Through anyhow, so `{:#}` also says what reading the file said.
            let e = anyhow::Error::from(e);
            println!("  to fix before serving: {e:#}");
            false
        }
    };
    let config = std::fs::canonicalize(out).unwrap_or_else(|_| out.clone());
    println!("next: toolgate check --config {}", config.display());
    println!("      toolgate serve --config {}", config.display());
    if args.from.as_deref() == Some("claude") {
        // alwaysLoad: Claude Code lists toolgate's tools in the first request instead of
        // deferring them behind its tool search (docs/clients.md).
        let entry = serde_json::json!({
            "type": "stdio",
            "command": "toolgate",
            "args": ["serve", "--stdio", "--config", config.display().to_string()],
            "alwaysLoad": true,
        });
        println!(
            "connect Claude Code to it (and remove the servers it now reaches through toolgate):\n  claude mcp add-json toolgate '{entry}'"
        );
    }
    Ok(ok)
}

/// The servers of `files` (the first definition of a name wins, as in the clients), their
/// references made toolgate's. Returns the entries and the files that held servers.
fn import(
    from: &str,
    files: &[Source],
    here: &Path,
    home: &Path,
    warnings: &mut Vec<String>,
) -> Result<(BTreeMap<String, Entry>, Vec<String>)> {
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    let mut read = Vec::new();
    let mut looked = Vec::new();
    for source in files {
        looked.push(source.path.display().to_string());
        if !source.path.is_file() {
            continue;
        }
        let Some(imported) = sources::read(source, here)? else {
            continue;
        };
        read.push(source.path.display().to_string());
        warnings.extend(imported.warnings);
        for (key, name, raw) in imported.servers {
            let from = format!("{}: {key}", source.path.display());
            let name = toolgate_name(&name, &from, warnings);
            if let Some(first) = entries.get(&name) {
                warnings.push(format!(
                    "{from} skipped: {name:?} is already taken from {}",
                    first.from
                ));
                continue;
            }
            let raw = translate(raw, here, home, &from, warnings);
            entries.insert(name, Entry { from, raw });
        }
    }
    if entries.is_empty() {
        bail!(
            "--from {from}: no MCP servers found; looked in {}",
            looked.join(", ")
        );
    }
    Ok((entries, read))
}

/// A client's server name as an upstream name (letters, digits, `_`, `-`, `.`; at most 48).
fn toolgate_name(name: &str, from: &str, warnings: &mut Vec<String>) -> String {
    if toolgate::is_simple_name(name) {
        return name.to_string();
    }
    let mut fixed: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    if fixed.trim_matches('-').is_empty() {
        fixed = "server".into();
    }
    warnings.push(format!(
        "{from}: named {fixed:?} here (toolgate names are letters, digits, '_', '-' or '.')"
    ));
    fixed
}

/// Every value with the client's `${...}` references made toolgate's.
fn translate(
    mut raw: RawUpstream,
    here: &Path,
    home: &Path,
    from: &str,
    warnings: &mut Vec<String>,
) -> RawUpstream {
    let mut warn = |w: String| warnings.push(format!("{from}: {w}"));
    let mut t = |v: &str| sources::translate_refs(v, here, home, &mut warn);
    raw.command = raw.command.as_deref().map(&mut t);
    raw.args = raw.args.iter().map(|a| t(a)).collect();
    raw.env = raw.env.iter().map(|(k, v)| (k.clone(), t(v))).collect();
    raw.cwd = raw
        .cwd
        .as_ref()
        .map(|c| PathBuf::from(t(&c.to_string_lossy())));
    raw.url = raw.url.as_deref().map(&mut t);
    raw.headers = raw.headers.iter().map(|(k, v)| (k.clone(), t(v))).collect();
    raw
}

/// With no `--from`: two servers of the built-in demo (this binary's `fixture`), so the
/// file works as written; the comment shows a real server's table.
fn demo_entries() -> Result<BTreeMap<String, Entry>> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let mut entries = BTreeMap::new();
    for server in ["tickets", "time"] {
        let raw = RawUpstream {
            command: Some(exe.display().to_string()),
            args: super::common::demo_args(server),
            ..Default::default()
        };
        let from = "the built-in demo".to_string();
        entries.insert(server.to_string(), Entry { from, raw });
    }
    Ok(entries)
}

/// The file: a header saying what made it, the gateway's two most asked-about keys, and
/// one `[upstreams.NAME]` table per server.
fn render(entries: &BTreeMap<String, Entry>, from: Option<&str>, read: &[String]) -> String {
    let mut s = String::new();
    match from {
        None => s.push_str(
            "# toolgate.toml, written by `toolgate init`: two servers of toolgate's built-in demo.\n\
             # Replace them with your MCP servers, e.g.\n\
             #   [upstreams.git]\n\
             #   command = \"uvx\"\n\
             #   args = [\"mcp-server-git\"]\n",
        ),
        Some(f) => s.push_str(&format!(
            "# toolgate.toml, written by `toolgate init --from {f}` from {}.\n",
            read.join(", ")
        )),
    }
    s.push_str(
        "# Check it: toolgate check. Every key: docs/configuration.md.\n\n\
         [gateway]\n\
         listen = \"127.0.0.1:8377\"\n\
         mode = \"guided\"   # route, execute, continue; \"direct\" lists every tool\n",
    );
    for (name, Entry { from, raw }) in entries {
        s.push_str(&format!("\n# from {from}\n[upstreams.{}]\n", key(name)));
        let mut line = |k: &str, v: toml::Value| s.push_str(&format!("{k} = {v}\n"));
        if let Some(c) = &raw.command {
            line("command", c.clone().into());
        }
        if !raw.args.is_empty() {
            line("args", raw.args.clone().into());
        }
        if let Some(c) = &raw.cwd {
            line("cwd", c.display().to_string().into());
        }
        if let Some(u) = &raw.url {
            line("url", u.clone().into());
        }
        if raw.enabled == Some(false) {
            line("enabled", false.into());
        }
        for (table, map) in [("env", &raw.env), ("headers", &raw.headers)] {
            if !map.is_empty() {
                let inline: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{} = {}", key(k), toml::Value::from(v.clone())))
                    .collect();
                line_raw(&mut s, table, &format!("{{ {} }}", inline.join(", ")));
            }
        }
    }
    s
}

fn line_raw(s: &mut String, k: &str, v: &str) {
    s.push_str(&format!("{k} = {v}\n"));
}

/// A TOML key: bare when it can be, else quoted.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        k.to_string()
    } else {
        toml::Value::from(k.to_string()).to_string()
    }
}
