//! `state.get/set` for programs: small JSON values kept per principal (the caller's API key,
//! else the gateway's local identity) between runs, so a run can pick up where an earlier one stopped. Bounded in
//! size and count, and expiring.

use crate::principal::Principal;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use toolgate_sandbox::protocol::CallFailure;

/// A value unused this long is forgotten.
pub const STATE_TTL: Duration = Duration::from_secs(3600);
/// Largest value (as JSON) and most keys per principal.
pub const MAX_VALUE_BYTES: usize = 64 << 10;
pub const MAX_KEYS: usize = 64;
/// Longest key.
const MAX_KEY_BYTES: usize = 128;

/// One principal's values: key -> (value, last use).
type Values = HashMap<String, (Value, Instant)>;

/// Every principal's state.
#[derive(Default)]
pub struct StateStore {
    /// Owner -> its values.
    owners: Mutex<HashMap<Principal, Values>>,
}

fn fail(message: String) -> CallFailure {
    CallFailure {
        code: "limit".into(),
        message,
    }
}

impl StateStore {
    /// Answers `state.get` (`op` "get") or `state.set` ("set"); `args` is `{key, value?}`.
    pub fn request(&self, owner: &Principal, op: &str, args: &Value) -> Result<Value, CallFailure> {
        let key = match args.get("key").and_then(Value::as_str) {
            Some(k) if !k.is_empty() && k.len() <= MAX_KEY_BYTES => k,
            _ => {
                return Err(CallFailure {
                    code: "invalid_arguments".into(),
                    message: format!("state keys are strings of 1 to {MAX_KEY_BYTES} bytes"),
                })
            }
        };
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
