//! The `[code]` section: code mode's switch and limits.
//!
//! ```toml
//! [code]
//! enabled = true              # list execute_code and describe_tools in guided mode
//! timeout_ms = 30000          # wall clock per run (a call's timeout_ms can only lower it)
//! grace_ms = 1000             # after the deadline, this long before the worker is killed
//! heap_mib = 64               # QuickJS heap
//! max_source_bytes = 65536
//! max_tool_calls = 50         # per run
//! max_in_flight = 8           # tool calls running at once, per run
//! output_bytes = 24576        # what one run shows the model
//! max_runs_per_key = 2        # runs at once per API key (per session without keys)
//! max_workers = 8             # runs at once over the whole gateway (each is a process)
//! pool_size = 2               # idle workers kept started (0: start one per run)
//! allow_destructive = ["files/delete_file"]   # may be called from a program
//! pii = true                 # tokenize e-mails, phones, IBANs, cards in what runs return
//! pii_fields = ["name"]       # and the values of these fields
//! skills_dir = "skills"       # skills/<name>/SKILL.md + skill.js (relative to this file)
//! profiles = ["analyst"]      # only sessions with these profiles get code mode ...
//! keys = ["ci"]               # ... or with these keys (both empty: every session)
//! ```
//!
//! `[code.workspace]` (see [`super::code_workspace`]) and `[code.flows.NAME]` (see
//! [`super::code_flows`]) are tables of their own.

use super::code_flows::{FlowRule, RawFlow};
use super::code_workspace::RawWorkspace;
pub(crate) use super::code_workspace::WorkspaceConfig;
use super::{invalid, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Code mode settings, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeConfig {
    /// Whether guided sessions get `execute_code` and `describe_tools`.
    pub enabled: bool,
    /// The worker command (program and arguments). `None`: the running binary's
    /// `sandbox-worker` subcommand, set by the CLI when it was built with code mode.
    pub worker: Option<Vec<String>>,
    pub timeout: Duration,
    /// Past the deadline, how long the worker gets to report before it is killed.
    pub grace: Duration,
    pub heap_bytes: usize,
    /// RLIMIT_AS of a worker: the heap plus room for the binary, stacks and the allocator.
    pub address_space_bytes: u64,
    pub max_source_bytes: usize,
    pub max_tool_calls: u32,
    pub max_in_flight: usize,
    pub output_bytes: usize,
    /// Runs at once per caller: per API key over every session (stdio and HTTP), or per
    /// session for a caller without a configured key; so one caller cannot take every worker.
    pub max_runs_per_key: usize,
    /// Runs at once over the whole gateway: each is a process with up to the address-space limit.
    pub max_workers: usize,
    /// Idle workers kept started and initialized, so a run does not wait for a process
    /// and a runtime; each still serves exactly one run. 0: start one per run.
    pub pool_size: usize,
    /// A tool result larger than this (as JSON) throws `limit` instead of entering the program.
    pub max_tool_result_bytes: usize,
    /// Destructive tools (`destructiveHint: true`) a program may call; others throw
    /// `approval_required`, so the model makes that call through execute.
    pub allow_destructive: Vec<String>,
    /// PII tokenization of what runs show the model, and restoring tokens passed back.
    pub pii: bool,
    /// Field names whose values are tokenized whole (case-insensitive).
    pub pii_fields: Vec<String>,
    /// Where operator-approved skills live (`<dir>/<name>/SKILL.md` and `skill.js`) and
    /// model-proposed drafts wait (`<dir>/.drafts/<name>/`); `None`: no skills.
    pub skills_dir: Option<PathBuf>,
    /// Code mode only for sessions with one of these profiles (`[policy.profiles]`) ...
    pub profiles: Vec<String>,
    /// ... or one of these keys (`[policy.keys]`); both empty: every session.
    pub keys: Vec<String>,
    /// Programs' files between runs, per principal (`fs` over `./workspace`).
    pub workspace: WorkspaceConfig,
    /// Where restored PII tokens may go (`[code.flows.NAME]`), checked at the gate.
    pub flows: Vec<FlowRule>,
}

impl CodeConfig {
    /// Whether a session with this profile and key gets code mode (`execute_code`,
    /// `describe_tools` and, with skills, `propose_skill`).
    pub fn allows(&self, profile: Option<&str>, key: &str) -> bool {
        self.enabled
            && ((self.profiles.is_empty() && self.keys.is_empty())
                || profile.is_some_and(|p| self.profiles.iter().any(|x| x == p))
                || self.keys.iter().any(|k| k == key))
    }
}

impl Default for CodeConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            worker: None,
            timeout: Duration::from_secs(30),
            grace: Duration::from_secs(1),
            heap_bytes: 64 << 20,
            address_space_bytes: (64 + ADDRESS_SPACE_OVERHEAD_MIB) << 20,
            max_source_bytes: 64 << 10,
            max_tool_calls: 50,
            max_in_flight: 8,
            output_bytes: 24 << 10,
            max_runs_per_key: 2,
            max_workers: 8,
            pool_size: 2,
            max_tool_result_bytes: 4 << 20,
            allow_destructive: Vec::new(),
            pii: false,
            pii_fields: Vec::new(),
            skills_dir: None,
            profiles: Vec::new(),
            keys: Vec::new(),
            workspace: WorkspaceConfig::default(),
            flows: Vec::new(),
        }
    }
}

