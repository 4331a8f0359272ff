//! What the gateway has done, counted: the Prometheus metrics behind `GET /metrics`
//! ([`Metrics`]), each session's running token count against its budget ([`Ledger`]),
//! the recent route decisions the dashboard draws ([`RouteLog`]), the spans of a call's
//! path with their W3C trace context ([`trace`]), and the thread that counts answers'
//! tokens off the request path ([`Tally`]).
//!
//! A leaf: it imports nothing else of the crate, so every call path may call into it
//! (one call where a call's outcome is known) and it never calls back. Labels are
//! bounded: upstream and tool names come from the configuration and the catalog, the
//! rest are fixed words; no task text and no arguments ever become a label.

mod ledger;
mod metrics;
mod route_log;
mod tally;
pub mod trace;

pub use ledger::{Ledger, Sent, SessionUse};
pub use metrics::{CallOutcomeKind, Metrics, Snapshot, UpstreamCalls, UpstreamGauge};
pub use route_log::{RouteEvent, RouteLog};
pub use tally::Tally;

/// Everything observed, one per gateway (`Gateway::observe`).
#[derive(Default)]
pub struct Observer {
    /// The Prometheus metrics.
    pub metrics: Metrics,
    /// Each session's token count.
    pub ledger: Ledger,
    /// The recent route decisions.
    pub routes: RouteLog,
    /// Token counts that run after their answer has gone: settle it before reading the
    /// metrics or the ledger.
    pub tally: Tally,
}
