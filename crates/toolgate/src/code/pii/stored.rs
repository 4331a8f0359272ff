//! PII tokens in the durable store (`[store]` embedded or redis): each token written
//! (sealed) when it is made or used again, and read back when a token this process does
//! not hold is passed back (after a restart, or made by another replica).

use super::{Entry, Vault, TOKEN, TOKEN_TTL};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use toolgate_core::principal::{Principal, Refused};
use toolgate_core::store::{Kind, Lookup, Record};

/// A token as stored: its value and the servers it came from.
type StoredToken = (String, BTreeSet<String>);

impl Vault {
    /// Writes `token` through; a failure keeps it in this process only, and says so.
    pub(super) fn keep_stored(&self, token: &str, entry: &Entry) {
        let Some(store) = &self.durable else { return };
        let value: StoredToken = (entry.value.clone(), entry.origins.clone());
        let record = Record {
            owner: entry.owner.as_str().to_string(),
            expires_ms: toolgate_core::store::expiry_after(TOKEN_TTL),
            value: serde_json::to_vec(&value).expect("strings serialize"),
        };
        if let Err(e) = store.put(Kind::Pii, token, &record) {
            tracing::warn!("a PII token was kept in this process only: {e}");
        }
    }

    /// Takes in, from the durable store, the tokens in `text` this process does not hold,
    /// so the lookup that follows finds them. A foreign one is refused here (the store
    /// knows only that it is not `owner`'s); unknown and expired ones are left for the
    /// lookup to report.
    pub(super) fn adopt_stored(&self, owner: &Principal, text: &str) -> Result<(), Refused> {
        let Some(store) = &self.durable else {
            return Ok(());
        };
        let missing: Vec<String> = {
            let tokens = self.tokens.lock().expect("pii tokens");
            TOKEN
                .find_iter(text)
                .map(|m| m.as_str().to_string())
                .filter(|t| !tokens.contains_key(t))
                .collect()
        };
        let now = toolgate_core::store::now_ms();
        for token in missing {
            match store.lookup(Kind::Pii, &token, owner.as_str(), now) {
                Ok(Lookup::Found(r)) => {
                    let Ok((value, origins)) = serde_json::from_slice::<StoredToken>(&r.value)
                    else {
                        continue;
                    };
                    let left = Duration::from_millis(r.expires_ms.saturating_sub(now));
                    let made = Instant::now()
                        .checked_sub(TOKEN_TTL.saturating_sub(left))
                        .unwrap_or_else(Instant::now);
                    let key = (owner.clone(), value.clone());
                    self.by_value
                        .lock()
                        .expect("pii values")
                        .insert(key, token.clone());
                    self.tokens.lock().expect("pii tokens").insert(
                        token,
                        Entry {
                            owner: owner.clone(),
                            value,
                            made,
                            origins,
                        },
                    );
                }
                Ok(Lookup::Foreign) => {
                    return Err(Refused::foreign(format!(
                        "{token} is a token of another caller (a different API key or user): use the value itself"
                    )))
                }
                Ok(Lookup::Expired | Lookup::Unknown) => {}
                Err(e) => {
                    return Err(Refused::stale(format!(
                        "{token} could not be looked up: {e}"
                    )))
                }
            }
        }
        Ok(())
    }
}
