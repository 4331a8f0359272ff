//! What route learns from the models' choices, for the engine: which selectionIds a
//! clarification offered (and for which task; in a shared store too, so any replica that
//! runs the call learns), the learned set (`toolgate_route::Learned`) and its one record in
//! the state store (`Kind::Learned`), re-read every few seconds when the store is shared
//! by replicas.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use toolgate_core::catalog::ToolId;
use toolgate_core::store::{Kind, Lookup, Record, Store};
use toolgate_route::{Evidence, Learned, LearnedExample, LearningMode, LearningSettings};

/// The id and owner of the learned set's one record in the store.
pub(crate) const RECORD_ID: &str = "route";
pub(crate) const RECORD_OWNER: &str = "toolgate";
/// Offers kept at most (oldest dropped first) and how long one can teach.
const MAX_OFFERS: usize = 10_000;
const OFFER_TTL: Duration = Duration::from_secs(3600);
/// How long the learned set's record is kept after its last write: `expiry_days`' limit.
const RECORD_TTL: Duration = Duration::from_secs(3650 * 86_400);
/// How often a shared store's set is read again.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The engine's learning state.
pub(crate) struct Learning {
    settings: LearningSettings,
    store: Option<Arc<dyn Store>>,
    /// `offer:<selectionId>` -> the task whose clarification offered it.
    offers: Handoffs<String>,
    /// `browse:<principal>` -> its last browse by task: the task and the tools listed.
    browses: Handoffs<Browse>,
    /// The set and when it was last read from a shared store (routes read it at once).
    set: RwLock<(Learned, Instant)>,
}

impl Learning {
    pub(crate) fn new(settings: LearningSettings, store: Option<Arc<dyn Store>>) -> Self {
        let mut learned = Learned::new(settings.clone());
        if let Some(s) = &store {
            learned.replace(load(s.as_ref()));
        }
        Self {
            settings,
            offers: Handoffs::new(&store),
            browses: Handoffs::new(&store),
            store,
            set: RwLock::new((learned, Instant::now())),
        }
    }

    pub(crate) fn settings(&self) -> &LearningSettings {
        &self.settings
    }

    /// Notes that a clarification for `task` offered `selection` to `owner`. With a shared
    /// store the offer is kept there too, so the replica that runs the call learns from it.
    pub(crate) fn offered(&self, selection: &str, task: &str, owner: &str) {
        if self.settings.mode == LearningMode::Off {
            return;
        }
        self.offers
            .put(&format!("offer:{selection}"), owner, task.to_string());
    }

    /// Notes that `owner` browsed for `task` (`detail: "names"`, or a "nothing fits"
    /// answer) and was shown `tools` (`server/name`): the next successful call of one of
    /// them within the offer window teaches, as an answered question does.
    pub(crate) fn browsed(&self, owner: &str, task: &str, tools: Vec<String>) {
        if self.settings.mode == LearningMode::Off || task.trim().is_empty() || tools.is_empty() {
            return;
        }
        let browse = Browse {
            task: task.to_string(),
            tools,
        };
        self.browses.put(&format!("browse:{owner}"), owner, browse);
    }

    /// What the learned examples say about `task` for this caller.
    pub(crate) fn evidence(&self, task: &str, principal: &str, profile: &str) -> Evidence {
        if self.settings.mode == LearningMode::Off {
            return Evidence::default();
        }
        if let Some(s) = self.store.as_ref().filter(|s| s.shared()) {
            let stale = self.read().1.elapsed() >= RELOAD_EVERY;
            if stale {
                let examples = load(s.as_ref());
                let mut set = self.write();
                set.0.replace(examples);
                set.1 = Instant::now();
            }
        }
        self.read().0.evidence(task, principal, profile)
    }

    /// How many examples are kept, and the newest `n` (oldest first), for the dashboard.
    pub(crate) fn recent(&self, n: usize) -> (usize, Vec<LearnedExample>) {
        let set = self.read();
        let all = set.0.examples();
        (all.len(), all[all.len().saturating_sub(n)..].to_vec())
    }

