//! `toolgate init`: a minimal file that `check` passes, never written over without
//! `--force`; `--from claude|cursor|vscode|codex|FILE` reads each client's own files, in
//! their real formats, from a throwaway HOME and project folder, and the result passes
//! `check` (the full one, upstreams started, where the imported servers can run here).

mod common;

use common::toolgate;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fake user: a HOME and a project folder inside one temporary folder.
struct User {
    dir: tempfile::TempDir,
}

impl User {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("toolgate-init-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        Self { dir }
    }
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    fn project(&self) -> PathBuf {
        // Canonical: Claude Code keys its projects by the real path of the folder.
        std::fs::canonicalize(self.dir.path().join("project")).unwrap()
    }
    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    /// `toolgate ARGS` in the project folder as this user.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(toolgate())
            .args(args)
            .current_dir(self.project())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }
    fn written(&self) -> String {
        std::fs::read_to_string(self.project().join("toolgate.toml")).unwrap()
    }
}

fn said(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An mcpServers entry that runs one server of the demo (a real MCP server here).
fn demo_server(server: &str) -> String {
    format!(
        r#"{{"command": {:?}, "args": ["fixture", "--demo", "--server", "{server}"]}}"#,
        toolgate().display().to_string()
    )
}

#[test]
fn init_writes_a_working_file_and_never_overwrites_it_unasked() {
    let user = User::new();
    let out = user.run(&["init"], &[]);
    assert!(out.status.success(), "{}", said(&out));
    let text = user.written();
    assert!(
        text.contains("[upstreams.tickets]") && text.contains("[gateway]"),
        "{text}"
    );
    let check = user.run(&["check"], &[]);
    assert!(check.status.success(), "{}", said(&check));
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("tickets") && report.contains("ready"),
        "{report}"
    );
    assert!(
        report.contains("state store: embedded at"),
        "check says where state is kept: {report}"
    );

    std::fs::write(user.project().join("toolgate.toml"), "# mine\n").unwrap();
    let again = user.run(&["init"], &[]);
    assert!(!again.status.success());
    assert!(said(&again).contains("--force"), "{}", said(&again));
    assert_eq!(user.written(), "# mine\n", "the user's file is untouched");
    let forced = user.run(&["init", "--force"], &[]);
    assert!(forced.status.success(), "{}", said(&forced));
    assert!(user.written().contains("[upstreams.tickets]"));
}

#[test]
fn from_claude_reads_user_local_and_project_scopes_and_passes_check() {
    let user = User::new();
    let project = user.project().display().to_string();
    // ~/.claude.json as Claude Code writes it: user scope at the top, local scope per
    // folder, and a great deal of other state around them.
    user.write(
        &user.home().join(".claude.json"),
        &format!(
            r#"{{"numStartups": 12, "theme": "dark", "mcpServers": {{"tickets": {}}},
              "projects": {{
                {project:?}: {{"allowedTools": [], "mcpServers": {{"docs": {}}}, "hasTrustDialogAccepted": true}},
                "/somewhere/else": {{"mcpServers": {{"far": {{"command": "nope"}}}}}}
              }}}}"#,
            demo_server("tickets"),
            demo_server("docs")
        ),
    );
    // The project's .mcp.json, with a variable Claude Code expands, and a default.
    user.write(
        &user.project().join(".mcp.json"),
        &format!(
            r#"{{"mcpServers": {{"mail": {}, "remote": {{"type": "http", "url": "${{REMOTE_URL:-http://127.0.0.1:9}}/mcp",
               "headers": {{"Authorization": "Bearer ${{REMOTE_TOKEN}}"}}}}}}}}"#,
            demo_server("mail").replace(
                "\"args\"",
                "\"env\": {\"MAIL_USER\": \"${MAIL_USER}\"}, \"args\""
            )
        ),
    );
    let out = user.run(&["init", "--from", "claude"], &[]);
    let text = user.written();
    for name in [
        "[upstreams.tickets]",
        "[upstreams.docs]",
        "[upstreams.mail]",
        "[upstreams.remote]",
    ] {
        assert!(
            text.contains(name),
            "{name} missing:\n{text}\n{}",
            said(&out)
        );
    }
    assert!(
        !text.contains("far"),
        "another folder's servers stay out:\n{text}"
    );
    assert!(
        text.contains("url = \"http://127.0.0.1:9/mcp\""),
        "the default of an unset variable:\n{text}"
    );
    assert!(
        text.contains("\"Bearer ${REMOTE_TOKEN}\""),
        "references are kept, not expanded:\n{text}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("claude mcp add-json toolgate") && stdout.contains("\"alwaysLoad\":true"),
        "{stdout}"
    );
    // The variables unset: init says what to fix; set: the full check passes, with the
    // three demo servers started for real (remote is an address nothing listens on, so
    // it is switched off for the full check and checked as configuration).
    assert!(
        !out.status.success()
            && stdout.contains("to fix before serving")
            && stdout.contains("is not set"),
        "{}",
        said(&out)
    );
    let env = [("REMOTE_TOKEN", "t0ken"), ("MAIL_USER", "me")];
    let only = user.run(&["check", "--config-only"], &env);
    assert!(only.status.success(), "{}", said(&only));
    let edited = user.written().replace(
        "[upstreams.remote]\n",
        "[upstreams.remote]\nenabled = false\n",
    );
    std::fs::write(user.project().join("toolgate.toml"), edited).unwrap();
    let check = user.run(&["check"], &env);
    assert!(check.status.success(), "{}", said(&check));
}

