//! A stdio upstream's child process: spawned in its own process group, stderr logged under
//! the upstream's name, the whole group killed on shutdown. Its stdout and stdin are the
//! transport's (`stdio.rs`).

use super::lines::lines;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Stderr lines logged per second per upstream before the rest are counted, not logged.
const STDERR_LINES_PER_SEC: u32 = 50;

/// A running child. Dropping it kills its whole process group, so no grandchild
/// (e.g. `npx` -> `node`) outlives the gateway's handle on it.
pub(super) struct ChildProcess {
    child: Child,
    /// The process group id (= the child's pid, since it leads its own group).
    pgid: Option<Pid>,
    /// The last stderr lines, for the error when the child dies before it answers: that
    /// is where it says why (a missing module, a bad flag, a missing token).
    stderr_tail: StderrTail,
    /// Kills the group should the gateway die without doing it (`orphans`).
    _guard: Option<super::orphans::GroupGuard>,
}

type StderrTail = std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>;
/// How many stderr lines the tail keeps.
const TAIL_LINES: usize = 5;

/// What a stdio upstream is started with.
pub(super) struct Spawn<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    /// The upstream's own `env`, on top of the minimal environment.
    pub env: &'a BTreeMap<String, String>,
    /// Names of the gateway's variables passed besides the minimal ones (`inherit_env`).
    pub inherit_env: &'a [String],
    pub cwd: Option<&'a PathBuf>,
}

/// Spawns the command with a minimal environment (`environment::child_env`); returns the
/// child, its stdout and its stdin.
pub(super) fn spawn(
    upstream: &str,
    what: Spawn<'_>,
) -> std::io::Result<(ChildProcess, ChildStdout, ChildStdin)> {
    let Spawn {
        command,
        args,
        env,
        inherit_env,
        cwd,
    } = what;
    if let Some(dir) = cwd.filter(|d| !d.is_dir()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "cannot start {command:?}: its folder (upstreams.{upstream}.cwd) {} is not a directory: create it or fix `cwd`",
                dir.display()
            ),
        ));
    }
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(super::environment::child_env(
            std::env::vars(),
            inherit_env,
            env,
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound => " (is it installed and on PATH?)",
            std::io::ErrorKind::PermissionDenied => " (is it executable?)",
            _ => "",
        };
        std::io::Error::new(e.kind(), format!("cannot start {command:?}: {e}{hint}"))
    })?;
    let pgid = child.id().map(|p| Pid::from_raw(p as i32));
    let stdin = child.stdin.take().expect("stdin piped");
    let stdout = child.stdout.take().expect("stdout piped");
    let stderr = child.stderr.take().expect("stderr piped");
    let name = upstream.to_string();
    let stderr_tail = StderrTail::default();
    let tail = stderr_tail.clone();
    tokio::spawn(async move {
        let mut stderr = lines(stderr, 64 * 1024);
        let mut window = tokio::time::Instant::now();
        let (mut logged, mut dropped) = (0u32, 0u64);
        while let Some(line) = stderr.next_line().await {
            let Ok(line) = line else { continue };
            let line = plain_log_line(&line);
            if line.trim().is_empty() {
                continue;
            }
            {
                let mut tail = tail.lock().expect("stderr tail");
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(clip(&line).to_string());
            }
            if window.elapsed() >= Duration::from_secs(1) {
                if dropped > 0 {
                    tracing::warn!(upstream = %name, "stderr: {dropped} more lines not logged (rate limit)");
                }
                window = tokio::time::Instant::now();
                (logged, dropped) = (0, 0);
            }
            if logged < STDERR_LINES_PER_SEC {
                logged += 1;
                tracing::info!(upstream = %name, "stderr: {}", clip(&line));
            } else {
                dropped += 1;
            }
        }
    });
    let proc = ChildProcess {
        child,
        pgid,
        stderr_tail,
        _guard: pgid.and_then(super::orphans::GroupGuard::spawn),
    };
    Ok((proc, stdout, stdin))
}