/// Address space a worker needs besides the heap: the mapped binary and libraries, the
/// main stack and the allocator's arenas (measured: the worker runs in under 64 MiB).
pub(crate) const ADDRESS_SPACE_OVERHEAD_MIB: u64 = 192;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCode {
    #[serde(default)]
    pub enabled: bool,
    pub worker: Option<Vec<String>>,
    pub timeout_ms: Option<u64>,
    pub grace_ms: Option<u64>,
    pub heap_mib: Option<u64>,
    pub address_space_mib: Option<u64>,
    pub max_source_bytes: Option<usize>,
    pub max_tool_calls: Option<u32>,
    pub max_in_flight: Option<usize>,
    pub output_bytes: Option<usize>,
    pub max_runs_per_key: Option<usize>,
    /// The old name of `max_runs_per_key` (before keys existed): accepted with a warning.
    pub max_runs_per_session: Option<usize>,
    pub max_workers: Option<usize>,
    pub pool_size: Option<usize>,
    pub max_tool_result_bytes: Option<usize>,
    #[serde(default)]
    pub allow_destructive: Vec<String>,
    #[serde(default)]
    pub pii: bool,
    #[serde(default)]
    pub pii_fields: Vec<String>,
    pub skills_dir: Option<PathBuf>,
    #[serde(default)]
    pub profiles: Vec<String>,
    #[serde(default)]
    pub keys: Vec<String>,
    #[serde(default)]
    pub workspace: RawWorkspace,
    #[serde(default)]
    pub flows: BTreeMap<String, RawFlow>,
}

