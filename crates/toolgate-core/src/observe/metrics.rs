//! The Prometheus families (`prometheus-client`) and the calls that record into them.
//! Counters end in `_total` and durations in `_seconds` (the crate adds both suffixes);
//! gauges that mirror state elsewhere (pages, operations, upstreams, workers) are set
//! from a [`Snapshot`] the scrape handler takes just before encoding.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, linear_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    upstream: String,
    tool: String,
    surface: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SurfaceLabel {
    surface: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    surface: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabel {
    decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    surface: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EraLabel {
    era: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// How a tool call ended, as a bounded label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcomeKind {
    /// The upstream answered and did not flag an error.
    Ok,
    /// The upstream answered with `isError: true`.
    ToolError,
    /// The call timed out.
    Timeout,
    /// The call was cancelled.
    Cancelled,
    /// Not connected, closed during the call, rejected, or another transport failure.
    UpstreamError,
}

impl CallOutcomeKind {
    /// The label's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::UpstreamError => "upstream_error",
        }
    }
}

/// One upstream's state at scrape time.
pub struct UpstreamGauge {
    /// The upstream's name.
    pub name: String,
    /// 1 when connected.
    pub up: bool,
}

/// Gateway state read at scrape time (the scrape handler fills it from the stores).
#[derive(Default)]
pub struct Snapshot {
    /// Paged results held.
    pub pages_open: usize,
    /// Operations held, running or finished.
    pub operations_open: usize,
    /// Operations still running.
    pub operations_running: usize,
    /// Each upstream's state.
    pub upstreams: Vec<UpstreamGauge>,
    /// Warm code-mode workers waiting for a run.
    pub code_workers_idle: usize,
    /// Code-mode runs in progress.
    pub code_runs_active: usize,
}

/// One upstream's calls so far, for the dashboard.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamCalls {
    /// Calls so far.
    pub calls: u64,
    /// Calls that did not end `ok` (tool errors included).
    pub errors: u64,
    /// The mean of the upstream's time per call, in milliseconds.
    pub mean_ms: f64,
}

/// Every family `GET /metrics` exposes.
pub struct Metrics {
    registry: Registry,
    /// Per-upstream sums the dashboard shows (the histograms keep buckets, not these).
    by_upstream: std::sync::Mutex<std::collections::HashMap<String, (u64, u64, f64)>>,
    calls: Family<CallLabels, Counter>,
    refused: Family<RefusalLabels, Counter>,
    upstream_latency: Family<UpstreamLabel, Histogram>,
    gateway_added: Family<SurfaceLabel, Histogram>,
    route_decisions: Family<DecisionLabel, Counter>,
    route_confidence: Family<DecisionLabel, Histogram>,
    tokens_sent: Family<TokenLabels, Counter>,
    direct_equivalent: Family<SurfaceLabel, Counter>,
    budget_shrunk: Counter,
    pages_open: Gauge,
    operations_open: Family<StateLabel, Gauge>,
    upstream_up: Family<UpstreamLabel, Gauge>,
    upstream_reconnects: Family<UpstreamLabel, Counter>,
    code_runs: Family<OutcomeLabel, Counter>,
    code_workers: Family<StateLabel, Gauge>,
    sessions: Family<EraLabel, Counter>,
    sessions_open: Family<EraLabel, Gauge>,
    fast_lane: Counter,
}

