//! What route learns from the models' choices, for the engine: which selectionIds a
//! clarification offered (and for which task), the learned set (`toolgate_route::learned`)
//! and its one record in the state store (`Kind::Learned`), re-read every few seconds when
//! the store is shared by replicas.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_core::catalog::ToolId;
use toolgate_core::store::{Kind, Lookup, Record, Store};
use toolgate_route::{Evidence, Learned, LearnedExample, LearningMode, LearningSettings};

/// The id and owner of the learned set's one record in the store.
pub const RECORD_ID: &str = "route";
pub const RECORD_OWNER: &str = "toolgate";
/// Offers kept at most (oldest dropped first) and how long one can teach.
const MAX_OFFERS: usize = 10_000;
const OFFER_TTL: Duration = Duration::from_secs(3600);
/// How often a shared store's set is read again.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The engine's learning state.
pub struct Learning {
    settings: LearningSettings,
    store: Option<Arc<dyn Store>>,
    /// selectionId -> the task whose clarification or browse offered it.
    offers: Mutex<HashMap<String, (String, Instant)>>,
    set: Mutex<(Learned, Instant)>,
}

impl Learning {
    pub fn new(settings: LearningSettings, store: Option<Arc<dyn Store>>) -> Self {
        let mut learned = Learned::new(settings.clone());
        if let Some(s) = &store {
            learned.replace(load(s.as_ref()));
        }
        Self {
            settings,
            store,
            offers: Mutex::new(HashMap::new()),
            set: Mutex::new((learned, Instant::now())),
        }
    }

    pub fn settings(&self) -> &LearningSettings {
        &self.settings
    }

    /// Notes that a clarification for `task` offered `selection`.
    pub fn offered(&self, selection: &str, task: &str) {
        if self.settings.mode == LearningMode::Off {
            return;
        }
        let mut offers = self.offers.lock().expect("offers");
        if offers.len() >= MAX_OFFERS {
            offers.retain(|_, (_, at)| at.elapsed() < OFFER_TTL);
            if offers.len() >= MAX_OFFERS {
                let oldest = offers
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    offers.remove(&k);
                }
            }
        }
        offers.insert(selection.to_string(), (task.to_string(), Instant::now()));
    }

    /// What the learned examples say about `task` for this caller.
    pub fn evidence(&self, task: &str, principal: &str, profile: &str) -> Evidence {
        if self.settings.mode == LearningMode::Off {
            return Evidence::default();
        }
        let mut set = self.set.lock().expect("learned");
        if let Some(s) = self.store.as_ref().filter(|s| s.shared()) {
            if set.1.elapsed() >= RELOAD_EVERY {
                set.0.replace(load(s.as_ref()));
                set.1 = Instant::now();
            }
        }
        set.0.evidence(task, principal, profile)
    }

    /// How many examples are kept, and the newest `n` (oldest first), for the dashboard.
    pub fn recent(&self, n: usize) -> (usize, Vec<LearnedExample>) {
        let set = self.set.lock().expect("learned");
        let all = set.0.examples();
        (all.len(), all[all.len().saturating_sub(n)..].to_vec())
    }

    /// A call chosen by `selection` succeeded: when a clarification offered it, the task
    /// is a learned example of `tool`. Returns the example kept.
    pub fn succeeded(
        &self,
        selection: &str,
        tool: &ToolId,
        principal: &str,
        profile: &str,
    ) -> Option<LearnedExample> {
        let (task, at) = self.offers.lock().expect("offers").remove(selection)?;
        if at.elapsed() > OFFER_TTL {
            return None;
        }
        let ex = LearnedExample {
            task,
            server: tool.server.clone(),
            name: tool.name.clone(),
            principal: principal.to_string(),
            profile: profile.to_string(),
            at_ms: toolgate_core::store::now_ms(),
        };
        let mut set = self.set.lock().expect("learned");
        if let Some(s) = self.store.as_ref().filter(|s| s.shared()) {
            set.0.replace(load(s.as_ref()));
        }
        set.0.expire(ex.at_ms);
        if !set.0.record(ex.clone()) {
            return None;
        }
        if let Some(s) = &self.store {
            save(s.as_ref(), set.0.examples());
        }
        Some(ex)
    }
}

/// The learned set in the store (empty when there is none or it cannot be read).
pub fn load(store: &dyn Store) -> Vec<LearnedExample> {
    let now = toolgate_core::store::now_ms();
    match store.lookup(Kind::Learned, RECORD_ID, RECORD_OWNER, now) {
        Ok(Lookup::Found(r)) => serde_json::from_slice(&r.value).unwrap_or_else(|e| {
            tracing::warn!("route: the learned examples in the store could not be read: {e}");
            Vec::new()
        }),
        Ok(_) => Vec::new(),
        Err(e) => {
            tracing::warn!("route: the learned examples could not be read: {e}");
            Vec::new()
        }
    }
}

/// Writes the whole learned set (a failure is logged: what was learned stays in memory).
pub fn save(store: &dyn Store, examples: &[LearnedExample]) -> bool {
    let record = Record {
        owner: RECORD_OWNER.into(),
        // The examples expire one by one (`expiry_days`); the record itself does not.
        expires_ms: u64::MAX / 2,
        value: serde_json::to_vec(examples).expect("strings serialize"),
    };
    match store.put(Kind::Learned, RECORD_ID, &record) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("route: a learned example was kept in this process only: {e}");
            false
        }
    }
}
