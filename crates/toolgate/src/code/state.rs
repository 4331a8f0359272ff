//! `state.get/set` for programs: small JSON values kept per principal (the caller's API key,
//! else the gateway's local identity) between runs, so a run can pick up where an earlier one stopped. Bounded in
//! size and count, and expiring.
//!
//! With a durable store (`[store]` embedded or redis) the store holds the values (one
//! sealed record per principal and key, so replicas and restarts see the same state);
//! memory then only counts this process's keys for the bound.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_core::principal::Principal;
use toolgate_core::store::{Kind, Lookup, Record, Store};
use toolgate_sandbox::protocol::CallFailure;

/// A value unused this long is forgotten.
pub(crate) const STATE_TTL: Duration = Duration::from_secs(3600);
/// Largest value (as JSON) and most keys per principal.
pub(crate) const MAX_VALUE_BYTES: usize = 64 << 10;
pub(crate) const MAX_KEYS: usize = 64;
/// Longest key.
const MAX_KEY_BYTES: usize = 128;

/// One principal's values: key -> (value, last use).
type Values = HashMap<String, (Value, Instant)>;

/// Every principal's state.
#[derive(Default)]
pub(crate) struct StateStore {
    /// Owner -> its values (with a durable store: the keys this process set, for the bound).
    owners: Mutex<HashMap<Principal, Values>>,
    /// Where values live when configured; `None`: in `owners`.
    durable: Option<Arc<dyn Store>>,
}

/// A store failure, as the program sees it.
fn unavailable(e: toolgate_core::store::StoreFault) -> CallFailure {
    CallFailure {
        code: "unavailable".into(),
        message: e.to_string(),
    }
}

/// The store's id of one owner's key (the owner is part of it: keys repeat across owners).
fn record_id(owner: &Principal, key: &str) -> String {
    format!("{}\u{1f}{key}", owner.as_str())
}

fn fail(message: String) -> CallFailure {
    CallFailure {
        code: "limit".into(),
        message,
    }
}

impl StateStore {
    /// Values kept in `durable` if given, else in memory.
    pub(crate) fn new(durable: Option<Arc<dyn Store>>) -> Self {
        Self {
            owners: Mutex::default(),
            durable,
        }
    }

    /// Answers `state.get` (`op` "get") or `state.set` ("set"); `args` is `{key, value?}`.
    pub(crate) fn request(
        &self,
        owner: &Principal,
        op: &str,
        args: &Value,
    ) -> Result<Value, CallFailure> {
        let key = match args.get("key").and_then(Value::as_str) {
            Some(k) if !k.is_empty() && k.len() <= MAX_KEY_BYTES => k,
            _ => {
                return Err(CallFailure {
                    code: "invalid_arguments".into(),
                    message: format!("state keys are strings of 1 to {MAX_KEY_BYTES} bytes"),
                })
            }
        };
        if let Some(store) = &self.durable {
            return self.request_stored(store.as_ref(), owner, op, key, args);
        }
        let mut owners = self.owners.lock().expect("state");
        let map = owners.entry(owner.clone()).or_default();
        map.retain(|_, (_, used)| used.elapsed() <= STATE_TTL);
        match op {
            "get" => Ok(map.get_mut(key).map_or(Value::Null, |(v, used)| {
                *used = Instant::now();
                v.clone()
            })),
            "set" => {
                let value = args.get("value").cloned().unwrap_or(Value::Null);
                if value.is_null() {
                    map.remove(key);
                    return Ok(Value::Null);
                }
                let size = value.to_string().len();
                if size > MAX_VALUE_BYTES {
                    return Err(fail(format!(
                        "a state value is at most {MAX_VALUE_BYTES} bytes as JSON; this one is {size}"
                    )));
                }
                if !map.contains_key(key) && map.len() >= MAX_KEYS {
                    return Err(fail(format!(
                        "a caller (its API key) keeps at most {MAX_KEYS} state keys; set one to null to free it"
                    )));
                }
                map.insert(key.to_string(), (value, Instant::now()));
                Ok(Value::Null)
            }
            _ => Err(fail(format!("no state operation {op:?}"))),
        }
    }

