//! Each session's token account at the front: what `tools/list` and `tools/call` sent is
//! counted in `observe::Ledger` (under the session, or the principal for a 2026-07-28
//! client; an answer's count runs after it has gone, `observe::Tally`), and with `guided.session_budget_tokens` set, `execute` answers shrink as the
//! count nears the budget: smaller pages, and a note saying so and suggesting `fields`.
//! Route decisions are noted here too, for `/metrics` and the dashboard.

use super::Session;
use crate::gateway::Gateway;
use crate::policy::Caller;
use rmcp::model::{CallToolResult, Tool};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use toolgate_core::observe::Sent;
use toolgate_route::shape::Encoding;

/// From this share of the budget on, answers shrink.
const NEAR: f64 = 0.75;
/// Answers larger than this are estimated (4 bytes a token) rather than counted. Counting
/// takes about 1 s per MiB (README, the paging benchmark); it runs after the answer has
/// gone, but a queue of large answers would keep the figures waiting. A guided page
/// (4,000 tokens by default) is below it and counted exactly, a large direct result is
/// estimated.
const COUNT_LIMIT: usize = 16 * 1024;

/// Whose count a request adds to.
pub(super) struct Account {
    key: String,
    label: String,
    era: &'static str,
    surface: &'static str,
}

/// One tools/call as the account sees it: whose it is, which meta-tool (guided), the
/// budget's pressure when it called, and route's arguments (for the route log).
pub(super) struct Turn {
    account: Account,
    meta: Option<&'static str>,
    pressure: Option<Pressure>,
    route_args: Option<Map<String, Value>>,
}

/// The budget's state for one answer, when the count is near it.
struct Pressure {
    spent: usize,
    budget: usize,
    /// The page size execute is held to.
    page: usize,
}

impl Session {
    /// The account of this request: the session (legacy) or the principal (2026-07-28).
    pub(super) fn account(&self, context: &RequestContext<RoleServer>, caller: &Caller) -> Account {
        let surface = caller.surface;
        if super::request::modern(context) {
            let principal = caller.principal();
            return Account {
                label: principal.as_str().to_string(),
                key: format!("principal:{}", principal.as_str()),
                era: "stateless",
                surface,
            };
        }
        Account {
            key: format!("session:{}", self.state.id),
            label: format!(
                "session {}",
                toolgate_core::principal::redacted(&self.state.id)
            ),
            era: "legacy",
            surface,
        }
    }
}

impl Session {
    /// Before a tools/call runs: its account, and `execute` narrowed near the budget.
    pub(super) fn turn(
        &self,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
        name: &str,
        args: &mut Map<String, Value>,
    ) -> Turn {
        use crate::guided::surface::{CONTINUE, EXECUTE, EXECUTE_CODE, ROUTE};
        let account = self.account(context, caller);
        let bare = name.strip_prefix(self.engine.meta_prefix());
        let guided = self.surface() == super::Surface::Guided;
        let meta = [ROUTE, EXECUTE, CONTINUE, EXECUTE_CODE]
            .into_iter()
            .find(|m| guided && bare == Some(*m));
        let pressure = pressure(&self.engine.gw, &account);
        if let (Some(p), Some(EXECUTE)) = (&pressure, meta) {
            narrow(args, p);
        }
        Turn {
            route_args: (meta == Some(ROUTE)).then(|| args.clone()),
            pressure: pressure.filter(|_| matches!(meta, Some(EXECUTE | CONTINUE))),
            account,
            meta,
        }
    }
}

fn add(gw: &Gateway, account: &Account, what: Sent) -> usize {
    let (sent, new) = gw.observe.ledger.add(
        &account.key,
        &account.label,
        account.era,
        account.surface,
        what,
    );
    if new && account.era == "stateless" {
        gw.metrics().session_opened("stateless");
    }
    sent
}

/// Counts a tools/list answer: what was sent, and what direct mode would have sent.
pub(super) fn listed(gw: &Gateway, account: &Account, tools: &[Tool], direct: usize) {
    let sent = serde_json::to_string(tools).map_or(0, |t| count(&t));
    let metrics = gw.metrics();
    metrics.tokens(account.surface, "definitions", sent);
    metrics.direct_equivalent(account.surface, direct);
    add(gw, account, Sent::Definitions { sent, direct });
}

