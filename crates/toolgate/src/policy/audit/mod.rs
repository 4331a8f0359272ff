//! The audit trail: one JSON line per call (a record when it starts, one when it ends; a
//! refusal is one record), per route decision and per request for a server's resources or
//! prompts, appended to a file that survives restarts. Records name the key, never the key
//! itself, and a keyed hash of the arguments unless the arguments themselves are asked for.
//! Every record is sealed into a hash chain (`chain.rs`, checked by `toolgate audit verify`).
//!
//! Writing never gives up: a failed write (a full disk) is reported to the caller, which
//! refuses what it would have recorded, and the next write tries again; a line torn by the
//! failure is closed before the next record, which says so (`afterTorn`). SIGHUP
//! (`reopen_all`) reopens the file, for log rotation; a new, empty file begins with a
//! `rotation` record naming the file the chain continues. Refusals of unauthenticated requests are bounded: past
//! [`AUTH_RECORDS_PER_WINDOW`] in [`AUTH_WINDOW`], they are counted and written as one
//! summary record.

pub mod chain;
mod file;
mod run;
pub(crate) use file::now_rfc3339;
pub use file::secret_path;
use file::{chain_end, open_append, secret_file};
pub(crate) use run::RunRecord;

/// Why a record could not be written: what it records must then not happen. The message
/// is the file system's (the caller says it is the audit log's).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The file could not be opened (its message with the reasons under it).
    #[error("{0}")]
    Open(String),
    /// The line could not be written.
    #[error("{0}")]
    Write(#[source] std::io::Error),
    /// The line was written but could not be synced to disk.
    #[error("{0}")]
    Sync(#[source] std::io::Error),
}

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// At most this many refusals of unauthenticated requests are written one by one per window.
pub(crate) const AUTH_RECORDS_PER_WINDOW: u64 = 20;
/// The window for [`AUTH_RECORDS_PER_WINDOW`].
pub(crate) const AUTH_WINDOW: Duration = Duration::from_secs(10);

/// Bumped by [`reopen_all`]; each log compares it with the generation it opened.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Makes every open audit log reopen its file before its next record (on SIGHUP, after
/// logrotate moved the file away). The chain continues into the new file.
pub fn reopen_all() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Every open log, for [`flush_all`].
static OPEN: Mutex<Vec<Weak<AuditLog>>> = Mutex::new(Vec::new());

/// Writes what every open log holds back (the summary of counted auth refusals), e.g.
/// before the gateway exits.
pub fn flush_all() {
    let logs: Vec<Arc<AuditLog>> = OPEN
        .lock()
        .expect("audit logs")
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for log in logs {
        log.flush();
    }
}

/// An open audit log.
pub(crate) struct AuditLog {
    path: PathBuf,
    /// Log the call's arguments themselves (they may hold secrets or personal data).
    arguments: bool,
    /// The HMAC secret for argument and task hashes and for the chain.
    secret: Vec<u8>,
    /// The file and the chain's position; the mutex keeps each line whole and in order.
    writer: Mutex<Writer>,
}

struct Writer {
    /// `None` after a reopen failed; the next record tries again.
    file: Option<File>,
    /// Which [`GENERATION`] `file` was opened in.
    generation: u64,
    /// The last record's `seq` and MAC (the next record's `prev`).
    seq: u64,
    prev: String,
    /// The last write failed, maybe part-way: the next record starts on a new line.
    torn: bool,
    /// Why the last write failed, until one succeeds.
    failure: Option<String>,
    auth: AuthWindow,
}

/// Refusals of unauthenticated requests in the current window.
struct AuthWindow {
    started: Instant,
    started_at: String,
    written: u64,
    /// Counted past the limit, per path.
    suppressed: BTreeMap<String, u64>,
}

impl AuthWindow {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            started_at: now_rfc3339(),
            written: 0,
            suppressed: BTreeMap::new(),
        }
    }
}

/// How a call was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Refused,
    Shadow,
    ApprovalDeclined,
    ApprovalUnavailable,
    /// No tool of that name, or its server is down: nothing was run.
    Unavailable,
    /// Asked by MRTR: nothing ran; the retry with the answer is recorded on its own.
    ApprovalRequested,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Refused => "refused",
            Verdict::Shadow => "shadow",
            Verdict::ApprovalDeclined => "approval_declined",
            Verdict::ApprovalUnavailable => "approval_unavailable",
            Verdict::Unavailable => "unavailable",
            Verdict::ApprovalRequested => "approval_requested",
        }
    }
}

