//! The application core, one per gateway, that both surfaces and the gate take: the
//! gateway (upstreams, catalog), the policy, the compiled validators, the session store
//! (pages, operations), the PII vault, code mode's state, workspace and run history, the
//! skills folder, the route index (kept in step with the catalog, re-indexing only the
//! servers that changed) with route's selections, and the catalog under the direct profile.

use crate::gateway::Gateway;
use crate::policy::Caller;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate_core::catalog::{Catalog, ToolId, ToolRecord};
use toolgate_core::exec::{SessionStore, StoreLimits, Validators};
use toolgate_core::principal::{Principal, Refused};
use toolgate_route::shape::{ProfileView, SurfaceOptions};
use toolgate_route::{RouteIndex, SnapshotIndex};

/// How long a selection made by route stays usable.
const SELECTION_TTL: Duration = Duration::from_secs(3600);
/// Selections kept at most (oldest dropped first).
const MAX_SELECTIONS: usize = 10_000;

/// A tool route chose, for execute to run by `selectionId`.
#[derive(Debug, Clone)]
struct Selection {
    owner: Principal,
    tool: ToolId,
    made: Instant,
}

/// The application core: what every surface and the gate share (one per gateway).
pub(crate) struct Engine {
    pub(crate) gw: Arc<Gateway>,
    /// The catalog the index was built from, and the index.
    index: Mutex<(Arc<Catalog>, Arc<dyn SnapshotIndex>)>,
    /// The skills the index holds (as tools of the server `skills`).
    indexed_skills: Mutex<Arc<crate::skills::SkillSet>>,
    validators: Validators,
    pub(crate) store: Arc<SessionStore>,
    selections: Mutex<HashMap<String, Selection>>,
    /// The current snapshot under the configured direct profile (direct `tools/list`,
    /// route's `full` detail, `auto` mode's cost), rebuilt when the snapshot changes.
    view: Mutex<Arc<ProfileView>>,
    /// Profiles, keys, approval and audit: consulted by route, execute and the front.
    pub(crate) policy: Arc<crate::policy::Policy>,
    /// PII tokens handed to the model (`code.pii`), per principal.
    pii: Arc<crate::code::pii::Vault>,
    /// Code mode's `state.get/set` values, per principal.
    code_state: crate::code::state::StateStore,
    /// Code mode's workspace files, per principal (`code.workspace`).
    workspace: crate::code::workspace::Workspace,
    /// The skills folder (`code.skills_dir`), re-read when it changes.
    skills: crate::skills::SkillLibrary,
    /// Finished code-mode runs, so a model can propose one as a skill.
    runs: crate::code::history::RunHistory,
    /// What route learns from the models' choices (`[guided.learning]`).
    learning: crate::learning::Learning,
}