impl RawCode {
    /// `servers`: the configured upstreams (flow rules name them).
    pub(crate) fn validate(self, file: &Path, servers: &[&str]) -> Result<CodeConfig> {
        let d = CodeConfig::default();
        let within = |key: &str, v: u64, lo: u64, hi: u64| -> Result<u64> {
            if !(lo..=hi).contains(&v) {
                invalid!("{}: code.{key} = {v}: use {lo} to {hi}", file.display());
            }
            Ok(v)
        };
        let heap_mib = within("heap_mib", self.heap_mib.unwrap_or(64), 8, 4096)?;
        let address_space_mib = within(
            "address_space_mib",
            self.address_space_mib
                .unwrap_or(heap_mib + ADDRESS_SPACE_OVERHEAD_MIB),
            heap_mib + 64,
            1 << 20,
        )?;
        if let Some(w) = &self.worker {
            if w.first().is_none_or(|c| c.trim().is_empty()) {
                invalid!(
                    "{}: code.worker is empty: give the command and its arguments",
                    file.display()
                );
            }
        }
        for t in &self.allow_destructive {
            if !t.contains('/') {
                invalid!(
                    "{}: code.allow_destructive entry {t:?}: write \"server/tool\"",
                    file.display()
                );
            }
        }
        let runs_per_key = match (self.max_runs_per_key, self.max_runs_per_session) {
            (Some(_), Some(_)) => invalid!(
                "{}: code.max_runs_per_session is the old name of code.max_runs_per_key: keep only max_runs_per_key",
                file.display()
            ),
            (None, Some(n)) => {
                tracing::warn!(
                    "{}: code.max_runs_per_session is deprecated: rename it to code.max_runs_per_key (runs are now limited per API key)",
                    file.display()
                );
                n
            }
            (n, None) => n.unwrap_or(d.max_runs_per_key),
        };
        if self
            .skills_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            invalid!(
                "{}: code.skills_dir is empty: name a folder (relative to this file), or remove the key",
                file.display()
            );
        }
        let skills_dir = self.skills_dir.map(|d| super::relative_to_config(file, &d));
        let ms = |key: &str, v: Option<u64>, default: Duration, lo: u64, hi: u64| {
            v.map_or(Ok(default), |v| {
                within(key, v, lo, hi).map(Duration::from_millis)
            })
        };
        let max_tool_result_bytes = within(
            "max_tool_result_bytes",
            self.max_tool_result_bytes
                .unwrap_or(d.max_tool_result_bytes) as u64,
            1024,
            1 << 30,
        )? as usize;
        let workspace = self.workspace.validate(file, max_tool_result_bytes)?;
        let flows = super::code_flows::validate(self.flows, file, self.pii, servers)?;
        Ok(CodeConfig {
            enabled: self.enabled,
            worker: self.worker,
            timeout: ms("timeout_ms", self.timeout_ms, d.timeout, 50, 3_600_000)?,
            grace: ms("grace_ms", self.grace_ms, d.grace, 50, 60_000)?,
            heap_bytes: (heap_mib << 20) as usize,
            address_space_bytes: address_space_mib << 20,
            max_source_bytes: within(
                "max_source_bytes",
                self.max_source_bytes.unwrap_or(d.max_source_bytes) as u64,
                64,
                1 << 24,
            )? as usize,
            max_tool_calls: within(
                "max_tool_calls",
                u64::from(self.max_tool_calls.unwrap_or(d.max_tool_calls)),
                0,
                10_000,
            )? as u32,
            max_in_flight: within(
                "max_in_flight",
                self.max_in_flight.unwrap_or(d.max_in_flight) as u64,
                1,
                256,
            )? as usize,
            output_bytes: within(
                "output_bytes",
                self.output_bytes.unwrap_or(d.output_bytes) as u64,
                1024,
                1 << 24,
            )? as usize,
            max_runs_per_key: within("max_runs_per_key", runs_per_key as u64, 1, 1024)? as usize,
            max_workers: within(
                "max_workers",
                self.max_workers.unwrap_or(d.max_workers) as u64,
                1,
                1024,
            )? as usize,
            pool_size: within(
                "pool_size",
                self.pool_size.unwrap_or(d.pool_size) as u64,
                0,
                64,
            )? as usize,
            max_tool_result_bytes,
            allow_destructive: self.allow_destructive,
            pii: self.pii,
            pii_fields: self.pii_fields,
            skills_dir,
            profiles: self.profiles,
            keys: self.keys,
            workspace,
            flows,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;
    use std::time::Duration;

    fn parse(s: &str) -> crate::config::Result<Config> {
        Config::from_toml_str(s, Path::new("toolgate.toml"))
    }

    #[test]
    fn defaults_and_overrides() {
        let c = parse("").unwrap().code;
        assert!(!c.enabled, "code mode is opt-in");
        assert_eq!(c.timeout, Duration::from_secs(30));
        assert_eq!(c.heap_bytes, 64 << 20);
        assert_eq!(c.address_space_bytes, 256 << 20);
        assert_eq!((c.max_tool_calls, c.max_in_flight), (50, 8));
        assert_eq!((c.output_bytes, c.max_runs_per_key), (24 << 10, 2));
        assert_eq!((c.max_workers, c.pool_size), (8, 2));
        let c = parse("[code]\nenabled = true\ntimeout_ms = 500\nheap_mib = 128\nworker = [\"w\", \"x\"]\npii = true\n")
            .unwrap()
            .code;
        assert!(c.enabled && c.pii);
        assert_eq!(c.timeout, Duration::from_millis(500));
        assert_eq!(c.address_space_bytes, (128 + 192) << 20);
        assert_eq!(c.worker, Some(vec!["w".to_string(), "x".to_string()]));
        assert_eq!(c.skills_dir, None);
        let c = Config::from_toml_str(
            "[code]\nskills_dir = \"skills\"\n",
            Path::new("/etc/toolgate/toolgate.toml"),
        )
        .unwrap()
        .code;
        assert_eq!(
            c.skills_dir.as_deref(),
            Some(Path::new("/etc/toolgate/skills"))
        );
    }

    #[test]
    fn the_old_per_session_name_still_sets_the_per_key_limit() {
        let c = parse("[code]\nmax_runs_per_session = 3\npool_size = 0")
            .unwrap()
            .code;
        assert_eq!((c.max_runs_per_key, c.pool_size), (3, 0));
        let c = parse("[code]\nmax_runs_per_key = 4").unwrap().code;
        assert_eq!(c.max_runs_per_key, 4);
    }

    #[test]
    fn bad_values_name_the_key() {
        for (text, key) in [
            ("[code]\ntimeout_ms = 1", "code.timeout_ms"),
            ("[code]\nheap_mib = 1", "code.heap_mib"),
            (
                "[code]\nheap_mib = 64\naddress_space_mib = 100",
                "code.address_space_mib",
            ),
            ("[code]\nworker = []", "code.worker"),
            (
                "[code]\nallow_destructive = [\"x\"]",
                "code.allow_destructive",
            ),
            ("[code]\nmax_in_flight = 0", "code.max_in_flight"),
            ("[code]\nenable = true", "enable"),
            ("[code]\npool_size = 65", "code.pool_size"),
            ("[code]\nmax_runs_per_key = 0", "code.max_runs_per_key"),
            (
                "[code]\nmax_runs_per_key = 2\nmax_runs_per_session = 2",
                "keep only max_runs_per_key",
            ),
            ("[code]\nskills_dir = \"\"", "code.skills_dir"),
            (
                "[code]\nskills_dir = \"s\"\n[upstreams.skills]\ncommand = \"x\"",
                "upstreams.skills",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
