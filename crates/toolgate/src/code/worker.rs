//! One sandbox worker process per run: started with an empty environment (it holds no
//! credentials), given the run, its tool calls answered (at most `max_in_flight` at once),
//! and killed at the deadline plus the grace period, whatever it is doing.
//!
//! A process per run is the isolation: nothing a program leaves behind outlives it, and a
//! worker is never given a second run, whether it finished, crashed or was killed. Workers
//! may be started ahead of time and kept waiting (see [`super::pool`]); a waiting worker has
//! run nothing.

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, Notify, Semaphore};
use toolgate_sandbox::protocol::{
    CallAnswer, CallFailure, Done, ProgramError, Run, ToGateway, STATE_SERVER,
};

/// A tool call a program made.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
}

/// One call as the model sees it afterwards: `ok` is `None` for a call still running when
/// the run ended (it may or may not have happened upstream).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallRecord {
    pub server: String,
    pub tool: String,
    pub ok: Option<bool>,
    pub ms: u64,
}

/// How a run ended, from the gateway's side.
#[derive(Debug, Clone)]
pub(crate) struct RunReport {
    /// `ok`, `error`, `timeout` or `crashed`.
    pub status: String,
    pub result: Value,
    pub error: Option<ProgramError>,
    /// Console lines, `level: text` (plain text for `log`).
    pub logs: Vec<String>,
    pub calls: Vec<CallRecord>,
    pub truncated: bool,
    /// PII values the run's tool results held, and from which servers (set by the
    /// caller of [`run`]; tokens made from the answer remember them for flow rules).
    pub origins: super::pii::Origins,
    /// The same values with their classes (set by the caller of [`run`]): what a skill run
    /// by a program hands back to its parent's flow rules.
    pub carried: Vec<super::flows::Carried>,
}

/// The largest returned value a worker sends (what the model sees is cut far below).
pub(crate) const MAX_RESULT_BYTES: usize = 1 << 20;

/// The longest line accepted from a worker under `cfg`: a tool call's arguments or the
/// returned value, plus the console output, plus room for the envelope.
pub(crate) fn line_limit(cfg: &crate::config::code::CodeConfig) -> usize {
    cfg.max_tool_result_bytes.max(MAX_RESULT_BYTES) + cfg.output_bytes + (64 << 10)
}

/// Why there is no worker for a run: it could not be started, or did not come up. The
/// message becomes the run's `SandboxError`; a pool retries starting one with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    /// Code mode has no worker command configured.
    #[error("this gateway has no sandbox worker command")]
    NoCommand,
    /// The worker command is empty.
    #[error("the sandbox worker command is empty")]
    EmptyCommand,
    /// The process could not be started.
    #[error("cannot start the sandbox worker {program:?}: {source}")]
    Spawn {
        /// The command's program.
        program: String,
        /// What starting it said.
        source: std::io::Error,
    },
    /// The process came without its pipes.
    #[error("the sandbox worker has no pipes")]
    NoPipes,
    /// It sent something other than `ready` first.
    #[error("the sandbox worker spoke before its run: {0:?}")]
    SpokeEarly(Box<ToGateway>),
    /// It sent a line that is not a message.
    #[error("the sandbox worker broke the protocol: {0}")]
    Protocol(#[source] ProtocolError),
    /// It exited before saying it was ready.
    #[error("the sandbox worker exited at start ({0})")]
    ExitedAtStart(std::process::ExitStatus),
    /// It closed its output before saying it was ready.
    #[error("the sandbox worker closed its output at start")]
    ClosedAtStart,
    /// It did not say it was ready in time.
    #[error("the sandbox worker was not ready after {ms} ms")]
    NotReady {
        /// The wait, in milliseconds.
        ms: u128,
    },
}

impl WorkerError {
    /// Whether starting another worker may succeed with nothing changed: this one broke
    /// or was slow. A missing or unstartable command waits for the operator.
    #[expect(
        dead_code,
        reason = "the kind a caller or metric reads (as StoreFault::retryable); none reads it yet"
    )]
    pub(crate) fn retryable(&self) -> bool {
        !matches!(
            self,
            Self::NoCommand | Self::EmptyCommand | Self::Spawn { .. }
        )
    }
}

/// A worker's line that is not a message of the protocol.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// Longer than the line limit.
    #[error("a message is longer than {max} bytes")]
    TooLong {
        /// The limit, in bytes.
        max: usize,
    },
    /// Not a message (serde's words).
    #[error("{0}")]
    Parse(#[source] serde_json::Error),
}

/// A started worker process and its pipes, for exactly one run.
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    /// What the worker writes, parsed line by line (a reader task feeds it).
    messages: mpsc::Receiver<Result<ToGateway, ProtocolError>>,
}