fn seconds() -> Histogram {
    // 0.5 ms to ~65 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("toolgate");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls by upstream, tool, surface (guided, direct, code) and outcome",
            calls.clone(),
        );
        let refused = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "tool_calls_refused",
            "Tool calls no upstream saw, by surface and reason (the refusal's code: not_visible for a name no tool of this caller has, scope, tier, invalid_arguments, ...)",
            refused.clone(),
        );
        let upstream_latency =
            Family::<UpstreamLabel, Histogram>::new_with_constructor(seconds as fn() -> Histogram);
        registry.register_with_unit(
            "upstream_call_duration",
            "Time the upstream took to answer a tool call",
            Unit::Seconds,
            upstream_latency.clone(),
        );
        let gateway_added =
            Family::<SurfaceLabel, Histogram>::new_with_constructor(seconds as fn() -> Histogram);
        registry.register_with_unit(
            "gateway_added_duration",
            "Time a tool call spent in the gateway, outside the upstream (policy, validation, shaping)",
            Unit::Seconds,
            gateway_added.clone(),
        );
        let route_decisions = Family::<DecisionLabel, Counter>::default();
        registry.register(
            "route_decisions",
            "Route answers by decision (select, clarify, exact, list, error)",
            route_decisions.clone(),
        );
        let route_confidence = Family::<DecisionLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(linear_buckets(0.1, 0.1, 9))) as fn() -> Histogram,
        );
        registry.register(
            "route_confidence",
            "The calibrated confidence of route's select and clarify decisions (0 to 1)",
            route_confidence.clone(),
        );
        let tokens_sent = Family::<TokenLabels, Counter>::default();
        registry.register(
            "tokens_sent",
            "Tokens (o200k) sent to clients, by surface and kind (result, definitions)",
            tokens_sent.clone(),
        );
        let direct_equivalent = Family::<SurfaceLabel, Counter>::default();
        registry.register(
            "direct_definition_tokens",
            "Tokens the same tools/list answers would have cost in direct mode (every tool's definition)",
            direct_equivalent.clone(),
        );
        let budget_shrunk = Counter::default();
        registry.register(
            "budget_shrunk_answers",
            "Answers made smaller because their session neared guided.session_budget_tokens",
            budget_shrunk.clone(),
        );
        let pages_open = Gauge::default();
        registry.register(
            "cursors_open",
            "Cursors of paged results kept for continue",
            pages_open.clone(),
        );
        let operations_open = Family::<StateLabel, Gauge>::default();
        registry.register(
            "operations",
            "Background operations kept, by state (running, finished)",
            operations_open.clone(),
        );
        let upstream_up = Family::<UpstreamLabel, Gauge>::default();
        registry.register(
            "upstream_up",
            "1 when the upstream is connected, else 0",
            upstream_up.clone(),
        );
        let upstream_reconnects = Family::<UpstreamLabel, Counter>::default();
        registry.register(
            "upstream_reconnects",
            "Times an upstream connected again after it had been connected",
            upstream_reconnects.clone(),
        );
        let code_runs = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "code_runs",
            "execute_code runs by outcome (ok, error, refused)",
            code_runs.clone(),
        );
        let code_workers = Family::<StateLabel, Gauge>::default();
        registry.register(
            "code_workers",
            "Code-mode sandbox workers: idle (warm, waiting) and running (runs in progress)",
            code_workers.clone(),
        );
        let sessions = Family::<EraLabel, Counter>::default();
        registry.register(
            "sessions",
            "Sessions opened, by protocol era (legacy: initialize and a session; stateless: 2026-07-28 requests)",
            sessions.clone(),
        );
        let sessions_open = Family::<EraLabel, Gauge>::default();
        registry.register(
            "sessions_open",
            "Legacy sessions open now",
            sessions_open.clone(),
        );
        let fast_lane = Counter::default();
        registry.register(
            "fast_lane_requests",
            "2026-07-28 tools/call requests answered by the HTTP front's fast lane (front/fast.rs); the others went through rmcp's transport",
            fast_lane.clone(),
        );
        Self {
            registry,
            by_upstream: Default::default(),
            calls,
            refused,
            upstream_latency,
            gateway_added,
            route_decisions,
            route_confidence,
            tokens_sent,
            direct_equivalent,
            budget_shrunk,
            pages_open,
            operations_open,
            upstream_up,
            upstream_reconnects,
            code_runs,
            code_workers,
            sessions,
            sessions_open,
            fast_lane,
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Metrics {
    /// One tool call of a catalog tool: its outcome and how long the upstream took.
    pub fn call(
        &self,
        surface: &'static str,
        upstream: &str,
        tool: &str,
        outcome: CallOutcomeKind,
        upstream_time: Duration,
    ) {
        let labels = CallLabels {
            upstream: upstream.to_string(),
            tool: tool.to_string(),
            surface,
            outcome: outcome.as_str(),
        };
        self.calls.get_or_create(&labels).inc();
        let up = UpstreamLabel {
            upstream: upstream.to_string(),
        };
        self.upstream_latency
            .get_or_create(&up)
            .observe(secs(upstream_time));
        let mut sums = self.by_upstream.lock().expect("by_upstream");
        let e = sums.entry(up.upstream).or_default();
        e.0 += 1;
        e.1 += u64::from(outcome != CallOutcomeKind::Ok);
        e.2 += secs(upstream_time);
    }

    /// A request the HTTP front's fast lane answered.
    pub fn fast_lane(&self) {
        self.fast_lane.inc();
    }

    /// `upstream`'s calls so far (zero when it has had none).
    pub fn upstream_calls(&self, upstream: &str) -> UpstreamCalls {
        let sums = self.by_upstream.lock().expect("by_upstream");
        let (calls, errors, total) = sums.get(upstream).copied().unwrap_or_default();
        UpstreamCalls {
            calls,
            errors,
            mean_ms: if calls == 0 {
                0.0
            } else {
                total * 1000.0 / calls as f64
            },
        }
    }

    /// Time a call spent in the gateway itself.
    pub fn gateway_added(&self, surface: &'static str, time: Duration) {
        (self.gateway_added.get_or_create(&SurfaceLabel { surface })).observe(secs(time));
    }

    /// One route answer; `confidence` for select and clarify.
    pub fn route(&self, decision: &'static str, confidence: Option<f64>) {
        let label = DecisionLabel { decision };
        self.route_decisions.get_or_create(&label).inc();
        if let Some(c) = confidence {
            self.route_confidence.get_or_create(&label).observe(c);
        }
    }

    /// Tokens sent to a client; `kind` is "result" or "definitions".
    pub fn tokens(&self, surface: &'static str, kind: &'static str, tokens: usize) {
        (self
            .tokens_sent
            .get_or_create(&TokenLabels { surface, kind }))
        .inc_by(tokens as u64);
    }

    /// What a tools/list of this surface would have cost in direct mode.
    pub fn direct_equivalent(&self, surface: &'static str, tokens: usize) {
        (self
            .direct_equivalent
            .get_or_create(&SurfaceLabel { surface }))
        .inc_by(tokens as u64);
    }

    /// An answer was shrunk to fit the session's token budget.
    pub fn budget_shrunk(&self) {
        self.budget_shrunk.inc();
    }

    /// `upstream` connected again after losing its connection.
    pub fn upstream_reconnected(&self, upstream: &str) {
        let up = UpstreamLabel {
            upstream: upstream.to_string(),
        };
        self.upstream_reconnects.get_or_create(&up).inc();
    }

    /// A tool call refused before any upstream saw it; `reason` is the refusal's code.
    pub fn refused(&self, surface: &'static str, reason: &'static str) {
        let labels = RefusalLabels { surface, reason };
        self.refused.get_or_create(&labels).inc();
    }

    /// One execute_code run; `outcome` is "ok", "error" or "refused".
    pub fn code_run(&self, outcome: &'static str) {
        self.code_runs
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// A session opened (`era`: "legacy" or "stateless"); legacy ones count as open
    /// until [`Metrics::session_closed`].
    pub fn session_opened(&self, era: &'static str) {
        self.sessions.get_or_create(&EraLabel { era }).inc();
        if era == "legacy" {
            self.sessions_open.get_or_create(&EraLabel { era }).inc();
        }
    }

    /// A legacy session ended.
    pub fn session_closed(&self) {
        (self
            .sessions_open
            .get_or_create(&EraLabel { era: "legacy" }))
        .dec();
    }

    /// The exposition in the classic Prometheus text format (0.0.4), which every scraper
    /// and `promtool check metrics` read: OpenMetrics names a counter family without its
    /// `_total` and adds `# UNIT` and `# EOF` lines, which that format does not have.
    pub fn encode_text(&self, state: &Snapshot) -> String {
        let open = self.encode(state);
        let counters: Vec<&str> = open
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
            .collect();
        let mut out = String::with_capacity(open.len());
        for line in open.lines() {
            if line.starts_with("# UNIT ") || line == "# EOF" {
                continue;
            }
            let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
                let rest = line.strip_prefix(p)?;
                let (name, tail) = rest.split_once(' ')?;
                counters
                    .contains(&name)
                    .then(|| format!("{p}{name}_total {tail}"))
            });
            out.push_str(renamed.as_deref().unwrap_or(line));
            out.push('\n');
        }
        out
    }

    /// The exposition as OpenMetrics text, with the gauges set from `state` first.
    pub fn encode(&self, state: &Snapshot) -> String {
        self.pages_open.set(state.pages_open as i64);
        let running = state.operations_running as i64;
        let op = |state| StateLabel { state };
        self.operations_open
            .get_or_create(&op("running"))
            .set(running);
        (self.operations_open.get_or_create(&op("finished")))
            .set(state.operations_open as i64 - running);
        for u in &state.upstreams {
            let label = UpstreamLabel {
                upstream: u.name.clone(),
            };
            self.upstream_up.get_or_create(&label).set(i64::from(u.up));
        }
        (self.code_workers.get_or_create(&op("idle"))).set(state.code_workers_idle as i64);
        (self.code_workers.get_or_create(&op("running"))).set(state.code_runs_active as i64);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
