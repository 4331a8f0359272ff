//! Approval of destructive calls: the policy decides when to ask; the front asks the user
//! through MCP elicitation (the client's own confirmation UI) behind the [`Approver`] trait,
//! so nothing outside `front/` speaks rmcp.

use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use toolgate_core::principal::Principal;

/// How long a 2026-07-28 client has to come back with the user's answer.
pub const PENDING_TTL: Duration = Duration::from_secs(600);
/// Questions waiting for an answer, at most (the oldest go first).
const MAX_PENDING: usize = 4096;

/// How every approval `requestState` begins (the gateway's other MRTR handles do not).
pub const STATE_PREFIX: &str = "ap-";

/// Approvals asked the 2026-07-28 way (MRTR): the `requestState` handed to the client
/// names one, bound to the principal that asked and the question; the retry that brings
/// the answer takes it, once, so one approval runs one call.
#[derive(Default)]
pub struct PendingApprovals {
    asked: Mutex<HashMap<String, (Principal, String, Instant)>>,
}

impl PendingApprovals {
    /// Remembers `question` for `owner`; returns the opaque `requestState` (128 bits).
    pub fn ask(&self, owner: &Principal, question: &str) -> String {
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
            (owner.clone(), question.to_string(), Instant::now()),
        );
        state
    }

    /// Takes the approval `state` names if `owner` asked exactly `question` under it and it
    /// is still fresh. Taken either way: a state is good for one retry.
    pub fn take(&self, owner: &Principal, state: &str, question: &str) -> Result<(), String> {
        let entry = self.asked.lock().expect("pending approvals").remove(state);
        match entry {
            Some((o, q, at)) if o == *owner && q == question && at.elapsed() < PENDING_TTL => {
                Ok(())
            }
            Some((o, _, _)) if o != *owner => {
                Err("the requestState was issued to another caller".into())
            }
            Some(_) => Err("the requestState was issued for another call, or has expired".into()),
            None => {
                Err("the requestState is unknown or was already used: call again without it".into())
            }
        }
    }
}

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
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
pub trait Approver: Send + Sync {
    fn ask(&self, message: String) -> BoxFuture<'_, Answer>;
}

/// The question put to the user.
pub fn question(
    tool: &str,
    key: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let mut args = serde_json::Value::Object(arguments.clone()).to_string();
    if args.len() > 500 {
        let cut = (0..=500)
            .rev()
            .find(|&i| args.is_char_boundary(i))
            .unwrap_or(0);
        args.truncate(cut);
        args.push('…');
    }
    format!("Allow the destructive tool {tool} to run (key {key:?})?\nArguments: {args}")
}

/// The refusal the model sees when the answer was not an acceptance.
pub fn refusal(tool: &str, answer: &Answer) -> String {
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
