//! Where each MCP client keeps its servers, and how `toolgate init --from` reads them:
//! Claude Code (`~/.claude.json`: user scope and this folder's local scope; `.mcp.json`),
//! Cursor (`.cursor/mcp.json` here, then `~/.cursor/mcp.json`), VS Code (`.vscode/mcp.json`,
//! then the user's `mcp.json` or `settings.json` `"mcp"`), Codex (`$CODEX_HOME/config.toml`,
//! default `~/.codex`, `[mcp_servers.NAME]`). JSON files go through the mcpServers import
//! (`toolgate::mcp_json`); VS Code's files may hold comments and trailing commas,
//! and Codex's TOML is translated to the same entries first.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use toolgate::mcp_json::{self, Imported};

/// The clients `--from` names.
pub(crate) const CLIENTS: &[&str] = &["claude", "cursor", "vscode", "codex"];

/// One file a client keeps servers in, and how to read it.
pub(crate) struct Source {
    pub path: PathBuf,
    pub kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `{"mcpServers": ...}` or `{"servers": ...}` (JSON, comments allowed).
    McpJson,
    /// VS Code's `settings.json`: the servers under `"mcp"`.
    VsCodeSettings,
    /// Codex's `config.toml`: `[mcp_servers.NAME]`.
    CodexToml,
}

/// The files `client` keeps servers in, most specific first (an entry of an earlier file
/// wins over one of the same name in a later file, as in the client). `here` is the
/// project folder, `home` the user's.
pub(crate) fn client_files(client: &str, here: &Path, home: &Path) -> Result<Vec<Source>> {
    let json = |p: PathBuf| Source {
        path: p,
        kind: Kind::McpJson,
    };
    Ok(match client {
        // `~/.claude.json` holds the user scope and each folder's local scope (which wins
        // over the project's `.mcp.json`).
        "claude" => vec![
            json(home.join(".claude.json")),
            json(here.join(".mcp.json")),
        ],
        "cursor" => vec![
            json(here.join(".cursor/mcp.json")),
            json(home.join(".cursor/mcp.json")),
        ],
        "vscode" => {
            let mut v = vec![json(here.join(".vscode/mcp.json"))];
            for user in [
                home.join(".config/Code/User"),
                home.join("Library/Application Support/Code/User"),
            ] {
                v.push(json(user.join("mcp.json")));
                v.push(Source {
                    path: user.join("settings.json"),
                    kind: Kind::VsCodeSettings,
                });
            }
            v
        }
        "codex" => {
            let dir = std::env::var_os("CODEX_HOME")
                .filter(|v| !v.is_empty())
                .map_or_else(|| home.join(".codex"), PathBuf::from);
            vec![Source {
                path: dir.join("config.toml"),
                kind: Kind::CodexToml,
            }]
        }
        other => bail!(
            "--from {other:?}: name a client ({}) or an existing file",
            CLIENTS.join(", ")
        ),
    })
}

/// A file named on the command line: Codex TOML by its extension, else mcpServers JSON.
pub(crate) fn named_file(path: &Path) -> Source {
    let kind = match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => Kind::CodexToml,
        _ if path.file_name().is_some_and(|n| n == "settings.json") => Kind::VsCodeSettings,
        _ => Kind::McpJson,
    };
    Source {
        path: path.to_path_buf(),
        kind,
    }
}

/// The servers of one file, as written. `None`: the file holds no servers at all (a
/// client's settings file without MCP), which is not an error when looking through a
/// client's files.
pub(crate) fn read(source: &Source, here: &Path) -> Result<Option<Imported>> {
    let path = &source.path;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let json = match source.kind {
        Kind::McpJson => strip_jsonc(&text),
        Kind::VsCodeSettings => {
            let settings: Value = serde_json::from_str(&strip_jsonc(&text))
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            match settings.get("mcp") {
                Some(mcp) if mcp.get("servers").is_some() => mcp.to_string(),
                _ => return Ok(None),
            }
        }
        Kind::CodexToml => match codex_to_json(&text, path)? {
            Some(v) => v.to_string(),
            None => return Ok(None),
        },
    };
    let has_servers = serde_json::from_str::<Value>(&json).ok().is_some_and(|v| {
        ["mcpServers", "servers", "projects"]
            .iter()
            .any(|k| v.get(k).is_some())
    });
    if !has_servers {
        // E.g. Claude Code's state file before any server was added.
        return Ok(None);
    }
    Ok(mcp_json::read_in(&json, path, Some(here)).map(Some)?)
}

