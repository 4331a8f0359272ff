//! `[code.workspace]`: where programs' workspace files are kept, and how many and how
//! large they may be, per principal.
//!
//! ```toml
//! [code.workspace]
//! dir = "workspace"            # keep files here (relative to this file); absent: in memory
//! max_files = 1000             # files per principal
//! max_bytes = 67108864         # bytes per principal (64 MiB)
//! max_file_bytes = 1048576     # bytes per file (1 MiB; at most code.max_tool_result_bytes)
//! expiry_hours = 168           # a file not written for this long is forgotten (7 days)
//! ```

use super::{invalid, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The workspace's store and quotas, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceConfig {
    /// A directory to keep files in (they survive restarts; `toolgate workspace` reads
    /// them). `None`: in the gateway's memory.
    pub dir: Option<PathBuf>,
    pub max_files: usize,
    pub max_bytes: u64,
    /// Also bounded by what one program call may carry (`code.max_tool_result_bytes`).
    pub max_file_bytes: usize,
    /// Counted from a file's last write.
    pub expiry: Duration,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        Self {
            dir: None,
            max_files: 1000,
            max_bytes: 64 << 20,
            max_file_bytes: 1 << 20,
            expiry: Duration::from_secs(168 * 3600),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkspace {
    pub dir: Option<PathBuf>,
    pub max_files: Option<u64>,
    pub max_bytes: Option<u64>,
    pub max_file_bytes: Option<u64>,
    pub expiry_hours: Option<u64>,
}

impl RawWorkspace {
    pub(crate) fn validate(
        self,
        file: &Path,
        max_tool_result_bytes: usize,
    ) -> Result<WorkspaceConfig> {
        let d = WorkspaceConfig::default();
        let within = |key: &str, v: Option<u64>, default: u64, lo: u64, hi: u64| -> Result<u64> {
            let v = v.unwrap_or(default);
            if !(lo..=hi).contains(&v) {
                invalid!(
                    "{}: code.workspace.{key} = {v}: use {lo} to {hi}",
                    file.display()
                );
            }
            Ok(v)
        };
        if self.dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
            invalid!(
                "{}: code.workspace.dir is empty: name a folder (relative to this file), or remove the key to keep files in memory",
                file.display()
            );
        }
        let max_file_bytes = within(
            "max_file_bytes",
            self.max_file_bytes,
            (d.max_file_bytes as u64).min(max_tool_result_bytes as u64),
            1,
            max_tool_result_bytes as u64,
        )?;
        let max_bytes = within("max_bytes", self.max_bytes, d.max_bytes, 1, 1 << 40)?;
        if max_file_bytes > max_bytes {
            invalid!(
                "{}: code.workspace.max_file_bytes ({max_file_bytes}) is larger than code.workspace.max_bytes ({max_bytes}): lower it or raise max_bytes",
                file.display()
            );
        }
        Ok(WorkspaceConfig {
            dir: self.dir.map(|d| super::relative_to_config(file, &d)),
            max_files: within(
                "max_files",
                self.max_files,
                d.max_files as u64,
                1,
                1_000_000,
            )? as usize,
            max_bytes,
            max_file_bytes: max_file_bytes as usize,
            expiry: Duration::from_secs(
                within("expiry_hours", self.expiry_hours, 168, 1, 24 * 365 * 10)? * 3600,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn parse(s: &str) -> crate::config::Result<Config> {
        Config::from_toml_str(s, Path::new("/etc/toolgate/toolgate.toml"))
    }

    #[test]
    fn workspace_defaults_and_overrides() {
        let w = parse("").unwrap().code.workspace;
        assert_eq!(
            (w.dir, w.max_files, w.max_file_bytes),
            (None, 1000, 1 << 20)
        );
        let w = parse("[code.workspace]\ndir = \"ws\"\nmax_files = 3\nexpiry_hours = 2\n")
            .unwrap()
            .code
            .workspace;
        assert_eq!(w.dir.as_deref(), Some(Path::new("/etc/toolgate/ws")));
        assert_eq!((w.max_files, w.expiry.as_secs()), (3, 7200));
    }

    #[test]
    fn bad_workspace_values_name_the_key() {
        for (text, key) in [
            (
                "[code.workspace]\nmax_files = 0",
                "code.workspace.max_files",
            ),
            ("[code.workspace]\ndir = \"\"", "code.workspace.dir"),
            (
                "[code.workspace]\nexpiry_hours = 0",
                "code.workspace.expiry_hours",
            ),
            (
                "[code.workspace]\nmax_file_bytes = 99999999",
                "code.workspace.max_file_bytes",
            ),
            (
                "[code.workspace]\nmax_bytes = 10\nmax_file_bytes = 20",
                "max_file_bytes (20)",
            ),
            ("[code.workspace]\nquota = 1", "quota"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