    /// `request` over the durable store: it holds the values; memory counts the keys.
    fn request_stored(
        &self,
        store: &dyn Store,
        owner: &Principal,
        op: &str,
        key: &str,
        args: &Value,
    ) -> Result<Value, CallFailure> {
        let id = record_id(owner, key);
        let now = toolgate_core::store::now_ms();
        match op {
            "get" => match store
                .lookup(Kind::State, &id, owner.as_str(), now)
                .map_err(unavailable)?
            {
                Lookup::Found(r) => {
                    let _ = store.touch(
                        Kind::State,
                        &id,
                        toolgate_core::store::expiry_after(STATE_TTL),
                    );
                    Ok(serde_json::from_slice(&r.value).unwrap_or(Value::Null))
                }
                _ => Ok(Value::Null),
            },
            "set" => {
                let value = args.get("value").cloned().unwrap_or(Value::Null);
                let mut owners = self.owners.lock().expect("state");
                let map = owners.entry(owner.clone()).or_default();
                map.retain(|_, (_, used)| used.elapsed() <= STATE_TTL);
                if value.is_null() {
                    store.remove(Kind::State, &id, now).map_err(unavailable)?;
                    map.remove(key);
                    return Ok(Value::Null);
                }
                let bytes = value.to_string().into_bytes();
                if bytes.len() > MAX_VALUE_BYTES {
                    return Err(fail(format!(
                        "a state value is at most {MAX_VALUE_BYTES} bytes as JSON; this one is {}",
                        bytes.len()
                    )));
                }
                if !map.contains_key(key) && map.len() >= MAX_KEYS {
                    return Err(fail(format!(
                        "a caller (its API key) keeps at most {MAX_KEYS} state keys; set one to null to free it"
                    )));
                }
                let record = Record {
                    owner: owner.as_str().to_string(),
                    expires_ms: toolgate_core::store::expiry_after(STATE_TTL),
                    value: bytes,
                };
                store.put(Kind::State, &id, &record).map_err(unavailable)?;
                map.insert(key.to_string(), (Value::Null, Instant::now()));
                Ok(Value::Null)
            }
            _ => Err(fail(format!("no state operation {op:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn with_a_durable_store_state_survives_the_process_and_stays_its_owners() {
        let dir = tempfile::tempdir().unwrap();
        let open = || -> Arc<dyn Store> {
            Arc::new(
                toolgate_core::store::EmbeddedStore::open(
                    &dir.path().join("s.redb"),
                    toolgate_core::store::Sealer::new([5; 32]),
                )
                .unwrap(),
            )
        };
        let (a, b) = (Principal::key("a"), Principal::key("b"));
        {
            let s = StateStore::new(Some(open()));
            s.request(&a, "set", &json!({"key": "k", "value": {"page": 3}}))
                .unwrap();
            s.request(&a, "set", &json!({"key": "gone", "value": 1}))
                .unwrap();
            s.request(&a, "set", &json!({"key": "gone", "value": null}))
                .unwrap();
        }
        let s = StateStore::new(Some(open()));
        assert_eq!(
            s.request(&a, "get", &json!({"key": "k"})).unwrap(),
            json!({"page": 3})
        );
        assert_eq!(
            s.request(&a, "get", &json!({"key": "gone"})).unwrap(),
            Value::Null
        );
        assert_eq!(
            s.request(&b, "get", &json!({"key": "k"})).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn set_get_delete_and_bounds() {
        let s = StateStore::default();
        assert_eq!(
            s.request(&Principal::key("a"), "get", &json!({"key": "k"}))
                .unwrap(),
            Value::Null
        );
        s.request(
            &Principal::key("a"),
            "set",
            &json!({"key": "k", "value": {"page": 2}}),
        )
        .unwrap();
        assert_eq!(
            s.request(&Principal::key("a"), "get", &json!({"key": "k"}))
                .unwrap(),
            json!({"page": 2})
        );
        assert_eq!(
            s.request(&Principal::key("b"), "get", &json!({"key": "k"}))
                .unwrap(),
            Value::Null
        );
        let big = json!({"key": "x", "value": "y".repeat(MAX_VALUE_BYTES)});
        assert_eq!(
            s.request(&Principal::key("a"), "set", &big)
                .unwrap_err()
                .code,
            "limit"
        );
        for i in 0..MAX_KEYS - 1 {
            s.request(
                &Principal::key("a"),
                "set",
                &json!({"key": i.to_string(), "value": 1}),
            )
            .unwrap();
        }
        assert!(s
            .request(
                &Principal::key("a"),
                "set",
                &json!({"key": "more", "value": 1})
            )
            .is_err());
        s.request(
            &Principal::key("a"),
            "set",
            &json!({"key": "k", "value": null}),
        )
        .unwrap();
        s.request(
            &Principal::key("a"),
            "set",
            &json!({"key": "more", "value": 1}),
        )
        .unwrap();
        assert_eq!(
            s.request(&Principal::key("a"), "get", &json!({}))
                .unwrap_err()
                .code,
            "invalid_arguments"
        );
    }
}