#[test]
fn from_cursor_vscode_and_codex_read_their_own_formats() {
    // Cursor: the project's file wins over the user's for a name both define.
    let user = User::new();
    user.write(
        &user.home().join(".cursor/mcp.json"),
        &format!(
            r#"{{"mcpServers": {{"tickets": {}, "shared": {{"command": "user-one"}}}}}}"#,
            demo_server("tickets")
        ),
    );
    user.write(
        &user.project().join(".cursor/mcp.json"),
        r#"{"mcpServers": {"shared": {"command": "project-one", "disabled": true}}}"#,
    );
    let out = user.run(&["init", "--from", "cursor"], &[]);
    assert!(out.status.success(), "{}", said(&out));
    let text = user.written();
    assert!(
        text.contains("[upstreams.tickets]")
            && text.contains("\"project-one\"")
            && !text.contains("user-one"),
        "{text}"
    );
    assert!(text.contains("enabled = false"), "{text}");
    assert!(user.run(&["check"], &[]).status.success(), "{text}");

    // VS Code: `servers` with comments and trailing commas, its own variables, and the
    // user's settings.json `"mcp"` section.
    let user = User::new();
    user.write(
        &user.project().join(".vscode/mcp.json"),
        r#"{
  // the workspace's servers
  "inputs": [{"type": "promptString", "id": "api-key", "password": true}],
  "servers": {
    "db": {"type": "stdio", "command": "db-mcp", "args": ["${workspaceFolder}/data.db"],
           "env": {"KEY": "${input:api-key}", "HOME_DIR": "${env:HOME}"},},
  },
}"#,
    );
    user.write(
        &user.home().join(".config/Code/User/settings.json"),
        &format!(
            "{{\n  \"editor.fontSize\": 14, /* font */\n  \"mcp\": {{\"servers\": {{\"tickets\": {}}}}},\n}}",
            demo_server("tickets")
        ),
    );
    let out = user.run(&["init", "--from", "vscode"], &[]);
    let text = user.written();
    let data = format!("{}/data.db", user.project().display());
    assert!(
        text.contains("[upstreams.db]") && text.contains("[upstreams.tickets]"),
        "{text}\n{}",
        said(&out)
    );
    assert!(
        text.contains(&data) && text.contains("${API_KEY}") && text.contains("${HOME}"),
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("export API_KEY"),
        "{}",
        said(&out)
    );
    let only = user.run(&["check", "--config-only"], &[("API_KEY", "k")]);
    assert!(only.status.success(), "{}", said(&only));

    // Codex: ~/.codex/config.toml, [mcp_servers.NAME] with env, a bearer token variable and
    // headers on an HTTP server, and a switched-off one.
    let user = User::new();
    user.write(
        &user.home().join(".codex/config.toml"),
        &format!(
            "model = \"o4-mini\"\n\n[mcp_servers.tickets]\ncommand = {:?}\nargs = [\"fixture\", \"--demo\", \"--server\", \"tickets\"]\nenv = {{ TZ = \"UTC\" }}\nstartup_timeout_sec = 20\n\n[mcp_servers.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env_var = \"REMOTE_TOKEN\"\nhttp_headers = {{ \"X-Team\" = \"core\" }}\nenabled = false\n",
            toolgate().display().to_string()
        ),
    );
    let out = user.run(&["init", "--from", "codex"], &[]);
    let text = user.written();
    assert!(
        text.contains("[upstreams.tickets]") && text.contains("TZ = \"UTC\""),
        "{text}\n{}",
        said(&out)
    );
    assert!(
        text.contains("Authorization = \"Bearer ${REMOTE_TOKEN}\"") && text.contains("X-Team"),
        "{text}"
    );
    assert!(text.contains("enabled = false"), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("startup_timeout_sec"),
        "unused keys are named: {}",
        said(&out)
    );
    let check = user.run(&["check"], &[("REMOTE_TOKEN", "t")]);
    assert!(check.status.success(), "{}\n{text}", said(&check));
}

#[test]
fn from_a_file_or_a_client_with_nothing_says_where_it_looked() {
    let user = User::new();
    let file = user.dir.path().join("servers.json");
    user.write(
        &file,
        &format!(
            r#"{{"mcpServers": {{"tickets": {}}}}}"#,
            demo_server("tickets")
        ),
    );
    let out = user.run(
        &[
            "init",
            "--from",
            file.to_str().unwrap(),
            "--output",
            "gw.toml",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", said(&out));
    assert!(std::fs::read_to_string(user.project().join("gw.toml"))
        .unwrap()
        .contains("[upstreams.tickets]"));

    let out = user.run(&["init", "--from", "cursor"], &[]);
    assert!(!out.status.success());
    let text = said(&out);
    assert!(
        text.contains("no MCP servers found") && text.contains(".cursor/mcp.json"),
        "{text}"
    );
    assert!(
        !user.project().join("toolgate.toml").exists(),
        "nothing written"
    );
    let out = user.run(&["init", "--from", "emacs"], &[]);
    assert!(
        said(&out).contains("claude, cursor, vscode, codex"),
        "{}",
        said(&out)
    );
}
