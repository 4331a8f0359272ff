//! What `/ui` draws: the page (one hand-written HTML file with its script, no CDN) and
//! its data as one JSON object: the catalog's definition cost per server and per tool on
//! each surface (the `toolgate tokens --json` report), each session's tokens against its
//! budget and against what direct mode would have cost, recent route decisions, what route
//! learned from the models' choices, the upstreams, and the last audit records.
//! `toolgate tokens --html` writes the same page with the catalog report inlined and
//! nothing live.

use crate::guided::Engine;
use crate::measure::TokenReport;
use crate::upstream::UpstreamStatus;
use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom};
use std::sync::{Arc, Mutex};
use toolgate_core::catalog::Catalog;
use toolgate_route::shape::Encoding;

/// The page; its script fetches `/ui/data` unless `inline` is given.
const PAGE: &str = include_str!("dashboard.html");
/// How many audit records the page gets (the newest).
const AUDIT_RECORDS: usize = 200;
/// How many learned examples the page gets (the newest).
const LEARNED_EXAMPLES: usize = 100;
/// How much of the audit log's end is read to find them.
const AUDIT_TAIL_BYTES: u64 = 256 * 1024;

/// The page, with `inline` data (a static file) or fetching `/ui/data` (live).
pub(crate) fn page(inline: Option<&Value>) -> String {
    let data = match inline {
        Some(v) => script_safe(&v.to_string()),
        None => "null".into(),
    };
    PAGE.replace("/*TOOLGATE_DATA*/null", &data)
}

/// JSON text made safe inside a `<script>` element: no `<`, `>` or `&` is left as itself
/// (`</script>` would end the element, and `<!--` followed by `<script` would make the
/// parser swallow the rest of the page, as a tool named `x<!--<script>` did). JSON has
/// these characters only inside strings, where `\u003c` means the same.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The static page of one catalog report (`toolgate tokens --html`).
pub fn static_page(report: &TokenReport) -> String {
    page(Some(&json!({"catalog": report, "static": true})))
}

/// The catalog report of the live catalog, counted once per snapshot.
fn catalog_report(engine: &Engine) -> Arc<Value> {
    static LAST: Mutex<Option<(Arc<Catalog>, Arc<Value>)>> = Mutex::new(None);
    let catalog = engine.gw.catalog();
    let mut last = LAST.lock().expect("report cache");
    if let Some((c, v)) = last.as_ref() {
        if Arc::ptr_eq(c, &catalog) {
            return v.clone();
        }
    }
    let opts = (engine.direct_config()).surface_options(engine.meta_prefix());
    let skills = engine.code_config().skills_dir.is_some();
    let report = TokenReport::build_with(&catalog, Encoding::O200k, &opts, skills);
    let value = Arc::new(serde_json::to_value(report).unwrap_or(Value::Null));
    *last = Some((catalog, value.clone()));
    value
}

/// Everything the live page draws.
pub(crate) fn data(engine: &Engine) -> Value {
    let gw = &engine.gw;
    let upstreams: Vec<Value> = gw
        .upstreams()
        .map(|u| {
            let status = u.status();
            let calls = gw.metrics().upstream_calls(u.name());
            let (connect_ms, error) = match &status {
                UpstreamStatus::Ready { latency } => (Some(latency.as_millis() as u64), None),
                UpstreamStatus::Retrying { error, .. } => (None, Some(error.clone())),
                _ => (None, None),
            };
            json!({
                "name": u.name(),
                "status": status.label(),
                "protocol": u.protocol(),
                "server": u.server_info(),
                "connectMs": connect_ms,
                "error": error,
                "calls": calls,
            })
        })
        .collect();
    gw.observe.tally.settle();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "catalog": *catalog_report(engine),
        "budgetTokens": gw.guided().session_budget_tokens,
        "sessions": gw.observe.ledger.recent(100),
        "routes": gw.observe.routes.all(),
        "upstreams": upstreams,
        "learned": learned(engine),
        "audit": audit_tail(engine),
    })
}

/// What route learned: how many examples, and the newest (who taught which tool what).
fn learned(engine: &Engine) -> Value {
    let (total, recent) = engine.learning().recent(LEARNED_EXAMPLES);
    json!({"total": total, "recent": recent})
}

/// The newest audit records, parsed (empty without an audit log).
fn audit_tail(engine: &Engine) -> Vec<Value> {
    let Some(path) = engine.policy.audit_path() else {
        return Vec::new();
    };
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(AUDIT_TAIL_BYTES);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    // A read from the middle starts inside a line: skip it.
    let lines = text.lines().skip(usize::from(start > 0));
    let mut records: Vec<Value> = lines.filter_map(|l| serde_json::from_str(l).ok()).collect();
    let drop = records.len().saturating_sub(AUDIT_RECORDS);
    records.drain(..drop);
    records
}

#[cfg(test)]
mod tests {
    #[test]
    fn inlined_data_holds_no_markup_and_reads_back_the_same() {
        let v = serde_json::json!({"tool": "x<!--<script></script>&amp;"});
        let safe = super::script_safe(&v.to_string());
        assert!(!safe.contains(['<', '>', '&']), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
    }
}
