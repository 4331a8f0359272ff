//! MRTR (SEP-2322) between a client and an upstream that answers `input_required`.
//!
//! A 2026-07-28 upstream that needs the user answers a `tools/call` with `input_required`
//! (keyed input requests and its own `requestState`). What the gateway does with that
//! depends on the client whose call it is:
//!
//! - a 2026-07-28 client takes it itself: the front answers it `input_required` with the
//!   same requests, and a `requestState` that is a gateway handle ([`PendingInputs`],
//!   owned by the caller's principal, one retry) naming the upstream, the tool and the
//!   upstream's own state. The client's retry brings its `inputResponses` and the handle;
//!   the gateway makes the one upstream call that retry stands for;
//! - an older client is asked each request as a server-to-client request on its call
//!   ([`fulfil`]), and the gateway retries the upstream itself, at most [`MAX_ROUNDS`]
//!   times;
//! - a call no client stands behind (a guided operation's, a program's) fails, saying so.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_core::call::{ClientRelay, RelayKind};
use toolgate_core::principal::Principal;

/// Rounds of `input_required` the gateway drives itself for an older client.
pub(crate) const MAX_ROUNDS: usize = 8;

/// How long a handed-out `requestState` stays good.
const PENDING_TTL: Duration = Duration::from_secs(600);

/// Handles kept at most; the oldest goes first.
const MAX_PENDING: usize = 10_000;

/// The prefix of the gateway's own MRTR handles (approval's are `ap-`).
pub(crate) const HANDLE_PREFIX: &str = "in-";

pub(crate) use toolgate_core::call::{MrtrRequest, Resumed};

/// `requestState` handles handed to 2026-07-28 clients, by handle.
#[derive(Default)]
pub(crate) struct PendingInputs {
    pending: Mutex<HashMap<String, (Principal, Resumed, Instant)>>,
}

impl PendingInputs {
    /// Remembers the upstream call `resumed` for `owner`; returns the handle (128 random
    /// bits), which is the only thing the client sees.
    pub(crate) fn remember(&self, owner: &Principal, resumed: Resumed) -> String {
        let handle = format!("{HANDLE_PREFIX}{:032x}", rand::random::<u128>());
        let mut pending = self.pending.lock().expect("pending inputs");
        pending.retain(|_, (_, _, at)| at.elapsed() < PENDING_TTL);
        if pending.len() >= MAX_PENDING {
            let oldest = pending
                .iter()
                .min_by_key(|(_, (_, _, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                pending.remove(&k);
            }
        }
        pending.insert(handle.clone(), (owner.clone(), resumed, Instant::now()));
        handle
    }

    /// Takes the call `handle` names, if `owner` was given it and it is fresh: good for one
    /// retry. A foreign try leaves it for its owner.
    pub(crate) fn take(&self, owner: &Principal, handle: &str) -> Result<Resumed, StateRefused> {
        let mut pending = self.pending.lock().expect("pending inputs");
        match pending.get(handle) {
            Some((o, _, _)) if o != owner => Err(StateRefused::Foreign),
            Some((_, _, at)) if at.elapsed() >= PENDING_TTL => {
                pending.remove(handle);
                Err(StateRefused::Expired)
            }
            Some(_) => Ok(pending.remove(handle).expect("present").1),
            None => Err(StateRefused::Unknown),
        }
    }
}

/// Why a `requestState` handle was not honoured; the message is what the client reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateRefused {
    /// Another principal's handle (the front audits the try; the handle stays its owner's).
    #[error("the requestState was issued to another caller")]
    Foreign,
    /// An input handle past its time.
    #[error("the requestState has expired: call again without it")]
    Expired,
    /// No input handle by that name: never issued, altered or used.
    #[error("the requestState is unknown, altered or already used: call again without it")]
    Unknown,
    /// No parked call by that name (expired parked calls are dropped, so this covers those).
    #[error(
        "the requestState is unknown, altered, expired or already used: call again without it"
    )]
    UnknownParked,
}

/// Calls held open for a 2026-07-28 client while their (older) upstream waits for the
/// answer to its own request: by handle, each owned by a principal. The front keeps its
/// own value in each (the running call and where its next question arrives); this store
/// only owns, expires and hands them back once.
#[derive(Default)]
pub(crate) struct ParkedCalls {
    parked: Mutex<HashMap<String, (Principal, Parked, Instant)>>,
}

/// What the front parks (a running call and its channels).
pub(crate) type Parked = Box<dyn std::any::Any + Send>;

/// The prefix of a parked call's handle.
pub(crate) const PARKED_PREFIX: &str = "pk-";