/// One call, as the audit log records it.
#[derive(Debug, Clone)]
pub(crate) struct CallRecord<'a> {
    pub session: &'a str,
    pub key: &'a str,
    /// For an access token (`[auth.oauth]`): its principal, `sub:<iss>#<sub>`.
    pub subject: Option<&'a str>,
    pub profile: Option<&'a str>,
    pub surface: &'a str,
    pub server: &'a str,
    pub tool: &'a str,
    /// Links a call's `start` and `end` records.
    pub call_id: &'a str,
    /// `start` (written before the upstream is called), `end`, or `None` for a call that
    /// was refused or never ran (one record).
    pub phase: Option<&'a str>,
    /// Whether the session's profile shows the tool (false: called by exact name).
    pub visible: bool,
    pub tier: &'a str,
    pub arguments: &'a Map<String, Value>,
    pub verdict: Verdict,
    pub reason: Option<String>,
    /// Whether the user approved it (destructive calls under approval).
    pub approved: Option<bool>,
    /// `ok`, `isError` or `error`; `None` when the call never ran.
    pub outcome: Option<&'a str>,
    pub error: Option<String>,
    pub latency: Option<Duration>,
    pub result_tokens: Option<usize>,
    /// The refusal's code (`policy::RefusalKind::code`) when the call was refused or not run.
    pub code: Option<&'a str>,
    /// The program run the call was made from (its `run` record has the same id).
    pub run: Option<&'a str>,
    /// A user-delegated upstream's token for the call (`end` records): `exchanged` (the
    /// caller's access token was exchanged for it, RFC 8693) or `exchanged_cached` (an
    /// earlier exchange's, still valid). Never the token.
    pub upstream_token: Option<&'a str>,
}

/// A handle refused because another principal made it, as the audit log records it.
#[derive(Debug, Clone)]
pub(crate) struct ForeignRecord<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub principal: &'a str,
    pub profile: Option<&'a str>,
    /// What kind of handle: `cursor`, `operation`, `selectionId`, `piiToken`, `runId`.
    pub handle: &'a str,
    /// The handle as presented (only a prefix is written).
    pub handle_text: &'a str,
}

/// One request for a server's resources or prompts, as the audit log records it.
#[derive(Debug, Clone)]
pub(crate) struct AccessRecord<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub profile: Option<&'a str>,
    /// `resources/read`, `resources/subscribe`, `prompts/get` or `completion/complete`.
    pub method: &'a str,
    pub server: &'a str,
    /// The URI or prompt name asked for.
    pub target: &'a str,
}

/// A route decision of the guided surface, as the audit log records it (the task only as
/// its keyed hash).
#[derive(Debug, Clone)]
pub(crate) struct RouteRecord<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub profile: Option<&'a str>,
    pub task: &'a str,
    /// What was decided, as route's answer names it (`select`, `clarify`, ...), or `learned`.
    pub decision: &'a str,
    /// The tool chosen, if one was.
    pub tool: Option<&'a str>,
    /// The tools offered when the decision asks.
    pub candidates: &'a [String],
}

