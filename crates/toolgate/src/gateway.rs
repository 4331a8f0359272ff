//! The hub: owns the upstreams and the current catalog snapshot, which it rebuilds
//! whenever an upstream connects, drops, or changes its tool list.

use crate::config::Config;
use crate::upstream::{supervise, Upstream, UpstreamStatus};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use toolgate_core::call::{CallError, CallOptions, CallOutcome};
use toolgate_core::catalog::{Catalog, ToolId, ToolInput, ToolRecord};

/// A running gateway. Cheap to share (`Arc`); `shutdown` stops every upstream.
pub struct Gateway {
    /// The configuration it was started with.
    pub config: Config,
    /// Every configured upstream (disabled ones too, for status reports), by name.
    upstreams: BTreeMap<String, Arc<Upstream>>,
    /// The current snapshot; receivers are woken on every change.
    catalog: watch::Sender<Arc<Catalog>>,
    /// Cancelled by `shutdown`.
    stop: CancellationToken,
    /// The supervisors and the catalog task, so shutdown can wait for them.
    tasks: TaskTracker,
    started: Instant,
    /// Set once every upstream has settled, so `wait_settled` is free afterwards.
    settled: std::sync::atomic::AtomicBool,
    /// Code mode's runs in progress per caller (API key, else session) and in total: one
    /// count for the whole gateway, whichever front, transport or endpoint a run came from.
    pub(crate) code_runs: crate::code::RunSlots,
    /// Code mode's sandbox workers, `code.pool_size` of them started ahead and waiting;
    /// shutdown kills the waiting ones.
    pub(crate) code_workers: Arc<crate::code::pool::WorkerPool>,
    /// Tool calls in flight, for a bounded drain at shutdown (`drain`).
    pub drain: toolgate_core::drain::Drain,
    /// The configuration warnings last logged (`config_warnings`), so each is logged once
    /// when it appears rather than on every rebuild.
    warned: std::sync::Mutex<Vec<String>>,
    /// The `requestState` handles given to 2026-07-28 clients for upstream calls that
    /// answered `input_required` (see `upstream::mrtr`); any front may take one back.
    pub(crate) inputs: crate::upstream::mrtr::PendingInputs,
    /// Calls whose older upstream asked a 2026-07-28 client something, held open until
    /// the client's retry brings the answer (see `front/inputs.rs`).
    pub(crate) parked: crate::upstream::mrtr::ParkedCalls,
    /// Metrics, each session's token count, recent route decisions (`/metrics`, `/ui`).
    pub(crate) observe: toolgate_core::observe::Observer,
    /// Where handles outlive the process (`[store]`); `None`: memory only.
    pub(crate) durable: Option<Arc<dyn toolgate_core::store::Store>>,
}

impl Gateway {
    /// Starts a supervisor per enabled upstream and returns at once; upstreams connect
    /// concurrently in the background. Must be called inside a tokio runtime.
    pub fn start(config: Config) -> Arc<Self> {
        Self::start_with_store(config, None)
    }

