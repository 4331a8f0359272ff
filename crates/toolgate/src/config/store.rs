//! `[store]`: where state that outlives one request is kept (cursors' pages, operations,
//! route's selections).
//!
//! ```toml
//! [store]
//! backend = "embedded"           # "memory" | "embedded"; absent: embedded for `serve`
//!                                #   over HTTP, memory for `serve --stdio`
//! path = "state.redb"            # embedded: relative to this file; absent:
//!                                #   $XDG_STATE_HOME/toolgate/state.redb
//! key_env = "TOOLGATE_STORE_KEY" # the variable holding the 64-hex-digit key; unset:
//!                                #   a key file beside the database (<path>.key, 0600)
//! ```

use anyhow::{bail, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Which store the gateway keeps its handles in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// The process's memory only: nothing on disk, nothing survives a restart.
    Memory,
    /// One redb file: cursors and finished operations survive a restart.
    Embedded,
}

/// `[store]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// `None`: decided by how the gateway serves ([`StoreConfig::backend_for`]).
    pub backend: Option<StoreBackend>,
    /// The embedded database; `None`: [`default_path`].
    pub path: Option<PathBuf>,
    /// The environment variable that holds the key sealing stored values.
    pub key_env: String,
}

pub const DEFAULT_KEY_ENV: &str = "TOOLGATE_STORE_KEY";

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: None,
            path: None,
            key_env: DEFAULT_KEY_ENV.into(),
        }
    }
}

impl StoreConfig {
    /// The backend in force: as configured, else memory for a stdio session (it lives as
    /// long as its one client, and clients start several at once, which one embedded file
    /// cannot serve) and embedded for an HTTP gateway.
    pub fn backend_for(&self, stdio: bool) -> StoreBackend {
        self.backend.unwrap_or(if stdio {
            StoreBackend::Memory
        } else {
            StoreBackend::Embedded
        })
    }

    /// The embedded database's file: as configured, else [`default_path`].
    pub fn embedded_path(&self) -> Result<PathBuf> {
        match &self.path {
            Some(p) => Ok(p.clone()),
            None => default_path(),
        }
    }
}

/// `$XDG_STATE_HOME/toolgate/state.redb`, else `~/.local/state/toolgate/state.redb`.
pub fn default_path() -> Result<PathBuf> {
    let state = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/state"),
            None => bail!(
                "no state folder for the store: neither XDG_STATE_HOME nor HOME is set; set [store] path, or backend = \"memory\""
            ),
        },
    };
    Ok(state.join("toolgate").join("state.redb"))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub backend: Option<String>,
    pub path: Option<PathBuf>,
    pub key_env: Option<String>,
}

impl RawStore {
    pub fn validate(self, file: &Path) -> Result<StoreConfig> {
        let f = file.display();
        let backend = match self.backend.as_deref() {
            None => None,
            Some("memory") => Some(StoreBackend::Memory),
            Some("embedded") => Some(StoreBackend::Embedded),
            Some("redis") => bail!(
                "{f}: store.backend = \"redis\" is not available in this build yet: use \"embedded\" (one gateway, survives restarts) or \"memory\""
            ),
            Some(other) => bail!(
                "{f}: store.backend = {other:?}: use \"memory\" or \"embedded\""
            ),
        };
        if self.path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            bail!("{f}: store.path is empty: name the database file (relative to this file), or remove the key for the default");
        }
        if self.path.is_some() && backend == Some(StoreBackend::Memory) {
            bail!("{f}: store.path is set but store.backend = \"memory\" keeps nothing on disk: remove path, or use backend = \"embedded\"");
        }
        let key_env = self.key_env.unwrap_or_else(|| DEFAULT_KEY_ENV.into());
        if key_env.is_empty()
            || !key_env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            bail!("{f}: store.key_env = {key_env:?}: name an environment variable (letters, digits, _), e.g. \"TOOLGATE_STORE_KEY\"");
        }
        Ok(StoreConfig {
            backend,
            path: self.path.map(|p| super::relative_to_config(file, &p)),
            key_env,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StoreConfig> {
        let raw: RawStore = toml::from_str(text)?;
        raw.validate(Path::new("/etc/tg/toolgate.toml"))
    }

    #[test]
    fn the_default_is_memory_for_stdio_and_embedded_for_http() {
        let c = parse("").unwrap();
        assert_eq!(c.backend_for(true), StoreBackend::Memory);
        assert_eq!(c.backend_for(false), StoreBackend::Embedded);
        assert_eq!(c.key_env, "TOOLGATE_STORE_KEY");
    }

    #[test]
    fn a_relative_path_is_beside_the_configuration() {
        let c = parse("backend = \"embedded\"\npath = \"state/s.redb\"").unwrap();
        assert_eq!(c.path.unwrap(), PathBuf::from("/etc/tg/state/s.redb"));
    }

    #[test]
    fn mistakes_name_the_key_and_the_fix() {
        for (text, says) in [
            ("backend = \"disk\"", "use \"memory\" or \"embedded\""),
            ("backend = \"redis\"", "not available in this build"),
            ("path = \"\"", "store.path is empty"),
            (
                "backend = \"memory\"\npath = \"x\"",
                "keeps nothing on disk",
            ),
            ("key_env = \"A-B\"", "store.key_env"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        assert!(parse("url = \"redis://x\"").is_err());
    }
}
