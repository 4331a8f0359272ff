//! Approval of destructive calls: the policy decides when to ask; the front asks the user
//! through MCP elicitation (the client's own confirmation UI) behind the [`Approver`] trait,
//! so nothing outside `front/` speaks rmcp.

use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use toolgate_core::principal::Principal;

/// How long a 2026-07-28 client has to come back with the user's answer.
pub(crate) const PENDING_TTL: Duration = Duration::from_secs(600);
/// Questions waiting for an answer, at most (the oldest go first).
const MAX_PENDING: usize = 4096;

/// How every approval `requestState` begins (the gateway's other MRTR handles do not).
pub(crate) const STATE_PREFIX: &str = "ap-";

/// Approvals asked the 2026-07-28 way (MRTR): the `requestState` handed to the client
/// names one, bound to the principal that asked and to the call's [`Question::binding`]
/// (the tool and the sha256 of its exact arguments); the retry that brings the answer
/// takes it, once, so one approval runs one call with exactly the arguments shown.
#[derive(Default)]
pub(crate) struct PendingApprovals {
    asked: Mutex<HashMap<String, (Principal, String, Instant)>>,
}

/// Why an approval's `requestState` was not honoured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotTaken {
    /// Another principal's: left to its owner, and audited as `foreign`.
    Foreign(String),
    /// Unknown, used, expired, or issued for another call (the owner's own).
    Stale(String),
}

impl std::fmt::Display for NotTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Foreign(m) | Self::Stale(m) => f.write_str(m),
        }
    }
}