impl AuditLog {
    /// Opens (creating if needed) the log at `path` for appending, and continues its chain.
    /// `secret` keys the hashes and the chain; without one, a random secret is kept beside
    /// the log in `<path>.secret` (mode 0600), made on first use.
    pub(crate) fn open(path: &Path, arguments: bool, secret: Option<&str>) -> Result<Arc<Self>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the audit log folder {}", dir.display()))?;
        }
        let secret = match secret {
            Some(s) => s.as_bytes().to_vec(),
            None => secret_file(&secret_path(path))?,
        };
        let mut file = open_append(path)?;
        let (seq, prev, torn) = chain_end(&mut file);
        let log = Arc::new(Self {
            path: path.to_path_buf(),
            arguments,
            secret,
            writer: Mutex::new(Writer {
                file: Some(file),
                generation: GENERATION.load(Ordering::SeqCst),
                seq,
                prev,
                torn,
                failure: None,
                auth: AuthWindow::new(),
            }),
        });
        let mut open = OPEN.lock().expect("audit logs");
        open.retain(|w| w.strong_count() > 0);
        open.push(Arc::downgrade(&log));
        Ok(log)
    }

    /// Writes the summary of the auth refusals counted so far, and starts a new window.
    pub(crate) fn flush(&self) {
        let mut w = self.writer.lock().expect("audit log");
        let old = std::mem::replace(&mut w.auth, AuthWindow::new());
        if let Some(summary) = auth_summary(&old) {
            let _ = self.append(&mut w, summary, false);
        }
    }

    /// Records a call. `sync` forces it to disk before returning (refused and destructive
    /// calls, whose record must exist before the client hears the answer). An error says why
    /// the record could not be written: what it records must then not happen.
    pub(crate) fn call(&self, r: &CallRecord<'_>, sync: bool) -> Result<(), WriteError> {
        let mut line = json!({
            "time": now_rfc3339(),
            "type": "call",
            "session": r.session,
            "key": r.key,
            "profile": r.profile,
            "surface": r.surface,
            "server": r.server,
            "tool": r.tool,
            "callId": r.call_id,
            "visible": r.visible,
            "tier": r.tier,
            "argumentsHmac": self.keyed(&Value::Object(r.arguments.clone()).to_string()),
            "decision": r.verdict.as_str(),
        });
        if let Some(subject) = r.subject {
            line["subject"] = json!(subject);
        }
        let o = line.as_object_mut().expect("object");
        if let Some(phase) = r.phase {
            o.insert("phase".into(), json!(phase));
        }
        if let Some(code) = r.code {
            o.insert("code".into(), json!(code));
        }
        if let Some(run) = r.run {
            o.insert("run".into(), json!(run));
        }
        if self.arguments {
            o.insert("arguments".into(), Value::Object(r.arguments.clone()));
        }
        if let Some(reason) = &r.reason {
            o.insert("reason".into(), json!(reason));
        }
        if let Some(a) = r.approved {
            o.insert("approved".into(), json!(a));
        }
        if let Some(out) = r.outcome {
            o.insert("outcome".into(), json!(out));
        }
        if let Some(e) = &r.error {
            o.insert("error".into(), json!(e));
        }
        if let Some(l) = r.latency {
            o.insert("latencyMs".into(), json!(l.as_secs_f64() * 1000.0));
        }
        if let Some(t) = r.result_tokens {
            o.insert("resultTokens".into(), json!(t));
        }
        if let Some(t) = r.upstream_token {
            o.insert("upstreamToken".into(), json!(t));
        }
        self.write(line, sync)
    }

    /// Records a route decision: the task's keyed hash and what was chosen or asked.
    pub(crate) fn route(&self, r: &RouteRecord<'_>) {
        let line = json!({
            "time": now_rfc3339(),
            "type": "route",
            "session": r.session,
            "key": r.key,
            "profile": r.profile,
            "surface": "guided",
            "taskHmac": self.keyed(r.task),
            "decision": r.decision,
            "tool": r.tool,
            "candidates": r.candidates,
        });
        // A route decision runs nothing: a failed write is logged, and the next call that
        // needs the log refuses on its own record.
        let _ = self.write(line, false);
    }

    /// Records a request for resources or prompts: allowed, or refused with `refusal`
    /// (synced, as every refusal is). An error: the record could not be written.
    pub(crate) fn access(
        &self,
        r: &AccessRecord<'_>,
        refusal: Option<&str>,
    ) -> Result<(), WriteError> {
        let mut line = json!({
            "time": now_rfc3339(),
            "type": "access",
            "session": r.session,
            "key": r.key,
            "profile": r.profile,
            "method": r.method,
            "server": r.server,
            "target": r.target,
            "decision": if refusal.is_some() { "refused" } else { "allowed" },
        });
        if let Some(reason) = refusal {
            line["reason"] = json!(reason);
        }
        self.write(line, refusal.is_some())
    }

    /// Records a handle (cursor, operationId, selectionId, PII token, runId) presented by a
    /// principal other than the one that made it, and refused. Synced: it is a refusal. The
    /// handle is written redacted (its first characters): the log must not hand it out.
    pub(crate) fn foreign(&self, r: &ForeignRecord<'_>) {
        let line = json!({
            "time": now_rfc3339(),
            "type": "foreign",
            "session": r.session,
            "key": r.key,
            "principal": r.principal,
            "profile": r.profile,
            "handle": r.handle,
            "handleHint": toolgate_core::principal::redacted(r.handle_text),
            "decision": "refused",
        });
        let _ = self.write(line, true);
    }

    /// Records a request turned away for its key (401). Not synced, and bounded: past
    /// [`AUTH_RECORDS_PER_WINDOW`] a window, refusals are only counted, per path, and
    /// written as one summary when the window ends (or the log closes).
    pub(crate) fn rejected_key(&self, key: Option<&str>, reason: &str, path: &str) {
        {
            let mut w = self.writer.lock().expect("audit log");
            if w.auth.written >= AUTH_RECORDS_PER_WINDOW && w.auth.started.elapsed() < AUTH_WINDOW {
                *w.auth.suppressed.entry(path.to_string()).or_default() += 1;
                return;
            }
        }
        let line = json!({
            "time": now_rfc3339(),
            "type": "auth",
            "key": key,
            "path": path,
            "decision": "refused",
            "reason": reason,
        });
        let _ = self.write(line, false);
        self.writer.lock().expect("audit log").auth.written += 1;
    }

    /// Seals `line` into the chain and appends it.
    fn write(&self, line: Value, sync: bool) -> Result<(), WriteError> {
        let mut w = self.writer.lock().expect("audit log");
        self.roll_auth_window(&mut w);
        self.append(&mut w, line, sync)
    }

    /// Ends an auth window that is over, writing its summary if refusals were counted.
    fn roll_auth_window(&self, w: &mut Writer) {
        if w.auth.started.elapsed() < AUTH_WINDOW {
            return;
        }
        let old = std::mem::replace(&mut w.auth, AuthWindow::new());
        if let Some(summary) = auth_summary(&old) {
            let _ = self.append(w, summary, false);
        }
    }

    fn append(&self, w: &mut Writer, line: Value, sync: bool) -> Result<(), WriteError> {
        if w.generation != GENERATION.load(Ordering::SeqCst) || w.file.is_none() {
            w.generation = GENERATION.load(Ordering::SeqCst);
            let file = match open_append(&self.path) {
                Ok(f) => f,
                Err(e) => return Err(self.failed(w, WriteError::Open(format!("{e:#}")))),
            };
            let fresh = file.metadata().is_ok_and(|m| m.len() == 0);
            w.file = Some(file);
            // A new file after a rotation: it begins by naming the file its chain continues,
            // so `verify` can tell a rotated log from one whose head was cut.
            if fresh && w.seq > 0 {
                let rotation = json!({
                    "time": now_rfc3339(),
                    "type": chain::ROTATION,
                    "continues": self.path.display().to_string(),
                    "continuesSeq": w.seq,
                });
                self.seal_and_write(w, rotation, false)?;
            }
        }
        self.seal_and_write(w, line, sync)
    }

    /// Seals `line` as the chain's next record and writes it to the open file.
    fn seal_and_write(
        &self,
        w: &mut Writer,
        mut line: Value,
        sync: bool,
    ) -> Result<(), WriteError> {
        let o = line.as_object_mut().expect("records are objects");
        o.insert("seq".into(), json!(w.seq + 1));
        o.insert("prev".into(), json!(w.prev));
        if w.torn {
            // What the failed write left before this record is torn, and only that.
            o.insert(chain::AFTER_TORN.into(), json!(true));
        }
        let (sealed, tag) = chain::seal(&self.secret, &line.to_string());
        let mut text = String::with_capacity(sealed.len() + 2);
        if w.torn {
            text.push('\n');
        }
        text.push_str(&sealed);
        text.push('\n');
        let file = w.file.as_mut().expect("opened by append");
        // A full line in one write on an O_APPEND file: no interleaving, no buffer to lose.
        if let Err(e) = file.write_all(text.as_bytes()) {
            w.torn = true;
            return Err(self.failed(w, WriteError::Write(e)));
        }
        // The line is in the file (readers see it) even if the sync below fails: the chain
        // moves on past it, or the next record would repeat its `seq`.
        w.torn = false;
        w.seq += 1;
        w.prev = tag;
        if sync {
            if let Err(e) = file.sync_data() {
                return Err(self.failed(w, WriteError::Sync(e)));
            }
        }
        if w.failure.take().is_some() {
            tracing::warn!("the audit log {} can be written again", self.path.display());
        }
        Ok(())
    }

    fn failed(&self, w: &mut Writer, e: WriteError) -> WriteError {
        if w.failure.is_none() {
            tracing::error!("cannot write the audit log {}: {e}", self.path.display());
        }
        w.failure = Some(e.to_string());
        e
    }

    /// Why the last write failed, until a write succeeds again.
    #[cfg(test)]
    pub(crate) fn failure(&self) -> Option<String> {
        self.writer.lock().expect("audit log").failure.clone()
    }

    /// A keyed hash (HMAC-SHA256 under the log's secret): equal inputs are recognisable in
    /// the log, and a short secret in the arguments cannot be recovered by trying values.
    fn keyed(&self, text: &str) -> String {
        chain::mac(&self.secret, text.as_bytes())
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if self.writer.lock().is_ok() {
            self.flush();
        }
    }
}

/// The summary of an auth window's counted refusals, if any were counted.
fn auth_summary(window: &AuthWindow) -> Option<Value> {
    let total: u64 = window.suppressed.values().sum();
    (total > 0).then(|| {
        json!({
            "time": now_rfc3339(),
            "type": "auth",
            "decision": "refused",
            "aggregated": total,
            "since": window.started_at,
            "paths": window.suppressed,
            "reason": format!(
                "more than {AUTH_RECORDS_PER_WINDOW} requests with a missing or wrong key in {} s: counted, not recorded one by one",
                AUTH_WINDOW.as_secs()
            ),
        })
    })
}

#[cfg(test)]
mod tests;