/// How near the budget `account` is, when it is near enough for answers to shrink.
fn pressure(gw: &Gateway, account: &Account) -> Option<Pressure> {
    let budget = gw.guided().session_budget_tokens?;
    gw.settle_tally();
    let spent = gw.observe.ledger.spent(&account.key);
    if (spent as f64) < budget as f64 * NEAR {
        return None;
    }
    let left = budget.saturating_sub(spent);
    // A quarter of what is left, never below execute's smallest page.
    let page = (left / 4).clamp(100, gw.guided().budget_tokens);
    Some(Pressure {
        spent,
        budget,
        page,
    })
}

/// Holds an `execute` to the page size `pressure` allows (its own `max_tokens` when smaller).
fn narrow(args: &mut Map<String, Value>, pressure: &Pressure) {
    let asked = args.get("max_tokens").and_then(Value::as_u64);
    if asked.is_none() && args.get("max_tokens").is_some_and(|v| !v.is_null()) {
        return; // not a number: execute says so
    }
    let page = asked.map_or(pressure.page, |a| (a as usize).min(pressure.page));
    args.insert("max_tokens".into(), json!(page));
}

/// After a tools/call: counts the answer (adding the budget's note when it was shrunk),
/// notes a route decision and a program's outcome.
pub(super) fn answered(gw: &Arc<Gateway>, turn: Turn, result: &mut CallToolResult) {
    let Turn {
        account,
        meta,
        pressure,
        route_args,
    } = turn;
    if meta == Some(crate::guided::surface::EXECUTE_CODE) {
        let failed = result.is_error == Some(true);
        gw.observe
            .metrics
            .code_run(if failed { "error" } else { "ok" });
    }
    if let Some(args) = route_args {
        routed(gw, &args, result.structured_content.as_ref());
    }
    if let Some(p) = pressure {
        let note = format!(
            "[toolgate] this session has been sent {} of its {} tokens (guided.session_budget_tokens), so answers are now cut to {} tokens a page: pass \"fields\" to execute to get only the parts you need",
            p.spent, p.budget, p.page
        );
        if let Some(Value::Object(s)) = result.structured_content.as_mut() {
            s.insert(
                "budget".into(),
                json!({"sentTokens": p.spent, "budgetTokens": p.budget, "pageTokens": p.page, "note": note}),
            );
        }
        result.content.push(rmcp::model::ContentBlock::text(note));
        gw.metrics().budget_shrunk();
        add(gw, &account, Sent::Shrunk);
    }
    // Counted after the answer has gone (`observe::Tally`).
    let shown = shown_text(result);
    let counted = gw.clone();
    gw.observe.tally.run(move || {
        let tokens = count(&shown);
        counted
            .observe
            .metrics
            .tokens(account.surface, "result", tokens);
        add(&counted, &account, Sent::Result(tokens));
    });
}

/// What the model is shown of `result`, as counted: its content blocks or its structured
/// content, whichever is longer (clients show one or the other, and the counts follow the
/// lengths).
fn shown_text(result: &CallToolResult) -> String {
    let content = serde_json::to_string(&result.content).unwrap_or_default();
    let structured = (result.structured_content.as_ref())
        .and_then(|s| serde_json::to_string(s).ok())
        .unwrap_or_default();
    if structured.len() > content.len() {
        structured
    } else {
        content
    }
}

fn count(text: &str) -> usize {
    if text.len() > COUNT_LIMIT {
        return text.len() / 4;
    }
    Encoding::O200k.count(text)
}

/// Notes a route answer for `/metrics` and the dashboard, from its structured part.
fn routed(gw: &Gateway, args: &Map<String, Value>, structured: Option<&Value>) {
    let Some(s) = structured else {
        gw.metrics().route("error", None);
        return;
    };
    let confidence = s["confidence"].as_f64();
    let decision = match s["decision"].as_str() {
        Some("select") if confidence.is_some_and(|c| c >= 1.0) => "exact",
        Some("select") => "select",
        Some("clarify") => "clarify",
        Some("list") => "list",
        _ => "error",
    };
    gw.metrics().route(decision, confidence);
    let tool = (s["server"].as_str())
        .zip(s["name"].as_str())
        .map(|(a, b)| format!("{a}/{b}"));
    let task = args.get("task").and_then(Value::as_str).unwrap_or("");
    (gw.observe.routes).push(decision, confidence, task, tool.as_deref());
}