impl PendingApprovals {
    /// Remembers `binding` for `owner`; returns the opaque `requestState` (128 bits).
    pub(crate) fn ask(&self, owner: &Principal, binding: &str) -> String {
        let state = format!("{STATE_PREFIX}{:032x}", rand::random::<u128>());
        let mut asked = self.asked.lock().expect("pending approvals");
        asked.retain(|_, (_, _, at)| at.elapsed() < PENDING_TTL);
        if asked.len() >= MAX_PENDING {
            let oldest = asked
                .iter()
                .min_by_key(|(_, (_, _, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                asked.remove(&k);
            }
        }
        asked.insert(
            state.clone(),
            (owner.clone(), binding.to_string(), Instant::now()),
        );
        state
    }

    /// Refuses `state` when another principal asked under it (the state stays its
    /// owner's): checked before anything else of the call, so it is audited as `foreign`.
    pub(crate) fn check_owner(&self, owner: &Principal, state: &str) -> Result<(), NotTaken> {
        let asked = self.asked.lock().expect("pending approvals");
        match asked.get(state) {
            Some((o, _, _)) if o != owner => Err(NotTaken::Foreign(
                "the requestState was issued to another caller (a different API key or user): call again without it".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Takes the approval `state` names if `owner` asked under it for exactly `binding`
    /// and it is still fresh. The owner's state is taken either way (good for one retry);
    /// another principal's is left to its owner.
    pub(crate) fn take(
        &self,
        owner: &Principal,
        state: &str,
        binding: &str,
    ) -> Result<(), NotTaken> {
        self.check_owner(owner, state)?;
        let entry = self.asked.lock().expect("pending approvals").remove(state);
        match entry {
            Some((_, b, at)) if b == binding && at.elapsed() < PENDING_TTL => Ok(()),
            Some((_, b, _)) if b != binding => Err(NotTaken::Stale(
                "the requestState was issued for this tool with other arguments: an approval runs exactly the arguments shown; call again without it to ask for these".into(),
            )),
            Some(_) => Err(NotTaken::Stale("the requestState has expired: call again without it".into())),
            None => Err(NotTaken::Stale(
                "the requestState is unknown or was already used: call again without it".into(),
            )),
        }
    }
}

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Accepted,
    Declined,
    Cancelled,
    /// The client did not declare the elicitation capability: there is nobody to ask.
    Unsupported,
    /// Asking failed (transport closed, timeout).
    Failed(String),
    /// Asked the 2026-07-28 way (MRTR): the client is to retry the same call with the
    /// user's answer; this round runs nothing.
    InputRequired,
}

/// Asks the user of one session to confirm something.
pub(crate) trait Approver: Send + Sync {
    fn ask(&self, question: Question) -> BoxFuture<'_, Answer>;
}

/// Longest value shown whole in a question; a longer one is folded (its start, its end
/// and its length), never dropped.
const SHOWN_CHARS: usize = 160;

/// One approval question: the text shown, and what an answer to it binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    /// Every argument shown (long values folded), and the binding's digest.
    pub text: String,
    /// The tool and the sha256 of its arguments' canonical JSON: a retry's approval
    /// runs only a call whose binding is the same.
    pub binding: String,
}

/// The question put to the user about `tool` called with `arguments`.
pub(crate) fn question(
    tool: &str,
    key: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> Question {
    let canonical = canonical_json(&serde_json::Value::Object(arguments.clone()));
    let digest = digest_hex(canonical.as_bytes());
    let mut text = format!(
        "Allow the destructive tool {tool} to run (key {key:?})?\nArguments (sha256 of their canonical JSON: {digest}):"
    );
    if arguments.is_empty() {
        text.push_str(" none");
    }
    let mut names: Vec<&String> = arguments.keys().collect();
    names.sort();
    for name in names {
        text.push_str(&format!(
            "\n  {}: {}",
            fold(&serde_json::Value::String(name.clone())),
            fold(&arguments[name])
        ));
    }
    Question {
        text,
        binding: format!("{tool}\n{digest}"),
    }
}

/// A value shown whole when short, else its start and end with its length: a string's
/// characters, anything else's characters of JSON.
fn fold(value: &serde_json::Value) -> String {
    let (text, what) = match value {
        serde_json::Value::String(s) => (s.clone(), "characters"),
        other => (canonical_json(other), "characters of JSON"),
    };
    let chars = text.chars().count();
    if chars <= SHOWN_CHARS {
        return canonical_json(value);
    }
    let head: String = text.chars().take(SHOWN_CHARS * 3 / 4).collect();
    let tail: String = text.chars().skip(chars - SHOWN_CHARS / 4).collect();
    let quoted = |s: String| match value {
        // Quoted and escaped as JSON, so a value cannot forge a line of the question.
        serde_json::Value::String(_) => serde_json::Value::String(s).to_string(),
        _ => serde_json::Value::String(s)
            .to_string()
            .trim_matches('"')
            .to_string(),
    };
    format!("{}…{} ({chars} {what}, folded)", quoted(head), quoted(tail))
}

/// Canonical JSON: object keys sorted (by their UTF-8 bytes), no whitespace, at every level.
pub(crate) fn canonical_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&o[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Lower-case hex sha256 of `bytes`.
pub(crate) fn digest_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The refusal the model sees when the answer was not an acceptance.
pub(crate) fn refusal(tool: &str, answer: &Answer) -> String {
    match answer {
        Answer::Accepted => String::new(),
        Answer::Declined => format!("{tool} was not run: the user declined it."),
        Answer::Cancelled => format!("{tool} was not run: the user dismissed the confirmation."),
        Answer::Unsupported => format!(
            "{tool} was not run: it is destructive and this gateway asks the user before such calls, but this client cannot show a confirmation (no elicitation capability). Use a client that supports elicitation, or ask an administrator to change the key's approval setting."
        ),
        Answer::Failed(e) => format!("{tool} was not run: the confirmation could not be obtained ({e})."),
        Answer::InputRequired => format!("{tool} was not run yet: the user's confirmation was requested; retry the call with the answer."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_question_shows_every_argument_and_binds_the_exact_ones() {
        let long = "n".repeat(600);
        let q = question(
            "files/delete",
            "k",
            &args(json!({"path": "/tmp/a", "note": long})),
        );
        assert!(q.text.contains("\"path\": \"/tmp/a\""), "{}", q.text);
        assert!(
            q.text.contains("600 characters, folded") && !q.text.contains(&long),
            "{}",
            q.text
        );
        let canonical = format!("{{\"note\":\"{long}\",\"path\":\"/tmp/a\"}}");
        assert!(
            q.text.contains(&digest_hex(canonical.as_bytes())),
            "{}",
            q.text
        );
        // Same arguments in another order: the same binding; one more argument: another.
        let same = question(
            "files/delete",
            "k",
            &args(json!({"note": long, "path": "/tmp/a"})),
        );
        assert_eq!(q.binding, same.binding);
        let other = question(
            "files/delete",
            "k",
            &args(json!({"note": long, "path": "/"})),
        );
        assert_ne!(q.binding, other.binding);
        // A value cannot forge a line of its own.
        let forged = question("t", "k", &args(json!({"a": "x\n  path: \"/safe\""})));
        assert_eq!(forged.text.lines().count(), 3, "{}", forged.text);
    }

    #[test]
    fn another_principals_retry_leaves_the_approval_to_its_owner() {
        let p = PendingApprovals::default();
        let (a, b) = (Principal::key("a"), Principal::key("b"));
        let state = p.ask(&a, "t\nx");
        assert!(matches!(
            p.take(&b, &state, "t\nx"),
            Err(NotTaken::Foreign(_))
        ));
        assert!(matches!(
            p.take(&a, &state, "t\ny"),
            Err(NotTaken::Stale(_))
        ));
        let state = p.ask(&a, "t\nx");
        assert_eq!(p.take(&a, &state, "t\nx"), Ok(()));
        assert!(matches!(
            p.take(&a, &state, "t\nx"),
            Err(NotTaken::Stale(_))
        ));
    }
}
