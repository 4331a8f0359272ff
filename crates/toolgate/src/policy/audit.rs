//! The audit trail: one JSON line per call (allowed or refused), per route decision and per
//! request for a server's resources or prompts, appended to a file that survives restarts.
//! Records name the key, never the key itself, and the arguments' hash unless the arguments
//! themselves are asked for.

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An open audit log.
pub struct AuditLog {
    /// Opened in append mode, so concurrent gateways and restarts never overwrite lines;
    /// the mutex keeps each line whole.
    file: Mutex<File>,
    /// Log the call's arguments themselves (they may hold secrets or personal data).
    arguments: bool,
    /// The last write error, if writing failed: calls are then refused (see `Policy::check`),
    /// since they must not run unrecorded.
    failure: Mutex<Option<String>>,
}

/// How a call was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Refused,
    Shadow,
    ApprovalDeclined,
    ApprovalUnavailable,
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
            Verdict::ApprovalRequested => "approval_requested",
        }
    }
}

/// One call, as the audit log records it.
#[derive(Debug, Clone)]
pub struct CallRecord<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub profile: Option<&'a str>,
    pub surface: &'a str,
    pub server: &'a str,
    pub tool: &'a str,
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
}

/// A handle refused because another principal made it, as the audit log records it.
#[derive(Debug, Clone)]
pub struct ForeignRecord<'a> {
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
pub struct AccessRecord<'a> {
    pub session: &'a str,
    pub key: &'a str,
    pub profile: Option<&'a str>,
    /// `resources/read`, `resources/subscribe`, `prompts/get` or `completion/complete`.
    pub method: &'a str,
    pub server: &'a str,
    /// The URI or prompt name asked for.
    pub target: &'a str,
}

impl AuditLog {
    /// Opens (creating if needed) the log at `path` for appending.
    pub fn open(path: &Path, arguments: bool) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the audit log folder {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| {
                format!(
                    "cannot open the audit log {} (policy.audit.path)",
                    path.display()
                )
            })?;
        Ok(Self {
            file: Mutex::new(file),
            arguments,
            failure: Mutex::new(None),
        })
    }

    /// Records a call. `sync` forces it to disk before returning (refused and destructive
    /// calls, whose record must exist before the client hears the answer).
    pub fn call(&self, r: &CallRecord<'_>, sync: bool) {
        let mut line = json!({
            "time": now_rfc3339(),
            "type": "call",
            "session": r.session,
            "key": r.key,
            "profile": r.profile,
            "surface": r.surface,
            "server": r.server,
            "tool": r.tool,
            "visible": r.visible,
            "tier": r.tier,
            "argumentsSha256": hash_json(&Value::Object(r.arguments.clone())),
            "decision": r.verdict.as_str(),
        });
        let o = line.as_object_mut().expect("object");
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
        self.write(&line, sync);
    }

    /// Records a route decision: the task's hash and what was chosen or asked.
    #[allow(clippy::too_many_arguments)]
    pub fn route(
        &self,
        session: &str,
        key: &str,
        profile: Option<&str>,
        task: &str,
        decision: &str,
        tool: Option<&str>,
        candidates: &[String],
    ) {
        let line = json!({
            "time": now_rfc3339(),
            "type": "route",
            "session": session,
            "key": key,
            "profile": profile,
            "surface": "guided",
            "taskSha256": hex::encode(Sha256::digest(task.as_bytes())),
            "decision": decision,
            "tool": tool,
            "candidates": candidates,
        });
        self.write(&line, false);
    }

    /// Records a request for resources or prompts: allowed, or refused with `refusal`
    /// (synced, as every refusal is).
    pub fn access(&self, r: &AccessRecord<'_>, refusal: Option<&str>) {
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
        self.write(&line, refusal.is_some());
    }

    /// Records a handle (cursor, operationId, selectionId, PII token, runId) presented by a
    /// principal other than the one that made it, and refused. Synced: it is a refusal. The
    /// handle is written redacted (its first characters): the log must not hand it out.
    pub fn foreign(&self, r: &ForeignRecord<'_>) {
        let line = json!({
            "time": now_rfc3339(),
            "type": "foreign",
            "session": r.session,
            "key": r.key,
            "principal": r.principal,
            "profile": r.profile,
            "handle": r.handle,
            "handleHint": crate::principal::redacted(r.handle_text),
            "decision": "refused",
        });
        self.write(&line, true);
    }

    /// Records a request turned away for its key (401). Synced: it is a refusal.
    pub fn rejected_key(&self, key: Option<&str>, reason: &str, path: &str) {
        let line = json!({
            "time": now_rfc3339(),
            "type": "auth",
            "key": key,
            "path": path,
            "decision": "refused",
            "reason": reason,
        });
        self.write(&line, true);
    }

    fn write(&self, line: &Value, sync: bool) {
        let mut text = line.to_string();
        text.push('\n');
        let mut file = self.file.lock().expect("audit log");
        // A full line in one write on an O_APPEND file: no torn lines, no buffering to lose.
        let written =
            file.write_all(text.as_bytes()).and_then(
                |()| {
                    if sync {
                        file.sync_data()
                    } else {
                        Ok(())
                    }
                },
            );
        if let Err(e) = written {
            tracing::error!("cannot write the audit log: {e}");
            *self.failure.lock().expect("audit failure") = Some(e.to_string());
        }
    }

    /// Why the log cannot be written, once a write has failed.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().expect("audit failure").clone()
    }
}

/// SHA-256 of a JSON value's text, as hex.
pub fn hash_json(v: &Value) -> String {
    hex::encode(Sha256::digest(v.to_string().as_bytes()))
}

/// The current UTC time as RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d)
}

fn rfc3339(d: Duration) -> String {
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_is_remembered() {
        // /dev/full accepts the open and fails every write (ENOSPC), like a full disk.
        let Ok(log) = AuditLog::open(Path::new("/dev/full"), false) else {
            return;
        };
        assert!(log.failure().is_none());
        log.route("s", "k", None, "task", "clarify", None, &[]);
        assert!(log.failure().is_some());
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(Duration::ZERO), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Duration::from_millis(1_709_251_199_123)),
            "2024-02-29T23:59:59.123Z"
        );
    }

    #[test]
    fn records_append_across_reopens() {
        let dir = std::env::temp_dir().join(format!("tg-audit-{}", crate::guided::random_hex(6)));
        let path = dir.join("a.jsonl");
        let args = serde_json::from_value(json!({"secret": "s3"})).unwrap();
        let rec = CallRecord {
            session: "s",
            key: "ci",
            profile: None,
            surface: "direct",
            server: "alpha",
            tool: "echo",
            visible: true,
            tier: "read",
            arguments: &args,
            verdict: Verdict::Refused,
            reason: Some("no".into()),
            approved: None,
            outcome: None,
            error: None,
            latency: None,
            result_tokens: None,
        };
        AuditLog::open(&path, false).unwrap().call(&rec, true);
        AuditLog::open(&path, true).unwrap().call(&rec, false);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["decision"], "refused");
        assert!(
            lines[0].get("arguments").is_none(),
            "arguments only when asked"
        );
        assert_eq!(lines[1]["arguments"]["secret"], "s3");
        assert_eq!(lines[0]["argumentsSha256"], lines[1]["argumentsSha256"]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