/// A child's stderr line as one of our log lines: colour codes removed, and a leading time
/// stamp (ISO 8601 or `YYYY-MM-DD HH:MM:SS`, as tracing, Python logging and most loggers
/// write it) dropped, since our own log line carries one.
fn plain_log_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte (@ to ~).
            if chars.peek() == Some(&'[') {
                chars.next();
                for f in chars.by_ref() {
                    if ('@'..='~').contains(&f) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    let t = out.trim_start();
    let b = t.as_bytes();
    let stamped = b.len() > 19
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':'
        && b[16] == b':';
    if !stamped {
        return out;
    }
    // The stamp ends at the first space (ISO 8601), or at the second (date, space, time).
    let spaces = if b[10] == b' ' { 2 } else { 1 };
    match t.match_indices(' ').nth(spaces - 1) {
        Some((end, _)) => t[end..].trim_start().to_string(),
        None => out,
    }
}

pub(super) fn clip(s: &str) -> &str {
    let mut end = s.len().min(400);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl ChildProcess {
    /// Asks the process group to stop (SIGTERM), then kills it after `grace`.
    pub(super) async fn terminate(&mut self, grace: Duration) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(pgid, Signal::SIGTERM);
        }
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.kill_group();
            let _ = self.child.wait().await;
        } else {
            // The leader is gone; make sure nothing it started lingers.
            self.kill_group();
        }
        self.pgid = None;
    }

    fn kill_group(&self) {
        if let Some(pgid) = self.pgid {
            super::orphans::group_stopped(pgid);
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }

    /// Waits for the child to exit and describes how it ended.
    pub(super) async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => format!("the process exited ({status})"),
            Err(e) => format!("waiting for the process failed: {e}"),
        }
    }

    /// Why the child ended: its exit status, with its last stderr lines.
    pub(super) async fn exit_reason(&mut self) -> String {
        let ended = self.wait().await;
        self.with_stderr(ended).await
    }

    /// `message` with the last lines the child wrote to stderr, where a dying program
    /// says why (called once it has exited, so the pipe is drained or about to be).
    pub(super) async fn with_stderr(&self, message: String) -> String {
        for _ in 0..20 {
            if !self.stderr_tail.lock().expect("stderr tail").is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let tail = self.stderr_tail.lock().expect("stderr tail");
        if tail.is_empty() {
            return message;
        }
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        format!("{message}; its stderr ended with: {}", lines.join(" | "))
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill_group();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_over_the_limit_is_dropped_and_its_id_found_at_either_end() {
        let big = "x".repeat(5000);
        let text = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"id\":1,\"t\":\"{big}\"}}}}\n{{\"result\":{{\"id\":1,\"t\":\"{big}\"}},\"jsonrpc\":\"2.0\",\"id\":\"r-9\"}}\n{{\"id\":3}}\n"
        );
        let mut l = lines(text.as_bytes(), 1024);
        assert!(l.next_line().await.unwrap().is_err());
        assert_eq!(l.dropped.take().unwrap().id(), Some(serde_json::json!(7)));
        assert!(l.next_line().await.unwrap().is_err());
        assert_eq!(
            l.dropped.take().unwrap().id(),
            Some(serde_json::json!("r-9"))
        );
        assert_eq!(l.next_line().await.unwrap().unwrap(), "{\"id\":3}");
        assert!(l.dropped.is_none());
    }

    #[test]
    fn child_log_lines_lose_colour_and_their_own_time_stamp() {
        assert_eq!(
            plain_log_line("2026-12-01T08:38:15.123456Z  INFO fixture: ready"),
            "INFO fixture: ready"
        );
        assert_eq!(
            plain_log_line("\u{1b}[2m2026-12-01T08:38:15Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m up"),
            "INFO up"
        );
        assert_eq!(
            plain_log_line("2026-12-01 08:38:15,123 - mcp - INFO - started"),
            "- mcp - INFO - started"
        );
        assert_eq!(plain_log_line("Error: no token"), "Error: no token");
        assert_eq!(plain_log_line("2026 was a year"), "2026 was a year");
    }
}