impl Worker {
    /// Starts `command` with an empty environment in `/`. `exited` is notified when the
    /// worker's stdout closes (it exited or was killed), so a pool can replace it.
    pub(crate) fn spawn(
        command: &[String],
        max_line_bytes: usize,
        exited: Option<std::sync::Arc<Notify>>,
    ) -> Result<Self, WorkerError> {
        let Some((program, args)) = command.split_first() else {
            return Err(WorkerError::EmptyCommand);
        };
        let mut child = Command::new(program)
            .args(args)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| WorkerError::Spawn {
                program: program.clone(),
                source: e,
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(WorkerError::NoPipes);
        };
        tokio::spawn(drain_stderr(stderr));
        let (tx, messages) = mpsc::channel(16);
        tokio::spawn(async move {
            read_messages(stdout, max_line_bytes, tx).await;
            if let Some(n) = exited {
                n.notify_one();
            }
        });
        Ok(Self {
            child,
            stdin,
            messages,
        })
    }

    /// Waits (at most `limit`) for the worker to say it is ready for its run.
    pub(crate) async fn ready(&mut self, limit: Duration) -> Result<(), WorkerError> {
        match tokio::time::timeout(limit, self.messages.recv()).await {
            Ok(Some(Ok(ToGateway::Ready))) => Ok(()),
            Ok(Some(Ok(other))) => Err(WorkerError::SpokeEarly(Box::new(other))),
            Ok(Some(Err(e))) => Err(WorkerError::Protocol(e)),
            Ok(None) => Err(match self.child.try_wait() {
                Ok(Some(status)) => WorkerError::ExitedAtStart(status),
                _ => WorkerError::ClosedAtStart,
            }),
            Err(_) => Err(WorkerError::NotReady {
                ms: limit.as_millis(),
            }),
        }
    }

    /// Still running and still able to take a run.
    pub(crate) fn alive(&mut self) -> bool {
        !self.messages.is_closed() && matches!(self.child.try_wait(), Ok(None))
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills the process and waits (bounded) until it is gone.
    pub(crate) async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// Process-level settings of a run.
pub(crate) struct WorkerSettings {
    /// The deadline plus the grace period: when the process is killed.
    pub kill_after: Duration,
    pub max_calls: u32,
    pub max_in_flight: usize,
    /// Console bytes kept (the worker caps them too; this holds if it does not).
    pub max_log_bytes: usize,
}

/// Runs `run` in `worker` (or reports why there is none); `handle` answers each tool call.
/// The worker is used up: killed if it has not exited by the end.
pub(crate) async fn run<F, Fut>(
    settings: &WorkerSettings,
    worker: Result<Worker, WorkerError>,
    run: &Run,
    handle: F,
) -> RunReport
where
    F: Fn(ToolCall) -> Fut + Sync,
    Fut: Future<Output = Result<Value, CallFailure>> + Send,
{
    let mut report = RunReport {
        status: "crashed".into(),
        result: Value::Null,
        error: None,
        logs: Vec::new(),
        calls: Vec::new(),
        truncated: false,
        origins: Default::default(),
        carried: Vec::new(),
    };
    let Worker {
        mut child,
        mut stdin,
        mut messages,
    } = match worker {
        Ok(w) => w,
        Err(e) => {
            report.error = Some(error(e.to_string()));
            return report;
        }
    };
    // A separate writer, so a worker that stops reading cannot stall the deadline.
    let (answer_tx, mut answers) = mpsc::unbounded_channel::<Vec<u8>>();
    let mut first = serde_json::to_vec(run).unwrap_or_default();
    first.push(b'\n');
    tokio::spawn(async move {
        if stdin.write_all(&first).await.is_err() {
            return;
        }
        while let Some(line) = answers.recv().await {
            if stdin.write_all(&line).await.is_err() {
                return;
            }
        }
    });
    let send = |a: CallAnswer| {
        let mut line = serde_json::to_vec(&a).unwrap_or_default();
        line.push(b'\n');
        let _ = answer_tx.send(line);
    };
    let deadline = tokio::time::Instant::now() + settings.kill_after;
    let slots = Semaphore::new(settings.max_in_flight);
    let mut running: FuturesUnordered<
        std::pin::Pin<Box<dyn Future<Output = Finished> + Send + '_>>,
    > = FuturesUnordered::new();
    let mut log_left = settings.max_log_bytes;
    let mut killed = false;
    let mut done: Option<Done> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {
                killed = true;
                break;
            }
            m = messages.recv() => match m {
                // A worker started for this run says so first; nothing to do.
                Some(Ok(ToGateway::Ready)) => {}
                Some(Ok(ToGateway::Call { id, server, tool, arguments })) if server == STATE_SERVER => {
                    // state.get/set: answered like a call, but neither listed nor counted.
                    let call = ToolCall { server, tool, arguments };
                    let handle = &handle;
                    running.push(Box::pin(async move { (id, None, handle(call).await, Duration::ZERO) }));
                }
                Some(Ok(ToGateway::Call { id, server, tool, arguments })) => {
                    let index = report.calls.len();
                    report.calls.push(CallRecord { server: server.clone(), tool: tool.clone(), ok: None, ms: 0 });
                    if index as u32 >= settings.max_calls {
                        report.calls[index].ok = Some(false);
                        send(refusal(id, "limit", format!("a run may make at most {} tool calls", settings.max_calls)));
                        continue;
                    }
                    let call = ToolCall { server, tool, arguments };
                    let (handle, slots) = (&handle, &slots);
                    running.push(Box::pin(async move {
                        let _slot = slots.acquire().await;
                        let started = Instant::now();
                        let r = handle(call).await;
                        (id, Some(index), r, started.elapsed())
                    }));
                }
                Some(Ok(ToGateway::Log { level, text })) => {
                    if text.len() <= log_left {
                        log_left -= text.len();
                        report.logs.push(if level == "log" { text } else { format!("{level}: {text}") });
                    } else {
                        report.truncated = true;
                    }
                }
                Some(Ok(ToGateway::Done(d))) => {
                    done = Some(d);
                    break;
                }
                Some(Err(e)) => {
                    report.error = Some(error(WorkerError::Protocol(e).to_string()));
                    killed = true;
                    break;
                }
                None => break,
            },
            Some((id, index, r, took)) = running.next(), if !running.is_empty() => {
                if let Some(record) = index.map(|i| &mut report.calls[i]) {
                    record.ok = Some(r.is_ok());
                    record.ms = took.as_millis() as u64;
                }
                send(match r {
                    Ok(value) => CallAnswer { id, value: Some(value), error: None },
                    Err(f) => CallAnswer { id, value: None, error: Some(f) },
                });
            }
        }
    }
    drop(running);
    if done.is_some() {
        // The worker exits right after Done; give it a moment, then make sure.
        if tokio::time::timeout(Duration::from_millis(500), child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
        }
    } else {
        let _ = child.start_kill();
    }
    let exit = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    match done {
        Some(d) => {
            report.status = d.status;
            report.result = d.result;
            report.error = d.error;
            report.truncated |= d.truncated;
        }
        None if killed && report.error.is_none() => {
            report.status = "timeout".into();
            report.error = Some(ProgramError {
                name: "TimeoutError".into(),
                message: format!(
                    "the program was stopped after {} ms (its deadline plus the grace period)",
                    settings.kill_after.as_millis()
                ),
                code: None,
                server: None,
                tool: None,
            });
        }
        None if report.error.is_none() => {
            let how = match exit {
                Ok(Ok(s)) => match s.signal() {
                    Some(24) => "it ran out of CPU time (SIGXCPU)".to_string(),
                    Some(sig) => format!("it was killed by signal {sig}"),
                    None => format!("it exited with {s}"),
                },
                _ => "its exit status is unknown".into(),
            };
            report.error = Some(error(format!(
                "the sandbox worker died before the program finished ({how}); the next run gets a new worker"
            )));
        }
        None => {}
    }
    report
}

