//! `[store]`: where state that outlives one request is kept (cursors' pages, operations,
//! route's selections).
//!
//! ```toml
//! [store]
//! backend = "embedded"           # "memory" | "embedded" | "redis"; absent: embedded
//!                                #   for `serve` over HTTP, memory for `serve --stdio`
//! path = "state.redb"            # embedded: relative to this file; absent:
//!                                #   $XDG_STATE_HOME/toolgate/<config>/state.redb,
//!                                #   one folder per configuration (`state_folder`)
//! url = "redis://127.0.0.1:6379" # redis (or Valkey): the server every replica shares
//! key_env = "TOOLGATE_STORE_KEY" # the variable holding the 64-hex-digit key; unset:
//!                                #   embedded makes a key file beside the database
//!                                #   (<path>.key, 0600); redis refuses to start
//! ```

use super::{invalid, Result};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Which store the gateway keeps its handles in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// The process's memory only: nothing on disk, nothing survives a restart.
    Memory,
    /// One redb file: cursors and finished operations survive a restart.
    Embedded,
    /// A Redis or Valkey server shared by several replicas (feature `redis`).
    Redis,
}

/// `[store]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// `None`: decided by how the gateway serves ([`StoreConfig::backend_for`]).
    pub backend: Option<StoreBackend>,
    /// The embedded database; `None`: [`default_path`] of the configuration.
    pub path: Option<PathBuf>,
    /// The Redis server (`backend = "redis"` only, where it is required).
    pub url: Option<String>,
    /// The environment variable that holds the key sealing stored values.
    pub key_env: String,
}

pub(crate) const DEFAULT_KEY_ENV: &str = "TOOLGATE_STORE_KEY";

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: None,
            path: None,
            url: None,
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

    /// The embedded database's file: as configured, else [`default_path`] for the
    /// configuration read from `source` (`None`: the built-in demo) serving on `listen`.
    pub fn embedded_path(&self, source: Option<&Path>, listen: SocketAddr) -> Result<PathBuf> {
        match &self.path {
            Some(p) => Ok(p.clone()),
            None => default_path(source, listen),
        }
    }
}

/// `$XDG_STATE_HOME/toolgate/<state_folder>/state.redb`, else
/// `~/.local/state/toolgate/<state_folder>/state.redb`: each configuration its own
/// database, so gateways of different configurations run side by side (one embedded
/// store serves one process).
pub(crate) fn default_path(source: Option<&Path>, listen: SocketAddr) -> Result<PathBuf> {
    Ok(state_home()?
        .join("toolgate")
        .join(state_folder(source, listen))
        .join("state.redb"))
}