    /// [`start`](Self::start), keeping handles in `durable` as well as in memory.
    pub fn start_with_store(
        config: Config,
        durable: Option<Arc<dyn toolgate_core::store::Store>>,
    ) -> Arc<Self> {
        let upstreams: BTreeMap<_, _> = config
            .upstreams
            .values()
            .map(|u| (u.name.clone(), Upstream::new(u.clone())))
            .collect();
        // Logins of `toolgate auth login` are read from the state store.
        if let Some(store) = &durable {
            for up in upstreams.values() {
                up.use_store(store.clone());
            }
        }
        let stop = CancellationToken::new();
        let drain = toolgate_core::drain::Drain::under(&stop);
        let gw = Arc::new(Self {
            upstreams,
            catalog: watch::channel(Arc::new(Catalog::default())).0,
            stop,
            tasks: TaskTracker::new(),
            started: Instant::now(),
            settled: Default::default(),
            code_runs: Default::default(),
            code_workers: crate::code::pool::WorkerPool::new(&config.code),
            warned: Default::default(),
            inputs: Default::default(),
            parked: Default::default(),
            observe: Default::default(),
            drain,
            durable,
            config,
        });
        if gw.code_workers.keeps_workers() {
            let pool = gw.code_workers.clone();
            gw.tasks.spawn(pool.keep_filled(gw.stop.clone()));
        }
        for up in gw.upstreams.values() {
            gw.tasks.spawn(supervise(up.clone(), gw.stop.clone()));
            let mut changed = up.watch();
            let weak = Arc::downgrade(&gw);
            let stop = gw.stop.clone();
            let (name, mut was_ready, mut ever_ready) = (up.name().to_string(), false, false);
            gw.tasks.spawn(async move {
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        r = changed.changed() => if r.is_err() { return },
                    }
                    match weak.upgrade() {
                        Some(gw) => {
                            let ready = (gw.upstreams.get(&name)).is_some_and(|u| {
                                matches!(u.status(), UpstreamStatus::Ready { .. })
                            });
                            if ready && !was_ready && ever_ready {
                                gw.metrics().upstream_reconnected(&name);
                            }
                            (was_ready, ever_ready) = (ready, ever_ready || ready);
                            gw.rebuild()
                        }
                        None => return,
                    }
                }
            });
        }
        gw.tasks.close();
        gw
    }

    /// The current catalog snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.borrow().clone()
    }

    /// A receiver woken whenever the catalog changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<Catalog>> {
        self.catalog.subscribe()
    }

    /// Every configured upstream (disabled ones too), in name order.
    pub fn upstreams(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.upstreams.values()
    }

    /// The upstream configured as `name`.
    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.get(name)
    }

    /// The front's settings (`[gateway]`).
    pub(crate) fn settings(&self) -> &crate::config::GatewayConfig {
        &self.config.gateway
    }

    /// The prefix of the meta-tools' names (`gateway.meta_prefix`; empty: none).
    pub(crate) fn meta_prefix(&self) -> &str {
        &self.config.gateway.meta_prefix
    }

    /// How long a first listing waits for the upstreams to settle (`gateway.startup_wait_ms`).
    pub(crate) fn startup_wait(&self) -> Duration {
        self.config.gateway.startup_wait
    }

    /// Guided mode's settings (`[guided]`).
    pub(crate) fn guided(&self) -> &crate::config::GuidedConfig {
        &self.config.guided
    }

    /// Direct mode's settings (`[direct]`).
    pub(crate) fn direct(&self) -> &crate::config::DirectConfig {
        &self.config.direct
    }

    /// Code mode's settings (`[code]`).
    pub(crate) fn code(&self) -> &crate::config::code::CodeConfig {
        &self.config.code
    }

    /// The gateway's Prometheus metrics.
    pub(crate) fn metrics(&self) -> &toolgate_core::observe::Metrics {
        &self.observe.metrics
    }

    /// Counts the answers' tokens still waiting to be counted (readers of the counts call
    /// it first).
    pub(crate) fn settle_tally(&self) {
        self.observe.tally.settle();
    }

    /// Waits until every enabled upstream has connected or failed once, or until `limit`
    /// has passed since start, whichever is first. Used so the first `tools/list` shows
    /// what is up without ever waiting long for what is not.
    pub async fn wait_settled(&self, limit: Duration) {
        if self.settled.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let deadline = tokio::time::Instant::from_std(self.started + limit);
        'all: for up in self.upstreams.values() {
            let mut rx = up.watch();
            while !up.status().settled() {
                match tokio::time::timeout_at(deadline, rx.changed()).await {
                    Ok(Ok(())) => continue,
                    _ => break 'all,
                }
            }
        }
        // The catalog task folds status changes in asynchronously; make sure the
        // snapshot the caller reads next reflects what just settled.
        self.rebuild();
        if self.upstreams.values().all(|u| u.status().settled()) {
            self.settled
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Calls a catalog tool on its upstream.
    pub async fn call(
        &self,
        tool: &ToolRecord,
        arguments: Map<String, Value>,
        opts: CallOptions,
    ) -> Result<CallOutcome, CallError> {
        let up = self
            .upstreams
            .get(&tool.id.server)
            .ok_or_else(|| CallError::Unavailable {
                server: tool.id.server.clone(),
                state: "not configured".into(),
            })?;
        // Every call passes here (direct, execute, programs, skills): a drain sees them all.
        // Boxed: the upstream's call is the largest future on a call's path (about 6 KiB);
        // inline, every layer above it (the drain, the metrics, the gate, the surfaces)
        // would hold a copy and move it whole at each step (docs/performance.md).
        let call = Box::pin(up.call(&tool.id.name, arguments, opts));
        let call = self.drain.run(call).await;
        call.unwrap_or_else(|why| Err(shutting_down(&tool.id.to_string(), why)))
    }

    /// Begins the drain: no call starts from now on; calls in flight get `grace` to finish,
    /// then end with an error saying the gateway is shutting down. Returns what it found.
    pub async fn drain(&self, grace: Duration) -> toolgate_core::drain::Drained {
        // Closed before it is said: a call asked after the line below is never run.
        self.drain.close();
        let running = self.drain.in_flight();
        if running > 0 {
            tracing::info!(
                "shutting down: waiting up to {:.1} s for {running} calls in flight",
                grace.as_secs_f64()
            );
        }
        let drained = self.drain.drain(grace).await;
        if drained.cut > 0 {
            tracing::warn!("shutting down: {} calls were still running after {:.1} s (gateway.limits.shutdown_grace_secs) and were answered with an error", drained.cut, grace.as_secs_f64());
        }
        drained
    }

    /// [`Gateway::call`] for a client's call on `surface` (guided, direct, code), counted
    /// in the metrics: its outcome, the upstream's time, and the gateway's own time since
    /// `since` (when the call path began: resolution, policy, validation, approval).
    pub(crate) async fn call_as(
        &self,
        surface: &'static str,
        since: Instant,
        tool: &ToolRecord,
        arguments: Map<String, Value>,
        opts: CallOptions,
    ) -> Result<CallOutcome, CallError> {
        use toolgate_core::observe::CallOutcomeKind as Kind;
        let start = Instant::now();
        let metrics = &self.observe.metrics;
        metrics.gateway_added(surface, start.duration_since(since));
        let result = self.call(tool, arguments, opts).await;
        let kind = match &result {
            Ok(o) if o.is_error => Kind::ToolError,
            Ok(_) => Kind::Ok,
            Err(CallError::Timeout { .. }) => Kind::Timeout,
            Err(CallError::Cancelled) => Kind::Cancelled,
            Err(_) => Kind::UpstreamError,
        };
        let (server, name) = (&tool.id.server, &tool.id.name);
        metrics.call(surface, server, name, kind, start.elapsed());
        result
    }

    /// When `name` looks like a tool of an upstream that is not connected right now (it
    /// carries that upstream's prefix or `server/`), the error to give instead of
    /// "unknown tool": the upstream is down or restarting, and the call can be retried.
    pub(crate) fn unavailable_for(&self, name: &str) -> Option<CallError> {
        self.upstreams.values().find_map(|up| {
            let status = up.status();
            let ours = name.starts_with(&format!("{}_", up.config.prefix))
                || name.starts_with(&format!("{}/", up.name()));
            (ours && up.config.enabled && !matches!(status, UpstreamStatus::Ready { .. })).then(
                || CallError::Unavailable {
                    server: up.name().to_string(),
                    state: status.label().to_string(),
                },
            )
        })
    }

    /// Stops every upstream (children get SIGTERM, then SIGKILL) and the sandbox worker
    /// pool (idle workers are killed), and waits for them.
    /// Fired when a shutdown cuts the calls still running (the end of the drain's grace,
    /// or the gateway stopping): they are lost with the process, not failed, so the durable
    /// store keeps them as running and a restarted gateway reports them lost.
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.drain.cutting()
    }

    /// Stops every upstream (and their processes) and the tasks of the gateway.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tasks.wait().await;
    }

    fn rebuild(&self) {
        let mut inputs = Vec::new();
        for up in self.upstreams.values() {
            if !matches!(up.status(), UpstreamStatus::Ready { .. }) {
                continue;
            }
            for tool in up.tools() {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let name = name.to_string();
                let id = ToolId::new(up.name(), name.clone());
                // An upstream's `rename` first, then `[direct.slim.tools]` names.
                let name_override = up.config.rename.get(&name).cloned().or_else(|| {
                    let slim = &self.direct().slim;
                    slim.name_override(&id).map(str::to_string)
                });
                inputs.push(ToolInput {
                    name_override,
                    id,
                    prefix: up.config.prefix.clone(),
                    tool,
                });
            }
        }
        let next = Catalog::build(inputs);
        let changed = self.catalog.send_if_modified(|cur| {
            if same_tools(cur, &next) {
                false
            } else {
                *cur = Arc::new(next);
                true
            }
        });
        if changed {
            self.log_new_warnings();
        }
    }

    /// Configuration that names what the upstreams do not have, or asks for a name another
    /// tool owns: a `rename` of a tool its upstream does not list, a `rename` (or
    /// `[direct.slim.tools]` name) that was not applied because the name is taken, a
    /// `guided.pinned` tool that is not there. Only connected upstreams can be judged.
    /// `toolgate check` exits non-zero when there are any; `serve` logs each once.
    pub fn config_warnings(&self) -> Vec<String> {
        let catalog = self.catalog();
        let file = self.config.source_name();
        let mut out = Vec::new();
        for up in self.upstreams.values() {
            if !matches!(up.status(), UpstreamStatus::Ready { .. }) {
                continue;
            }
            let server = up.name();
            let mut renames: Vec<_> = up.config.rename.iter().collect();
            renames.sort();
            for (tool, wanted) in renames {
                match catalog.by_id(&ToolId::new(server, tool.clone())) {
                    None => out.push(format!(
                        "{file}: upstreams.{server}.rename: {server} has no tool {tool:?}: \
                         fix the name (`toolgate tools` lists them) or remove the entry"
                    )),
                    Some(t) if t.exposed != *wanted => out.push(format!(
                        "{file}: upstreams.{server}.rename: {tool:?} = {wanted:?} is not applied, \
                         because {} already has that name ({server}/{tool} stays {}): choose another name",
                        catalog
                            .by_exposed(wanted)
                            .map_or("another tool".to_string(), |h| h.id.to_string()),
                        t.exposed
                    )),
                    Some(_) => {}
                }
            }
        }
        for (key, o) in &self.direct().slim.tools {
            let (Some(wanted), Some(t)) = (&o.name, catalog.resolve(key)) else {
                continue;
            };
            if t.exposed != *wanted && !self.has_rename(&t.id) {
                out.push(format!(
                    "{file}: direct.slim.tools.{key:?}.name = {wanted:?} is not applied, because \
                     another tool already has that name ({key} stays {}): choose another name",
                    t.exposed
                ));
            }
        }
        for p in &self.config.guided.pinned {
            if catalog.resolve(p).is_some() {
                continue;
            }
            let server = p.split_once('/').map_or(p.as_str(), |(s, _)| s);
            if self.config.is_skills_server(server) {
                continue;
            }
            match self.upstreams.get(server) {
                None => out.push(format!(
                    "{file}: guided.pinned: {p:?}: there is no upstream {server:?}: \
                     fix the name or remove the entry"
                )),
                Some(up) if matches!(up.status(), UpstreamStatus::Ready { .. }) => {
                    out.push(format!(
                        "{file}: guided.pinned: {p:?}: {server} has no such tool: \
                         fix the name (`toolgate tools` lists them) or remove the entry"
                    ))
                }
                Some(_) => {}
            }
        }
        out
    }

    fn has_rename(&self, id: &ToolId) -> bool {
        self.upstreams
            .get(&id.server)
            .is_some_and(|u| u.config.rename.contains_key(&id.name))
    }

    fn log_new_warnings(&self) {
        let now = self.config_warnings();
        let mut warned = self.warned.lock().expect("warned");
        for w in now.iter().filter(|w| !warned.contains(w)) {
            tracing::warn!("{w}");
        }
        *warned = now;
    }
}

