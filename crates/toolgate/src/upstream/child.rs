//! A stdio upstream's child process: spawned in its own process group, stdout filtered to
//! JSON lines, stderr logged under the upstream's name, the whole group killed on shutdown.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::process::{Child, ChildStdin, Command};
use tokio_stream_lines::lines;

/// The longest stdout line accepted from a child (rmcp's own limit); longer lines are dropped.
const MAX_LINE: usize = 16 * 1024 * 1024;
/// Stderr lines logged per second per upstream before the rest are counted, not logged.
const STDERR_LINES_PER_SEC: u32 = 50;

/// A running child. Dropping it kills its whole process group, so no grandchild
/// (e.g. `npx` -> `node`) outlives the gateway's handle on it.
pub struct ChildProcess {
    child: Child,
    /// The process group id (= the child's pid, since it leads its own group).
    pgid: Option<Pid>,
    /// The last few stderr lines, so a failed handshake can say what the server said.
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

/// Stderr lines kept for error messages.
const STDERR_TAIL: usize = 5;

/// Spawns `command`; returns the child, a reader yielding only its JSON lines, and its stdin.
pub fn spawn(
    upstream: &str,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
    raw_tools: super::RawTools,
) -> std::io::Result<(ChildProcess, DuplexStream, ChildStdin)> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot start {command:?}: {e} (is it installed and on PATH?)"),
        )
    })?;
    let pgid = child.id().map(|p| Pid::from_raw(p as i32));
    let stdin = child.stdin.take().expect("stdin piped");
    let stdout = child.stdout.take().expect("stdout piped");
    let stderr = child.stderr.take().expect("stderr piped");
    let (mut to_rmcp, from_filter) = tokio::io::duplex(1 << 20);
    let name = upstream.to_string();
    tokio::spawn(async move {
        let mut stdout = lines(stdout, MAX_LINE);
        while let Some(line) = stdout.next_line().await {
            match line {
                Ok(line) => {
                    let t = line.trim_start();
                    if t.starts_with('{') || t.starts_with('[') {
                        if line.contains("\"tools\"") {
                            capture_tools(&line, &raw_tools);
                        }
                        let ok = to_rmcp.write_all(line.as_bytes()).await.is_ok()
                            && to_rmcp.write_all(b"\n").await.is_ok();
                        if !ok {
                            break;
                        }
                    } else if !t.is_empty() {
                        tracing::warn!(upstream = %name, "skipped a non-JSON line on stdout: {}", clip(&line));
                    }
                }
                Err(e) => tracing::warn!(upstream = %name, "stdout: {e}"),
            }
        }
    });
    let name = upstream.to_string();
    let stderr_tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
    let tail = stderr_tail.clone();
    tokio::spawn(async move {
        let mut stderr = lines(stderr, 64 * 1024);
        let mut window = tokio::time::Instant::now();
        let (mut logged, mut dropped) = (0u32, 0u64);
        while let Some(line) = stderr.next_line().await {
            let Ok(line) = line else { continue };
            {
                let mut tail = tail.lock().expect("stderr tail");
                if tail.len() == STDERR_TAIL {
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
    let child = ChildProcess {
        child,
        pgid,
        stderr_tail,
    };
    Ok((child, from_filter, stdin))
}

/// Keeps the tool objects of a `tools/list` result exactly as the server wrote them: rmcp's
/// `Tool` type drops keys it does not know (`execution`, custom annotations), and the
/// catalog promises the upstream's object whole.
fn capture_tools(line: &str, raw: &super::RawTools) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    let Some(tools) = v.pointer("/result/tools").and_then(|t| t.as_array()) else {
        return;
    };
    let mut raw = raw.lock().expect("raw tools");
    for t in tools {
        if let (Some(name), Some(obj)) = (t.get("name").and_then(|n| n.as_str()), t.as_object()) {
            raw.insert(name.to_string(), obj.clone());
        }
    }
}

fn clip(s: &str) -> &str {
    let mut end = s.len().min(400);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl ChildProcess {
    /// Asks the process group to stop (SIGTERM), then kills it after `grace`.
    pub async fn terminate(&mut self, grace: Duration) {
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
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }

    /// The last stderr lines, as a clause for an error message ("" when there were none).
    pub fn stderr_note(&self) -> String {
        let tail = self.stderr_tail.lock().expect("stderr tail");
        if tail.is_empty() {
            return String::new();
        }
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        format!("; its last stderr lines: {}", lines.join(" | "))
    }

    /// Waits for the child to exit and describes how it ended.
    pub async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => format!("the process exited ({status})"),
            Err(e) => format!("waiting for the process failed: {e}"),
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Line reading with a maximum length: an over-long line is reported and skipped, never buffered whole.
mod tokio_stream_lines {
    use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

    pub struct Lines<R> {
        reader: BufReader<R>,
        max: usize,
        buf: Vec<u8>,
    }

    pub fn lines<R: AsyncRead + Unpin>(r: R, max: usize) -> Lines<R> {
        Lines {
            reader: BufReader::with_capacity(64 * 1024, r),
            max,
            buf: Vec::new(),
        }
    }

    impl<R: AsyncRead + Unpin> Lines<R> {
        /// The next line without its newline; `None` at end of input.
        pub async fn next_line(&mut self) -> Option<std::io::Result<String>> {
            self.buf.clear();
            let mut too_long = false;
            loop {
                let chunk = match self.reader.fill_buf().await {
                    Ok(c) => c,
                    Err(e) => return Some(Err(e)),
                };
                if chunk.is_empty() {
                    return if self.buf.is_empty() && !too_long {
                        None
                    } else {
                        Some(self.finish(too_long))
                    };
                }
                let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => (i + 1, true),
                    None => (chunk.len(), false),
                };
                if !too_long {
                    if self.buf.len() + take > self.max {
                        too_long = true;
                        self.buf.clear();
                    } else {
                        self.buf.extend_from_slice(&chunk[..take]);
                    }
                }
                self.reader.consume(take);
                if done {
                    return Some(self.finish(too_long));
                }
            }
        }

        fn finish(&mut self, too_long: bool) -> std::io::Result<String> {
            if too_long {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a line longer than {} bytes was dropped", self.max),
                ));
            }
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            Ok(String::from_utf8_lossy(&self.buf).into_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_list_results_are_kept_as_written() {
        let raw: super::super::RawTools = Default::default();
        let line = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"},"annotations":{"category":"x"}}]}}"#;
        capture_tools(line, &raw);
        let kept = raw.lock().unwrap();
        assert_eq!(kept["a"]["execution"]["taskSupport"], "optional");
        assert_eq!(kept["a"]["annotations"]["category"], "x");
        drop(kept);
        // Anything else is ignored.
        capture_tools(
            r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"\"tools\""}]}}"#,
            &raw,
        );
        capture_tools("not json \"tools\"", &raw);
        assert_eq!(raw.lock().unwrap().len(), 1);
    }
}