/// Codex's `[mcp_servers.NAME]` tables as mcpServers entries: `command`, `args`, `env`,
/// `cwd`, `url`; `http_headers` as headers, `bearer_token_env_var` as an
/// `Authorization: Bearer ${VAR}` header, `enabled = false` as disabled. Other keys pass
/// through, to be reported as not used.
fn codex_to_json(text: &str, path: &Path) -> Result<Option<Value>> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let Some(servers) = doc.get("mcp_servers") else {
        return Ok(None);
    };
    let servers = servers
        .as_table()
        .ok_or_else(|| anyhow!("{}: mcp_servers is not a table", path.display()))?;
    let mut out = Map::new();
    for (name, entry) in servers {
        let Value::Object(mut e) = serde_json::to_value(entry)? else {
            bail!(
                "{}: mcp_servers.{name} is not a table: write [mcp_servers.{name}] with command or url",
                path.display()
            );
        };
        if let Some(h) = e.remove("http_headers") {
            e.insert("headers".into(), h);
        }
        if let Some(var) = e.remove("bearer_token_env_var") {
            let var = var.as_str().unwrap_or_default().to_string();
            let headers = e.entry("headers").or_insert_with(|| json!({}));
            if let Some(h) = headers.as_object_mut() {
                h.insert("Authorization".into(), json!(format!("Bearer ${{{var}}}")));
            }
        }
        if let Some(enabled) = e.remove("enabled") {
            e.insert("disabled".into(), json!(enabled == json!(false)));
        }
        out.insert(name.clone(), Value::Object(e));
    }
    Ok(Some(json!({ "mcpServers": out })))
}

/// JSON with comments (`//`, `/* */`) and trailing commas, as VS Code writes and reads
/// it, made plain JSON. Strings are copied untouched.
pub(crate) fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                while let Some(s) = chars.next() {
                    out.push(s);
                    match s {
                        '\\' => out.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for s in chars.by_ref() {
                    if s == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for s in chars.by_ref() {
                    if last == '*' && s == '/' {
                        break;
                    }
                    last = s;
                }
            }
            _ => out.push(c),
        }
    }
    // Trailing commas: a comma whose next non-space character closes an object or array.
    let bytes: Vec<char> = out.chars().collect();
    let mut clean = String::with_capacity(out.len());
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            clean.push(c);
            if c == '\\' && i + 1 < bytes.len() {
                clean.push(bytes[i + 1]);
                i += 1;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            clean.push(c);
        } else if c == ',' {
            let next = bytes[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}' | ']')) {
                clean.push(c);
            }
        } else {
            clean.push(c);
        }
        i += 1;
    }
    clean
}

/// A client's variable reference made toolgate's: `${env:X}` (VS Code) -> `${X}`;
/// `${VAR:-default}` (Claude Code) -> `${VAR}` when VAR is set here, else the default;
/// `${workspaceFolder}` -> `here`, `${userHome}` -> `home`; anything else (VS Code's
/// `${input:id}`) -> `${ID}` (upper case), with a warning to set it.
pub(crate) fn translate_refs(
    value: &str,
    here: &Path,
    home: &Path,
    warn: &mut dyn FnMut(String),
) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(pos) = rest.find("${") {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[pos..]);
            return out;
        };
        let inner = &after[..end];
        let simple = |n: &str| {
            !n.is_empty()
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.starts_with(|c: char| c.is_ascii_digit())
        };
        let replaced = if let Some(var) = inner.strip_prefix("env:").filter(|v| simple(v)) {
            format!("${{{var}}}")
        } else if let Some((var, default)) = inner.split_once(":-").filter(|(v, _)| simple(v)) {
            if std::env::var_os(var).is_some() {
                format!("${{{var}}}")
            } else {
                default.replace("${", "$${")
            }
        } else if inner == "workspaceFolder" {
            here.display().to_string()
        } else if inner == "userHome" {
            home.display().to_string()
        } else if simple(inner) {
            format!("${{{inner}}}")
        } else {
            let var: String = inner
                .rsplit(':')
                .next()
                .unwrap_or(inner)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            let var = if simple(&var) {
                var
            } else {
                format!("V_{var}")
            };
            warn(format!(
                "\"${{{inner}}}\" is the client's own prompt or variable: written as ${{{var}}}; export {var} before serving"
            ));
            format!("${{{var}}}")
        };
        out.push_str(&replaced);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_go_strings_stay() {
        let text = "{\n // a comment\n \"a\": \"http://x/*y*/\", /* b */ \"b\": [1, 2,],\n}";
        let v: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(v, json!({"a": "http://x/*y*/", "b": [1, 2]}));
        let text = r#"{"q": "say \"//,}\"",}"#;
        let v: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(v["q"], "say \"//,}\"");
    }

    #[test]
    fn client_references_become_toolgates() {
        let (here, home) = (Path::new("/w/app"), Path::new("/home/u"));
        let mut warnings = Vec::new();
        let mut t = |v: &str| translate_refs(v, here, home, &mut |w| warnings.push(w));
        assert_eq!(t("${env:GH_TOKEN}"), "${GH_TOKEN}");
        assert_eq!(t("${workspaceFolder}/db"), "/w/app/db");
        assert_eq!(t("${userHome}"), "/home/u");
        assert_eq!(t("Bearer ${TOKEN}"), "Bearer ${TOKEN}");
        assert_eq!(t("${TOOLGATE_SURELY_UNSET_VAR:-fallback}"), "fallback");
        assert_eq!(t("${input:api-key}"), "${API_KEY}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("export API_KEY"), "{warnings:?}");
    }
}
