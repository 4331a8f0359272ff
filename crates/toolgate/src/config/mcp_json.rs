//! Import of the `mcpServers` JSON that Claude Desktop, Claude Code (`.mcp.json`), Cursor
//! and VS Code (`servers`) already use, so a user can point toolgate at what they have.
//!
//! Each entry is `{command, args, env, cwd}` or `{url, type, headers}`; `type` may be
//! `stdio`, `http` or `streamable-http` (`sse` is refused: toolgate speaks Streamable HTTP).

use super::{raw::RawUpstream, Config, GatewayConfig};
use anyhow::{anyhow, bail, Result};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// VS Code's `envFile` and similar are not supported; named here so the error is clear.
    #[serde(rename = "envFile")]
    env_file: Option<String>,
}

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

#[derive(Deserialize)]
struct File {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Servers>,
    /// VS Code's `.vscode/mcp.json` uses `servers`.
    servers: Option<Servers>,
}

/// Parses mcpServers JSON; `file` is used in messages only.
pub fn parse(text: &str, file: &Path) -> Result<Config> {
    let parsed: File =
        serde_json::from_str(text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let (servers, top) = match (parsed.mcp_servers, parsed.servers) {
        (Some(s), _) => (s, "mcpServers"),
        (None, Some(s)) => (s, "servers"),
        (None, None) => bail!(
            "{}: no \"mcpServers\" (or VS Code \"servers\") object found: is this an MCP client configuration file?",
            file.display()
        ),
    };
    let mut upstreams = BTreeMap::new();
    for (name, value) in servers.0 {
        let key = format!("{top}.{name}");
        let s: McpServer =
            serde_json::from_value(value).map_err(|e| anyhow!("{}: {key}: {e}", file.display()))?;
        if s.env_file.is_some() {
            bail!("{}: {key}.envFile is not supported: put the variables in \"env\" as \"${{VAR}}\" references", file.display());
        }
        match s.kind.as_deref() {
            None | Some("stdio") | Some("http") | Some("streamable-http") | Some("streamableHttp") => {}
            Some("sse") => bail!(
                "{}: {key}: type \"sse\" (the old HTTP+SSE transport) is not supported: use the server's Streamable HTTP endpoint (type \"http\")",
                file.display()
            ),
            Some(other) => bail!("{}: {key}.type {other:?}: use \"stdio\" or \"http\"", file.display()),
        }
        let raw = RawUpstream {
            command: s.command,
            args: s.args,
            env: s.env,
            cwd: s.cwd,
            url: s.url,
            headers: s.headers,
            enabled: s.disabled.map(|d| !d),
            ..Default::default()
        };
        upstreams.insert(name.clone(), raw.validate(&name, file, &key)?);
    }
    Ok(Config {
        source: Some(file.to_path_buf()),
        gateway: GatewayConfig::default(),
        guided: Default::default(),
        direct: Default::default(),
        code: Default::default(),
        upstreams,
        policy: Default::default(),
    })
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
        assert!(e.contains("mcpServers.a") && e.contains("comand"), "{e}");
        let e = p(r#"{"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Streamable HTTP"), "{e}");
        let e = p(r#"{"other": 1}"#).unwrap_err().to_string();
        assert!(e.contains("mcpServers"), "{e}");
    }
}