/// How often the handle store purges what expired, whether or not calls come.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl Engine {
    pub(crate) fn new(gw: Arc<Gateway>) -> Arc<Self> {
        let limits = StoreLimits {
            cursor_ttl: gw.guided().result_ttl,
            operation_ttl: gw.guided().result_ttl,
            ..StoreLimits::default()
        };
        let empty = Arc::new(Catalog::default());
        let code = &gw.config.code;
        // Skills are programs: without code mode there is nothing to run them with.
        let skills_dir = code.skills_dir.clone().filter(|_| code.enabled);
        let skills = crate::skills::SkillLibrary::new(skills_dir, code.max_source_bytes);
        let engine = Arc::new(Self {
            index: Mutex::new((empty.clone(), Arc::from(initial_index(&gw.config.guided)))),
            // Not the library's own empty set, so the first index() adds the skills.
            indexed_skills: Mutex::new(Arc::default()),
            skills,
            runs: crate::code::history::RunHistory::new(gw.durable.clone()),
            validators: Validators::new(),
            store: Arc::new(
                SessionStore::new(limits).with_durable(gw.durable.clone(), gw.stopping()),
            ),
            selections: Mutex::new(HashMap::new()),
            view: Mutex::new(Arc::new(ProfileView::build(
                empty,
                gw.direct().profile,
                &SurfaceOptions::default(),
            ))),
            policy: crate::policy::Policy::new(&gw.config.policy),
            pii: Arc::new(crate::code::pii::Vault::new(gw.durable.clone())),
            code_state: crate::code::state::StateStore::new(gw.durable.clone()),
            workspace: crate::code::workspace::Workspace::new(&gw.code().workspace),
            learning: crate::learning::Learning::new(
                gw.guided().learning.clone(),
                gw.durable.clone(),
            ),
            gw,
        });
        engine.warm_index();
        // Expired cursors and operations leave memory even when no call comes to purge them
        // on access; the sweeper ends with the gateway (or when the engine is dropped).
        if tokio::runtime::Handle::try_current().is_ok() {
            engine
                .store
                .spawn_sweeper(SWEEP_EVERY, engine.gw.stopping());
        }
        engine
    }

    /// Builds the route index once the upstreams have settled, in the background, so the
    /// first route call does not pay for it (with embeddings, every tool is embedded).
    fn warm_index(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let engine = Arc::downgrade(self);
        let wait = self.gw.startup_wait();
        let gw = self.gw.clone();
        runtime.spawn(async move {
            gw.wait_settled(wait).await;
            let _ = tokio::task::spawn_blocking(move || {
                if let Some(engine) = engine.upgrade() {
                    engine.index();
                }
            })
            .await;
        });
    }

    /// The compiled validators of the tools' full input schemas.
    pub(crate) fn validators(&self) -> &Validators {
        &self.validators
    }

    /// PII tokens handed to the model (`code.pii`), per principal.
    pub(crate) fn pii(&self) -> &Arc<crate::code::pii::Vault> {
        &self.pii
    }

    /// Code mode's `state.get/set` values, per principal.
    pub(crate) fn code_state(&self) -> &crate::code::state::StateStore {
        &self.code_state
    }

    /// Code mode's workspace files, per principal (`code.workspace`).
    pub(crate) fn workspace(&self) -> &crate::code::workspace::Workspace {
        &self.workspace
    }

    /// The skills folder (`code.skills_dir`).
    pub(crate) fn skills(&self) -> &crate::skills::SkillLibrary {
        &self.skills
    }

    /// Finished code-mode runs, kept for `propose_skill`.
    pub(crate) fn runs(&self) -> &crate::code::history::RunHistory {
        &self.runs
    }

    /// What route learns from the models' choices (`[guided.learning]`).
    pub(crate) fn learning(&self) -> &crate::learning::Learning {
        &self.learning
    }

    /// The configuration the gateway runs with.
    pub(crate) fn config(&self) -> &crate::config::Config {
        &self.gw.config
    }

    /// Code mode's settings (`[code]`).
    pub(crate) fn code_config(&self) -> &crate::config::code::CodeConfig {
        self.gw.code()
    }

    /// Guided mode's settings (`[guided]`).
    pub(crate) fn guided_config(&self) -> &crate::config::GuidedConfig {
        self.gw.guided()
    }

    /// Direct mode's settings (`[direct]`).
    pub(crate) fn direct_config(&self) -> &crate::config::DirectConfig {
        self.gw.direct()
    }

    /// The prefix of the meta-tools' names (`gateway.meta_prefix`; empty: none).
    pub(crate) fn meta_prefix(&self) -> &str {
        self.gw.meta_prefix()
    }

    /// The gateway's Prometheus metrics.
    pub(crate) fn metrics(&self) -> &toolgate_core::observe::Metrics {
        self.gw.metrics()
    }

    /// Whether `caller` gets code mode (`code.enabled`, narrowed by `code.profiles` and
    /// `code.keys`); skills, being programs, follow it.
    pub(crate) fn code_for(&self, caller: &crate::policy::Caller) -> bool {
        self.gw
            .config
            .code
            .allows(caller.profile_name(), &caller.grant.name)
    }

    /// The route index for the current catalog and skills. When the catalog changed, only
    /// the servers whose tools changed are re-indexed; when the skills changed, only them.
    pub(crate) fn index(&self) -> (Arc<Catalog>, Arc<dyn SnapshotIndex>) {
        let catalog = self.gw.catalog();
        let skills = self.skills.current();
        let mut guard = self.index.lock().expect("index");
        let mut indexed = self.indexed_skills.lock().expect("skills");
        if !Arc::ptr_eq(&indexed, &skills) {
            let mut index = guard.1.clone_box();
            let records = skills.skills.values().map(|s| s.record.clone()).collect();
            index.replace_server(crate::skills::SKILLS_SERVER, records);
            guard.1 = Arc::from(index);
            *indexed = skills;
        }
        if !Arc::ptr_eq(&guard.0, &catalog) {
            let mut index = guard.1.clone_box();
            for server in changed_servers(&guard.0, &catalog) {
                let tools = catalog
                    .tools()
                    .iter()
                    .filter(|t| t.id.server == server)
                    .cloned()
                    .collect();
                index.replace_server(&server, tools);
            }
            *guard = (catalog, Arc::from(index));
        }
        guard.clone()
    }

    /// Tokens the current catalog costs as a plain tool list under the configured direct
    /// profile (OpenAI form, o200k), for `auto` mode.
    pub(crate) fn direct_tokens(&self) -> usize {
        self.view(&self.gw.catalog()).tokens
    }

    /// `catalog` under the configured direct profile: built once per snapshot.
    pub(crate) fn view(&self, catalog: &Arc<Catalog>) -> Arc<ProfileView> {
        let mut guard = self.view.lock().expect("view");
        if !Arc::ptr_eq(&guard.catalog, catalog) {
            let d = self.gw.direct();
            let opts = d.surface_options(self.gw.meta_prefix());
            *guard = Arc::new(ProfileView::build(catalog.clone(), d.profile, &opts));
        }
        guard.clone()
    }

    /// Remembers route's choice for `owner`; the selectionId execute takes.
    pub(crate) fn remember(&self, owner: &Principal, tool: &ToolId) -> String {
        let id = format!("sel-{}", toolgate_core::ids::random_hex(16));
        let mut sel = self.selections.lock().expect("selections");
        if sel.len() >= MAX_SELECTIONS {
            let cutoff = Instant::now() - SELECTION_TTL;
            sel.retain(|_, s| s.made > cutoff);
            if sel.len() >= MAX_SELECTIONS {
                if let Some(oldest) = sel
                    .iter()
                    .min_by_key(|(_, s)| s.made)
                    .map(|(k, _)| k.clone())
                {
                    sel.remove(&oldest);
                }
            }
        }
        sel.insert(
            id.clone(),
            Selection {
                owner: owner.clone(),
                tool: tool.clone(),
                made: Instant::now(),
            },
        );
        drop(sel);
        self.store
            .keep_selection(owner, &id, (&tool.server, &tool.name), SELECTION_TTL);
        id
    }

    /// The tool behind a selectionId, if `owner` made it and it is still fresh.
    pub(crate) fn recall(&self, owner: &Principal, id: &str) -> Result<ToolId, Refused> {
        let sel = self.selections.lock().expect("selections");
        match sel.get(id) {
            // Made by another replica, or before a restart: the durable store may know it.
            None if self.store.durable_backend().is_some() => {
                drop(sel);
                self.recall_stored(owner, id)
            }
            None => Err(Refused::stale(format!(
                "Unknown selectionId {id:?}: call route again, or pass the tool's exact name as \"tool\"."
            ))),
            Some(s) if s.owner != *owner => Err(Refused::foreign(format!(
                "selectionId {id:?} was made by another caller (a different API key or user): call route yourself."
            ))),
            Some(s) if s.made.elapsed() > SELECTION_TTL => Err(Refused::stale(format!(
                "selectionId {id:?} has expired: call route again."
            ))),
            Some(s) => Ok(s.tool.clone()),
        }
    }

    fn recall_stored(&self, owner: &Principal, id: &str) -> Result<ToolId, Refused> {
        use toolgate_core::exec::StoreError;
        match self.store.stored_selection(owner, id, SELECTION_TTL) {
            Ok(Some((server, name))) => Ok(ToolId { server, name }),
            Ok(None) => Err(Refused::stale(format!(
                "Unknown selectionId {id:?}: call route again, or pass the tool's exact name as \"tool\"."
            ))),
            Err(StoreError::Foreign { .. }) => Err(Refused::foreign(format!(
                "selectionId {id:?} was made by another caller (a different API key or user): call route yourself."
            ))),
            Err(StoreError::Expired { .. }) => Err(Refused::stale(format!(
                "selectionId {id:?} has expired: call route again."
            ))),
            Err(e) => Err(Refused::stale(format!(
                "selectionId {id:?} could not be looked up: {e}; or pass the tool's exact name as \"tool\"."
            ))),
        }
    }

    /// The message for a handle that was not honoured; a foreign one is audited first.
    pub(crate) fn refused(&self, caller: &Caller, handle: &str, text: &str, r: Refused) -> String {
        if r.foreign {
            self.policy.audit_foreign(caller, handle, text);
        }
        r.message
    }

    /// The output budget for a tool: its configured budget, else the default.
    pub(crate) fn budget_for(&self, tool: &ToolRecord) -> usize {
        let g = self.gw.guided();
        g.tool_budgets
            .get(&tool.id.to_string())
            .copied()
            .unwrap_or(g.budget_tokens)
    }
}