impl ParkedCalls {
    /// Parks `call` for `owner`; returns its handle. Expired ones are dropped here (their
    /// upstream request then fails, which ends the call).
    pub(crate) fn park(&self, owner: &Principal, call: Parked) -> String {
        let handle = format!("{PARKED_PREFIX}{:032x}", rand::random::<u128>());
        let mut parked = self.parked.lock().expect("parked calls");
        parked.retain(|_, (_, _, at)| at.elapsed() < PENDING_TTL);
        if parked.len() >= MAX_PENDING {
            let oldest = parked
                .iter()
                .min_by_key(|(_, (_, _, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                parked.remove(&k);
            }
        }
        parked.insert(handle.clone(), (owner.clone(), call, Instant::now()));
        handle
    }

    /// Takes the call `handle` names if `owner` parked it; a foreign try leaves it parked
    /// for its owner.
    pub(crate) fn take(&self, owner: &Principal, handle: &str) -> Result<Parked, StateRefused> {
        let mut parked = self.parked.lock().expect("parked calls");
        match parked.get(handle) {
            Some((o, _, _)) if o != owner => Err(StateRefused::Foreign),
            Some(_) => Ok(parked.remove(handle).expect("present").1),
            None => Err(StateRefused::UnknownParked),
        }
    }
}

/// The key a relayed request of `kind` gets in `inputRequests`.
pub(crate) fn input_key(kind: RelayKind) -> &'static str {
    match kind {
        RelayKind::Sampling => "sampling",
        RelayKind::Elicitation => "elicitation",
        RelayKind::Roots => "roots",
    }
}

/// The capability an input request's method needs.
pub(crate) fn kind_of(method: &str) -> Option<RelayKind> {
    match method {
        "sampling/createMessage" => Some(RelayKind::Sampling),
        "elicitation/create" => Some(RelayKind::Elicitation),
        "roots/list" => Some(RelayKind::Roots),
        _ => None,
    }
}

/// Why an upstream's input requests could not all be answered by the client.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unfulfilled {
    /// A method the gateway does not relay to clients.
    #[error("it asked for {method:?}, which the gateway cannot relay")]
    NotRelayable { method: String },
    /// The client did not declare the capability the request needs.
    #[error("it asked for {method}, and the client did not declare that capability")]
    Undeclared { method: String },
    /// The client answered with an error (its text, as the client sent it).
    #[error("{0}")]
    Client(String),
}

/// Asks an older client each of `requests` (`{"key": {"method", "params"}}`) on its call
/// (in turn, or all at once when the relay takes them so) and returns the answers by key;
/// an error names what could not be asked.
pub(crate) async fn fulfil(
    relay: &Arc<dyn ClientRelay>,
    requests: &serde_json::Map<String, Value>,
) -> Result<BTreeMap<String, Value>, Unfulfilled> {
    let mut asks = Vec::new();
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let Some(kind) = kind_of(method) else {
            return Err(Unfulfilled::NotRelayable {
                method: method.to_string(),
            });
        };
        if !relay.supports(kind) {
            relay.refused(kind);
            return Err(Unfulfilled::Undeclared {
                method: method.to_string(),
            });
        }
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        asks.push((key.clone(), kind.method(), params));
    }
    let mut answers = BTreeMap::new();
    if relay.asks_at_once() {
        let all = asks.into_iter().map(|(key, method, params)| {
            let answer = relay.request(method, params);
            async move { Ok::<_, Unfulfilled>((key, answer.await.map_err(Unfulfilled::Client)?)) }
        });
        answers.extend(futures::future::try_join_all(all).await?);
    } else {
        for (key, method, params) in asks {
            let answer = relay.request(method, params).await;
            answers.insert(key, answer.map_err(Unfulfilled::Client)?);
        }
    }
    Ok(answers)
}

/// The kinds an upstream's -32021 (missing required client capability) names.
pub(crate) fn missing_kinds(data: Option<&Value>) -> Vec<RelayKind> {
    let Some(required) = data
        .and_then(|d| d.get("requiredCapabilities"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut kinds = Vec::new();
    for (name, kind) in [
        ("sampling", RelayKind::Sampling),
        ("elicitation", RelayKind::Elicitation),
        ("roots", RelayKind::Roots),
    ] {
        if required.contains_key(name) {
            kinds.push(kind);
        }
    }
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resumed() -> Resumed {
        Resumed {
            server: "s".into(),
            tool: "t".into(),
            state: Some("upstream-state".into()),
        }
    }

    #[test]
    fn a_handle_is_good_once_and_only_for_its_owner() {
        let pending = PendingInputs::default();
        let alice = Principal::key("alice");
        let bob = Principal::key("bob");
        let h = pending.remember(&alice, resumed());
        assert!(h.starts_with(HANDLE_PREFIX) && h.len() == 35);
        assert_eq!(pending.take(&alice, &h), Ok(resumed()));
        assert!(pending
            .take(&alice, &h)
            .unwrap_err()
            .to_string()
            .contains("unknown"));
        let h = pending.remember(&alice, resumed());
        assert!(pending
            .take(&bob, &h)
            .unwrap_err()
            .to_string()
            .contains("another caller"));
        assert_eq!(pending.take(&alice, &h), Ok(resumed()), "still its owner's");
        let h = pending.remember(&alice, resumed());
        assert!(pending.take(&alice, &format!("{h}-TAMPERED")).is_err());
    }

    #[test]
    fn a_missing_capability_error_names_its_kinds() {
        let data = serde_json::json!({"requiredCapabilities": {"sampling": {}, "roots": {}}});
        assert_eq!(
            missing_kinds(Some(&data)),
            vec![RelayKind::Sampling, RelayKind::Roots]
        );
        assert!(missing_kinds(None).is_empty());
    }
}