/// The folder of a configuration's default store: the file's name and 8 hex digits of
/// SHA-256 of its canonical path (`toolgate-3f2a9c1e`: readable, and the same from any
/// working directory); with no file (the built-in demo), `demo-` and the listen address
/// (`demo-127.0.0.1-8377`).
pub(crate) fn state_folder(source: Option<&Path>, listen: SocketAddr) -> String {
    let Some(file) = source else {
        let ip = listen.ip().to_string().replace(':', "_");
        return format!("demo-{ip}-{}", listen.port());
    };
    let full = std::fs::canonicalize(file)
        .or_else(|_| std::path::absolute(file))
        .unwrap_or_else(|_| file.to_path_buf());
    let digest = Sha256::digest(full.as_os_str().as_encoded_bytes());
    let stem: String = (file.file_stem())
        .map(|s| s.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!("{stem}-{}", &hex::encode(digest)[..8])
}

/// `$XDG_STATE_HOME`, else `~/.local/state`.
fn state_home() -> Result<PathBuf> {
    Ok(match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/state"),
            None => invalid!(
                "no state folder for the store: neither XDG_STATE_HOME nor HOME is set; set [store] path, or backend = \"memory\""
            ),
        },
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStore {
    pub backend: Option<String>,
    pub path: Option<PathBuf>,
    pub url: Option<String>,
    pub key_env: Option<String>,
}

impl RawStore {
    pub(crate) fn validate(self, file: &Path) -> Result<StoreConfig> {
        let f = file.display();
        let backend = match self.backend.as_deref() {
            None => None,
            Some("memory") => Some(StoreBackend::Memory),
            Some("embedded") => Some(StoreBackend::Embedded),
            Some("redis") if cfg!(feature = "redis") => Some(StoreBackend::Redis),
            Some("redis") => invalid!(
                "{f}: store.backend = \"redis\": this toolgate was built without the `redis` feature; rebuild with it, or use \"embedded\""
            ),
            Some(other) => invalid!(
                "{f}: store.backend = {other:?}: use \"memory\", \"embedded\" or \"redis\""
            ),
        };
        match (&self.url, backend) {
            (None, Some(StoreBackend::Redis)) => invalid!(
                "{f}: store.backend = \"redis\" needs store.url, e.g. url = \"redis://127.0.0.1:6379\""
            ),
            (Some(_), b) if b != Some(StoreBackend::Redis) => invalid!(
                "{f}: store.url is only for backend = \"redis\": set that, or remove url"
            ),
            (Some(u), _) if !(u.starts_with("redis://") || u.starts_with("valkey://") || u.starts_with("redis+unix://")) => invalid!(
                "{f}: store.url = {u:?}: write redis://HOST:PORT[/DB] (TLS is not built in)"
            ),
            _ => {}
        }
        if self.path.is_some() && backend == Some(StoreBackend::Redis) {
            invalid!("{f}: store.path is for backend = \"embedded\"; a redis store lives at store.url: remove path");
        }
        if self.path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            invalid!("{f}: store.path is empty: name the database file (relative to this file), or remove the key for the default");
        }
        if self.path.is_some() && backend == Some(StoreBackend::Memory) {
            invalid!("{f}: store.path is set but store.backend = \"memory\" keeps nothing on disk: remove path, or use backend = \"embedded\"");
        }
        let key_env = self.key_env.unwrap_or_else(|| DEFAULT_KEY_ENV.into());
        if key_env.is_empty()
            || !key_env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            invalid!("{f}: store.key_env = {key_env:?}: name an environment variable (letters, digits, _), e.g. \"TOOLGATE_STORE_KEY\"");
        }
        Ok(StoreConfig {
            backend,
            path: self.path.map(|p| super::relative_to_config(file, &p)),
            url: self.url,
            key_env,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StoreConfig> {
        let raw: RawStore = toml::from_str(text)
            .map_err(|e| crate::config::ConfigError::from_reader(e.to_string()))?;
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
    fn each_configuration_has_its_own_default_folder() {
        let listen: SocketAddr = "127.0.0.1:8377".parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            dir.path().join("toolgate.toml"),
            dir.path().join("other.toml"),
        );
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let a2 = sub.join("toolgate.toml");
        for f in [&a, &b, &a2] {
            std::fs::write(f, "").unwrap();
        }
        let folder = |f: &Path| state_folder(Some(f), listen);
        assert!(folder(&a).starts_with("toolgate-") && folder(&a).len() == "toolgate-".len() + 8);
        assert!(folder(&b).starts_with("other-"));
        assert_ne!(folder(&a), folder(&a2), "same name, another folder");
        // The same file by another spelling is the same configuration.
        assert_eq!(folder(&a), folder(&sub.join("../toolgate.toml")));
        // Where a configured path exists, it wins; with no file, the listen address names it.
        assert_eq!(state_folder(None, listen), "demo-127.0.0.1-8377");
        let v6: SocketAddr = "[::1]:9000".parse().unwrap();
        assert_eq!(state_folder(None, v6), "demo-__1-9000");
        let c = parse("path = \"s.redb\"").unwrap();
        assert_eq!(
            c.embedded_path(Some(&a), listen).unwrap(),
            PathBuf::from("/etc/tg/s.redb")
        );
    }

    #[test]
    fn mistakes_name_the_key_and_the_fix() {
        for (text, says) in [
            (
                "backend = \"disk\"",
                "use \"memory\", \"embedded\" or \"redis\"",
            ),
            ("backend = \"redis\"", "needs store.url"),
            ("url = \"redis://x\"", "only for backend = \"redis\""),
            (
                "backend = \"redis\"\nurl = \"http://x\"",
                "write redis://HOST:PORT",
            ),
            (
                "backend = \"redis\"\nurl = \"redis://x\"\npath = \"p\"",
                "remove path",
            ),
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
        assert!(parse("host = \"x\"").is_err());
        let c = parse("backend = \"redis\"\nurl = \"redis://127.0.0.1:6379\"").unwrap();
        assert_eq!(c.backend_for(true), StoreBackend::Redis);
    }
}