/// A call's id, its index in the report (`None` for state requests), result and time.
type Finished = (u64, Option<usize>, Result<Value, CallFailure>, Duration);

fn error(message: String) -> ProgramError {
    ProgramError {
        name: "SandboxError".into(),
        message,
        code: None,
        server: None,
        tool: None,
    }
}

fn refusal(id: u64, code: &str, message: String) -> CallAnswer {
    CallAnswer {
        id,
        value: None,
        error: Some(CallFailure {
            code: code.into(),
            message,
        }),
    }
}

/// Worker messages, one per line; a line past `max` or one that does not parse ends it.
async fn read_messages(
    stdout: ChildStdout,
    max: usize,
    tx: mpsc::Sender<Result<ToGateway, ProtocolError>>,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match (&mut reader)
            .take(max as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(n) => n,
            Err(_) => return,
        };
        if n == 0 {
            return;
        }
        if line.last() != Some(&b'\n') && line.len() > max {
            let _ = tx.send(Err(ProtocolError::TooLong { max })).await;
            return;
        }
        let msg = serde_json::from_slice::<ToGateway>(&line).map_err(ProtocolError::Parse);
        let bad = msg.is_err();
        if tx.send(msg).await.is_err() || bad {
            return;
        }
    }
}

/// The first few KB of the worker's stderr go to the debug log; the rest is discarded.
async fn drain_stderr(stderr: tokio::process::ChildStderr) {
    let mut head = Vec::new();
    let mut stderr = stderr;
    let _ = (&mut stderr).take(4096).read_to_end(&mut head).await;
    if !head.is_empty() {
        tracing::debug!(
            "sandbox worker: {}",
            String::from_utf8_lossy(&head).trim_end()
        );
    }
    let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
}