/// The error a call gets when the gateway stops before or while it runs.
fn shutting_down(tool: &str, why: toolgate_core::drain::ShuttingDown) -> CallError {
    CallError::ShuttingDown(match why {
        toolgate_core::drain::ShuttingDown::NotStarted => format!(
            "the gateway is shutting down: {tool} was not run; call it again once the gateway is back"
        ),
        toolgate_core::drain::ShuttingDown::Cut => format!(
            "the gateway is shutting down: {tool} was still running at the end of the shutdown grace period and was cancelled; it may or may not have taken effect, so check before calling it again"
        ),
    })
}

fn same_tools(a: &Catalog, b: &Catalog) -> bool {
    a.len() == b.len()
        && a.tools()
            .iter()
            .zip(b.tools())
            .all(|(x, y)| x.exposed == y.exposed && x.tool == y.tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The upstream's call is boxed in [`Gateway::call`], so what the gate and the surfaces
    /// hold of a call stays small. Inline it made `call_as` 12.5 KiB and the surfaces'
    /// futures 16 KiB, each copied whole at every move (`docs/performance.md`).
    #[tokio::test]
    async fn a_calls_future_is_small() {
        let gw = Gateway::start(Config::empty());
        let record = ToolRecord {
            id: ToolId::new("s", "t"),
            exposed: "s_t".into(),
            tool: Map::new(),
        };
        let (args, opts) = (Map::new(), CallOptions::default());
        let call = gw.call_as("direct", Instant::now(), &record, args, opts);
        let size = std::mem::size_of_val(&call);
        assert!(size < 1024, "a call's future holds {size} bytes");
        drop(call);
        gw.shutdown().await;
    }
}
