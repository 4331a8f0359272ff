//! Import of the `mcpServers` JSON that Claude Desktop, Claude Code (`.mcp.json`), Cursor
//! and VS Code (`servers`) already use, so a user can point toolgate at what they have.
//!
//! Each entry is `{command, args, env, cwd}` or `{url, type, headers}`; `type` may be
//! `stdio`, `http`, `streamable-http` or `sse` (the legacy HTTP+SSE transport).

use super::{invalid, ConfigError, Result};
use super::{upstream::RawUpstream, Config, GatewayConfig};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// One server entry: the keys toolgate uses. Other keys (`autoApprove`, `timeout`,
/// `description`, ... that other clients write) are skipped with a warning, not refused:
/// the file belongs to another program.
#[derive(Debug, Deserialize)]
struct McpServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Cursor and others allow disabling an entry.
    disabled: Option<bool>,
    /// VS Code's `envFile` is not supported; named here so the error is clear.
    #[serde(rename = "envFile")]
    env_file: Option<String>,
}

const KNOWN_KEYS: &[&str] = &[
    "command", "args", "env", "cwd", "url", "type", "headers", "disabled", "envFile",
];

/// A map that refuses duplicate keys (serde_json would silently keep the last one).
struct Servers(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Servers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Servers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of servers by name")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Servers, A::Error> {
                let mut out: Vec<(String, serde_json::Value)> = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, serde_json::Value>()? {
                    if out.iter().any(|(n, _)| *n == k) {
                        return Err(de::Error::custom(format!(
                            "server {k:?} is defined twice: rename or remove one"
                        )));
                    }
                    out.push((k, v));
                }
                Ok(Servers(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// One project of Claude Code's `~/.claude.json`: `claude mcp add` (local scope, the
/// default) writes its servers here, under the project's folder.
#[derive(Deserialize)]
struct Project {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Servers>,
}

#[derive(Deserialize)]
struct File {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Servers>,
    /// VS Code's `.vscode/mcp.json` uses `servers`.
    servers: Option<Servers>,
    /// Claude Code's `~/.claude.json`: per-folder servers (`projects[<dir>].mcpServers`).
    #[serde(default)]
    projects: BTreeMap<String, Project>,
}

/// Parses mcpServers JSON; `file` is used in messages only. Project-scope entries of
/// `~/.claude.json` are read for the current folder, as Claude Code does.
pub fn parse(text: &str, file: &Path) -> Result<Config> {
    parse_in(text, file, std::env::current_dir().ok().as_deref())
}

/// `parse` as if run in `folder`.
pub(crate) fn parse_in(text: &str, file: &Path, folder: Option<&Path>) -> Result<Config> {
    let Imported { servers, warnings } = read_in(text, file, folder)?;
    let mut upstreams = BTreeMap::new();
    for (key, name, raw) in servers {
        upstreams.insert(name.clone(), raw.validate(&name, file, &key)?);
    }
    let config = Config {
        source: Some(file.to_path_buf()),
        gateway: GatewayConfig::default(),
        guided: Default::default(),
        direct: Default::default(),
        code: Default::default(),
        upstreams,
        policy: Default::default(),
        store: Default::default(),
        telemetry: Default::default(),
        warnings,
    };
    config.check_names()?;
    Ok(config)
}

/// The servers of an mcpServers file as written, before `${VAR}` substitution and
/// validation (what `toolgate init --from` copies into a toolgate.toml).
#[derive(Debug, Default)]
pub struct Imported {
    /// (the entry's key in the file, the server's name, its table), in file order.
    pub servers: Vec<(String, String, RawUpstream)>,
    /// What was read but not used.
    pub warnings: Vec<String>,
}

/// `parse_in`'s reading, without the validation.
pub fn read_in(text: &str, file: &Path, folder: Option<&Path>) -> Result<Imported> {
    let f = file.display();
    let parsed: File = serde_json::from_str(text).map_err(|e| {
        ConfigError::from_reader(format!("{f}: {}", super::human_serde(&e.to_string())))
    })?;
    let mut warnings = Vec::new();
    let mut entries: Vec<(String, String, serde_json::Value)> = Vec::new();
    let top = match (parsed.mcp_servers, parsed.servers) {
        (Some(s), _) => Some((s, "mcpServers")),
        (None, Some(s)) => Some((s, "servers")),
        (None, None) => None,
    };
    if let Some((servers, top)) = top {
        entries.extend(
            servers
                .0
                .into_iter()
                .map(|(n, v)| (format!("{top}.{n}"), n, v)),
        );
    }
    let here = folder.map(|d| d.to_string_lossy().trim_end_matches('/').to_string());
    let mut elsewhere = 0;
    for (dir, project) in parsed.projects {
        let Some(servers) = project.mcp_servers.filter(|s| !s.0.is_empty()) else {
            continue;
        };
        if here.as_deref() != Some(dir.trim_end_matches('/')) {
            elsewhere += servers.0.len();
            continue;
        }
        for (name, value) in servers.0 {
            // The project's entry wins over a user-scope one of the same name, as in Claude Code.
            if entries.iter().any(|(_, n, _)| *n == name) {
                warnings.push(format!(
                    "{f}: projects[{dir:?}].mcpServers.{name} replaces the user-scope entry of the same name"
                ));
                entries.retain(|(_, n, _)| *n != name);
            }
            entries.push((format!("projects[{dir:?}].mcpServers.{name}"), name, value));
        }
    }
    if elsewhere > 0 {
        warnings.push(format!(
            "{f}: skipped {elsewhere} project-scope servers of other folders (projects[<dir>].mcpServers); \
             run toolgate from the project's folder to use them"
        ));
    }
    if entries.is_empty() && elsewhere == 0 {
        invalid!(
            "{f}: no \"mcpServers\" (or VS Code \"servers\") object found: is this an MCP client configuration file?"
        );
    }
    let mut servers = Vec::new();
    for (key, name, value) in entries {
        if let Some(obj) = value.as_object() {
            let unused: Vec<&str> = obj
                .keys()
                .map(String::as_str)
                .filter(|k| !KNOWN_KEYS.contains(k))
                .collect();
            if !unused.is_empty() {
                warnings.push(format!(
                    "{f}: {key}: {} not used by toolgate (skipped)",
                    unused.join(", ")
                ));
            }
        }
        let s: McpServer = serde_json::from_value(value).map_err(|e| {
            ConfigError::from_reader(format!(
                "{f}: {key}: {}",
                super::human_serde(&e.to_string())
            ))
        })?;
        if s.env_file.is_some() {
            invalid!("{f}: {key}.envFile is not supported: put the variables in \"env\" as \"${{VAR}}\" references");
        }
        let transport = match s.kind.as_deref() {
            None => None,
            Some("stdio") => Some("stdio"),
            Some("http") | Some("streamable-http") | Some("streamableHttp") => {
                Some("streamable-http")
            }
            Some("sse") => Some("sse"),
            Some(other) => {
                invalid!("{f}: {key}.type {other:?}: use \"stdio\", \"http\" or \"sse\"")
            }
        };
        let raw = RawUpstream {
            command: s.command,
            args: s.args,
            env: s.env,
            cwd: s.cwd,
            url: s.url,
            transport: transport.map(str::to_string),
            headers: s.headers,
            enabled: s.disabled.map(|d| !d),
            ..Default::default()
        };
        servers.push((key, name, raw));
    }
    Ok(Imported { servers, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Transport;

    fn p(s: &str) -> Result<Config> {
        parse(s, Path::new(".mcp.json"))
    }

    #[test]
    fn claude_and_vscode_shapes() {
        let c = p(r#"{"mcpServers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"]},
            "remote": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "k"}}
        }}"#)
        .unwrap();
        assert!(matches!(
            c.upstreams["time"].transport,
            Transport::Stdio { .. }
        ));
        assert!(matches!(
            c.upstreams["remote"].transport,
            Transport::Http { .. }
        ));
        let c = p(r#"{"mcpServers": {"legacy": {"type": "sse", "url": "http://h/sse"}}}"#).unwrap();
        assert!(matches!(
            c.upstreams["legacy"].transport,
            Transport::Http {
                style: crate::config::HttpStyle::Sse,
                ..
            }
        ));
        let c = p(r#"{"servers": {"a": {"command": "x", "disabled": true}}}"#).unwrap();
        assert!(!c.upstreams["a"].enabled);
    }

    #[test]
    fn errors_name_the_file_and_key() {
        let e = p(r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(".mcp.json") && e.contains("defined twice"),
            "{e}"
        );
        let e = p(r#"{"mcpServers": {"a": {"comand": "x"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mcpServers.a") && e.contains("needs `command`"),
            "{e}"
        );
        let e = p(r#"{"mcpServers": {"a": {"command": "x", "args": "-v"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mcpServers.a") && e.contains("an array of strings"),
            "{e}"
        );
        let e = p(r#"{"mcpServers": {"a": {"url": "http://h/mcp", "type": "ws"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mcpServers.a.type") && e.contains("\"sse\""),
            "{e}"
        );
        let e = p(r#"{"other": 1}"#).unwrap_err().to_string();
        assert!(e.contains("mcpServers"), "{e}");
    }

    #[test]
    fn keys_other_clients_write_are_skipped_with_a_warning() {
        let c = p(
            r#"{"mcpServers": {"a": {"command": "x", "autoApprove": [], "timeout": 60,
            "disabled": false}}}"#,
        )
        .unwrap();
        assert!(c.upstreams["a"].enabled);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("mcpServers.a: autoApprove, timeout not used"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn claude_json_project_entries_of_this_folder_are_read() {
        let text = r#"{"mcpServers": {"user": {"command": "u"}, "both": {"command": "old"}},
            "projects": {
              "/work/app": {"mcpServers": {"proj": {"command": "p"}, "both": {"command": "new"}}},
              "/work/other": {"mcpServers": {"far": {"command": "f"}}},
              "/work/empty": {"allowedTools": []}
            }}"#;
        let file = Path::new("/home/u/.claude.json");
        let c = parse_in(text, file, Some(Path::new("/work/app"))).unwrap();
        let names: Vec<&str> = c.upstreams.keys().map(String::as_str).collect();
        assert_eq!(names, ["both", "proj", "user"]);
        match &c.upstreams["both"].transport {
            Transport::Stdio { command, .. } => assert_eq!(command, "new"),
            t => panic!("{t:?}"),
        }
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("skipped 1 project-scope")),
            "{:?}",
            c.warnings
        );
        // From another folder: the user scope only, and a word about the rest.
        let c = parse_in(text, file, Some(Path::new("/elsewhere"))).unwrap();
        assert_eq!(c.upstreams.len(), 2);
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("skipped 3 project-scope")),
            "{:?}",
            c.warnings
        );
    }
}
