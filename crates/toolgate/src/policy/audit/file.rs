//! The audit log's file: opened for appending, the end of the chain already in it, the
//! secret its MACs are keyed with, and the records' timestamps.

use super::chain;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the secret is kept when the configuration names none.
pub fn secret_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".secret");
    PathBuf::from(name)
}

/// Reads the secret at `path`, making a random one (mode 0600) if there is none.
pub(super) fn secret_file(path: &Path) -> Result<Vec<u8>> {
    match std::fs::read_to_string(path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().as_bytes().to_vec()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot read the audit log's secret {}", path.display()))
        }
    }
    let secret = toolgate_core::ids::random_hex(32);
    let mut f = OpenOptions::new();
    f.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut f, 0o600);
    f.open(path)
        .and_then(|mut file| file.write_all(secret.as_bytes()))
        .with_context(|| {
            format!(
                "cannot write the audit log's secret {} (or set policy.audit.secret)",
                path.display()
            )
        })?;
    Ok(secret.into_bytes())
}

pub(super) fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .with_context(|| {
            format!(
                "cannot open the audit log {} (policy.audit.path)",
                path.display()
            )
        })
}

/// The chain's end in an existing file (`seq`, MAC), read from its last 64 KiB, and whether
/// its last line is torn (no newline at the end).
pub(super) fn chain_end(file: &mut File) -> (u64, String, bool) {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(64 * 1024);
    let mut tail = String::new();
    let read = file
        .seek(SeekFrom::Start(from))
        .and_then(|_| (&mut *file).take(64 * 1024).read_to_string(&mut tail));
    if read.is_err() {
        tail.clear();
    }
    let torn = !tail.is_empty() && !tail.ends_with('\n');
    match chain::tail(&tail) {
        Some((mac, seq)) => (seq, mac, torn),
        None => (0, chain::GENESIS.to_string(), torn),
    }
}

/// The current UTC time as RFC 3339 with milliseconds.
pub(crate) fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d)
}

pub(super) fn rfc3339(d: Duration) -> String {
    let t =
        chrono::DateTime::from_timestamp(d.as_secs() as i64, d.subsec_nanos()).unwrap_or_default();
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