fn changed_servers(old: &Catalog, new: &Catalog) -> Vec<String> {
    let (a, b) = (by_server(old), by_server(new));
    let mut servers: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|s| {
            let (x, y) = (a.get(*s), b.get(*s));
            match (x, y) {
                (Some(x), Some(y)) => {
                    x.len() != y.len()
                        || x.iter()
                            .zip(y.iter())
                            .any(|(p, q)| p.exposed != q.exposed || p.tool != q.tool)
                }
                _ => true,
            }
        })
        .map(|s| s.to_string())
        .collect();
    servers.sort();
    servers.dedup();
    servers
}

fn by_server(c: &Catalog) -> HashMap<&str, Vec<&Arc<ToolRecord>>> {
    let mut m: HashMap<&str, Vec<&Arc<ToolRecord>>> = HashMap::new();
    for t in c.tools() {
        m.entry(t.id.server.as_str()).or_default().push(t);
    }
    m
}

/// The empty route index the engine starts from: BM25F with the configured example tasks,
/// or (built with the `embed` feature, `guided.route_model` set) the hybrid of BM25F and
/// sentence embeddings. A model that cannot be loaded is logged and BM25F routes alone.
fn initial_index(g: &crate::config::GuidedConfig) -> Box<dyn SnapshotIndex> {
    let empty = Catalog::default();
    let examples = g.route_examples.clone();
    #[cfg(feature = "embed")]
    if let Some(dir) = &g.route_model {
        use toolgate_route::{Embedder, FusionParams, HybridIndex};
        let built = Embedder::load(dir).and_then(|model| {
            HybridIndex::with_examples(
                &empty,
                Default::default(),
                Arc::new(model),
                FusionParams::default(),
                examples.clone(),
            )
        });
        match built {
            Ok(index) => return Box::new(index),
            Err(e) => tracing::error!("route: guided.route_model: {e}; routing with BM25F alone"),
        }
    }
    Box::new(RouteIndex::with_examples(
        &empty,
        Default::default(),
        examples,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_engine_builds_one_view_per_snapshot() {
        let gw = crate::gateway::Gateway::start(crate::config::Config::empty());
        let engine = crate::engine::Engine::new(gw.clone());
        let current = gw.catalog();
        let a = engine.view(&current);
        assert!(
            Arc::ptr_eq(&a, &engine.view(&current)),
            "reused, not rebuilt"
        );
        let next = Arc::new(toolgate_core::catalog::Catalog::default());
        let b = engine.view(&next);
        assert!(!Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&b.catalog, &next));
        gw.shutdown().await;
    }
}
