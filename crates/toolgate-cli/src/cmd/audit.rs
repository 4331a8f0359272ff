//! `toolgate audit verify`: checks the audit log's hash chain, so an edited, deleted or
//! inserted record is found (see `toolgate::audit::chain`).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::{Path, PathBuf};
use toolgate::audit::{chain, secret_path};
use toolgate::Config;

#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check every record's MAC and link; exit 1 if the chain is broken anywhere.
    Verify(VerifyArgs),
}

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// Log files, oldest first (a rotated log's files in order); default: policy.audit.path.
    pub files: Vec<PathBuf>,
    /// toolgate TOML configuration, for policy.audit.path and policy.audit.secret
    /// (default: ./toolgate.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The file holding the log's secret (default: policy.audit.secret, else
    /// <policy.audit.path>.secret, else <first FILE>.secret).
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// Accept a log whose first file begins at a rotation record without the earlier file
    /// it continues (knowingly checking from the rotation on).
    #[arg(long)]
    pub from_rotation: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(cmd: AuditCommand) -> Result<bool> {
    match cmd {
        AuditCommand::Verify(a) => verify(a),
    }
}

fn verify(a: VerifyArgs) -> Result<bool> {
    let config = match &a.config {
        Some(p) => Some(Config::from_toml_file(p)?),
        None => {
            let default = Path::new("toolgate.toml");
            default
                .exists()
                .then(|| Config::from_toml_file(default))
                .transpose()?
        }
    };
    let policy = config.as_ref().map(|c| &c.policy);
    let configured = policy.and_then(|p| p.audit_path.clone());
    let files = if a.files.is_empty() {
        match &configured {
            Some(p) => vec![p.clone()],
            None => bail!("name the audit log: toolgate audit verify FILE, or --config with [policy.audit] path"),
        }
    } else {
        a.files.clone()
    };
    let secret = match (&a.secret_file, policy.and_then(|p| p.audit_secret.clone())) {
        (Some(f), _) => read_secret(f)?,
        (None, Some(s)) => s.into_bytes(),
        (None, None) => read_secret(&secret_path(configured.as_ref().unwrap_or(&files[0])))?,
    };
    let mut texts = Vec::new();
    for f in &files {
        let t = std::fs::read_to_string(f)
            .with_context(|| format!("cannot read the audit log {}", f.display()))?;
        texts.push(t);
    }
    let locate = |(file, line): chain::At| format!("{}:{line}", files[file].display());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let v = chain::verify(&secret, &refs, a.from_rotation);
    if a.json {
        let out = json!({
            "intact": v.intact(),
            "records": v.records,
            "continuesFrom": v.continues_from,
            "torn": v.torn.iter().map(|&n| locate(n)).collect::<Vec<_>>(),
            "broken": v.broken.iter().map(|(at, why)| json!({"at": locate(*at), "why": why})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(v.intact());
    }
    for (n, why) in &v.broken {
        println!("{}: {why}", locate(*n));
    }
    for n in &v.torn {
        println!(
            "{}: not a whole record (a write that failed part-way, e.g. on a full disk)",
            locate(*n)
        );
    }
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    if v.intact() {
        let from = match &v.continues_from {
            Some(from) => format!(
                "; it continues a chain from an earlier file not checked here ({from}; --from-rotation)"
            ),
            None => String::new(),
        };
        println!(
            "{}: {} records, chain intact{from}",
            names.join(" + "),
            v.records
        );
    } else {
        println!(
            "{}: chain BROKEN at {} place(s); {} records checked",
            names.join(" + "),
            v.broken.len(),
            v.records
        );
    }
    Ok(v.intact())
}

fn read_secret(path: &Path) -> Result<Vec<u8>> {
    let s = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read the audit log's secret {} (pass --secret-file, or --config with policy.audit.secret)",
            path.display()
        )
    })?;
    Ok(s.trim().as_bytes().to_vec())
}