    /// A call of `tool` (chosen by `selection`, or by its name) succeeded: when a
    /// clarification offered that selection, or the caller's last browse listed the tool,
    /// that task is a learned example of `tool`. Returns the example kept.
    pub(crate) fn succeeded(
        &self,
        selection: Option<&str>,
        tool: &ToolId,
        principal: &str,
        profile: &str,
    ) -> Option<LearnedExample> {
        if self.settings.mode == LearningMode::Off {
            return None;
        }
        let offered = selection
            .and_then(|sel| (self.offers).take(&format!("offer:{sel}"), principal, |_| true));
        let tool_name = tool.to_string();
        let task = offered.or_else(|| {
            (self.browses)
                .take(&format!("browse:{principal}"), principal, |b| {
                    b.tools.contains(&tool_name)
                })
                .map(|b| b.task)
        })?;
        let ex = LearnedExample {
            task,
            server: tool.server.clone(),
            name: tool.name.clone(),
            principal: principal.to_string(),
            profile: profile.to_string(),
            at_ms: toolgate_core::store::now_ms(),
        };
        let mut set = self.write();
        if let Some(s) = self.store.as_ref().filter(|s| s.shared()) {
            set.0.replace(load(s.as_ref()));
            set.1 = Instant::now();
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

impl Learning {
    /// The set, for reading; a panic while it was held leaves it as it was (nothing is
    /// half-written: every change replaces or appends whole examples).
    fn read(&self) -> std::sync::RwLockReadGuard<'_, (Learned, Instant)> {
        self.set.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, (Learned, Instant)> {
        self.set.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// A browse by task: what was asked and which tools (`server/name`) were listed.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Browse {
    task: String,
    tools: Vec<String>,
}

/// Values route hands to a later execute of the same principal (offers, browses): kept in
/// this process, and in a shared store too so the replica that runs the call finds them.
/// Each is taken once, and teaches for [`OFFER_TTL`]; at most [`MAX_OFFERS`] are kept here
/// (the oldest dropped first).
struct Handoffs<V> {
    local: Mutex<HashMap<String, (V, Instant)>>,
    shared: Option<Arc<dyn Store>>,
}

impl<V: Clone + serde::Serialize + serde::de::DeserializeOwned> Handoffs<V> {
    fn new(store: &Option<Arc<dyn Store>>) -> Self {
        Self {
            local: Mutex::new(HashMap::new()),
            shared: store.clone().filter(|s| s.shared()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (V, Instant)>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn put(&self, id: &str, owner: &str, value: V) {
        if let Some(s) = &self.shared {
            let record = Record {
                owner: owner.to_string(),
                expires_ms: toolgate_core::store::expiry_after(OFFER_TTL),
                value: serde_json::to_vec(&value).expect("strings serialize"),
            };
            if let Err(e) = s.put(Kind::Learned, id, &record) {
                tracing::debug!("route: {id} was kept in this process only: {e}");
            }
        }
        let mut local = self.lock();
        if local.len() >= MAX_OFFERS {
            local.retain(|_, (_, at)| at.elapsed() < OFFER_TTL);
            if local.len() >= MAX_OFFERS {
                let oldest = (local.iter())
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    local.remove(&k);
                }
            }
        }
        local.insert(id.to_string(), (value, Instant::now()));
    }

    /// `owner`'s value under `id` when `fits` it, taken: from this process, else from the
    /// shared store. A value that does not fit stays.
    fn take(&self, id: &str, owner: &str, fits: impl Fn(&V) -> bool) -> Option<V> {
        let mut local = self.lock();
        let now = toolgate_core::store::now_ms();
        let value = match local.get(id) {
            Some((v, at)) if at.elapsed() <= OFFER_TTL => Some(v.clone()),
            Some(_) => None,
            None => {
                (self.shared.as_ref()).and_then(|s| match s.lookup(Kind::Learned, id, owner, now) {
                    Ok(Lookup::Found(r)) => serde_json::from_slice(&r.value).ok(),
                    _ => None,
                })
            }
        }?;
        if !fits(&value) {
            return None;
        }
        local.remove(id);
        if let Some(s) = &self.shared {
            let _ = s.remove(Kind::Learned, id, now);
        }
        Some(value)
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
        // The examples expire one by one (`expiry_days`); the record lives as long as the
        // longest expiry allowed, renewed by every write (Redis refuses an expiry at
        // the end of time: its limit is i64 milliseconds).
        expires_ms: toolgate_core::store::expiry_after(RECORD_TTL),
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
