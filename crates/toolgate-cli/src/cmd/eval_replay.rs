//! `toolgate eval route --replay`: how route learns from the choices models make.
//!
//! The queries whose `split` is `"tune"` are the traffic (queries without a split are
//! halved by a stable hash of their text: half traffic, half test). The traffic runs
//! through route as a model would use it, from three principals in turn: a clarification
//! whose candidates hold the expected tool is answered by executing it, else the model
//! browses by names (`detail: "names"`, ten) and executes the expected tool if listed; each
//! such choice is a learned example. `--poison F`: that share of the traffic, all from one
//! more principal, executes a wrong candidate. The test queries are then routed with what
//! was learned after 0, 100, 1,000 and all traffic tasks (the learning curve).

use anyhow::{bail, Result};
use serde_json::json;
use std::io::Write;
use toolgate_core::catalog::{LabelledQuery, ToolRecord};
use toolgate_route::route_with;
use toolgate_route::{
    Evidence, Learned, LearnedExample, LearningSettings, Retriever, RouteDecision, RouteOptions,
    MAX_BROWSE,
};

/// The principals the traffic comes from, in turn.
const PRINCIPALS: [&str; 3] = ["model-a", "model-b", "model-c"];
/// The one principal whose share of the traffic executes wrong candidates.
const POISONER: &str = "poisoner";
/// How many names a browse lists (route's default for `detail: "names"`).
const BROWSE: usize = 10;

/// One test query's outcome under what was learned.
struct Tested {
    selected: bool,
    right: bool,
    p1: bool,
    r5: f32,
}

/// Runs the replay and prints the curve (and with `json` the per-query lines first).
pub(crate) fn run(
    index: &dyn Retriever,
    queries: Vec<LabelledQuery>,
    opts: &RouteOptions,
    poison: f64,
    json: bool,
) -> Result<()> {
    if !(0.0..=1.0).contains(&poison) {
        bail!("--poison is {poison}: give a share of the traffic from 0 to 1, e.g. 0.05");
    }
    let (traffic, test): (Vec<_>, Vec<_>) = queries.into_iter().partition(is_traffic);
    if traffic.is_empty() || test.is_empty() {
        bail!("--replay needs both traffic and test queries: mark some with \"split\": \"tune\", or leave the split out so the queries are halved");
    }
    let settings = LearningSettings::default();
    let destructive = |t: &ToolRecord| t.annotation("destructiveHint") == Some(true);
    let mut learned = Learned::new(settings.clone());
    let checkpoints: Vec<usize> = [0, 100, 1000]
        .into_iter()
        .filter(|c| *c < traffic.len())
        .chain([traffic.len()])
        .collect();
    let poisoned_every = if poison > 0.0 {
        (1.0 / poison).round().max(1.0) as usize
    } else {
        usize::MAX
    };
    let mut curve = Vec::new();
    let mut done = 0;
    let mut taught = 0;
    let mut out = std::io::stdout().lock();
    for &upto in &checkpoints {
        while done < upto {
            let q = &traffic[done];
            let poisoned = poisoned_every != usize::MAX && done % poisoned_every == 0;
            let who = if poisoned {
                POISONER
            } else {
                PRINCIPALS[done % PRINCIPALS.len()]
            };
            if let Some((server, name)) = choose(index, &learned, q, who, poisoned, opts) {
                taught += usize::from(learned.record(LearnedExample {
                    task: q.query.clone(),
                    server,
                    name,
                    principal: who.into(),
                    profile: String::new(),
                    at_ms: done as u64,
                }));
            }
            done += 1;
        }
        let last = upto == traffic.len();
        let tested: Vec<Tested> = test
            .iter()
            .map(|q| {
                let evidence = learned.evidence(&q.query, PRINCIPALS[0], "");
                let d = route_with(index, &q.query, opts, &evidence, &settings, &destructive);
                if json && last {
                    let cold = route_with(
                        index,
                        &q.query,
                        opts,
                        &Evidence::default(),
                        &settings,
                        &destructive,
                    );
                    let cold_first = cold.ranked().first().map(|(t, _)| t.id.to_string());
                    let votes = evidence.votes.first().map(|v| {
                        json!({"tool": format!("{}/{}", v.server, v.name), "share": evidence.share,
                               "best": v.best, "principals": v.principals, "examples": v.examples})
                    });
                    let ranked: Vec<_> = d
                        .ranked()
                        .iter()
                        .take(opts.depth)
                        .map(|(t, s)| json!({"server": t.id.server, "name": t.id.name, "score": s}))
                        .collect();
                    let _ = writeln!(
                        out,
                        "{}",
                        json!({"query": q.query, "expected": q.expected, "ranked": ranked,
                               "decision": decision_word(&d), "confidence": d.confidence(),
                               "learned": votes, "cold_first": cold_first,
                               "cold_decision": decision_word(&cold)})
                    );
                }
                measure(&d, q)
            })
            .collect();
        curve.push(point(upto, learned.len(), &tested));
    }
    let summary = json!({
        "traffic": traffic.len(),
        "test": test.len(),
        "poison": poison,
        "learned": learned.len(),
        "taught": taught,
        "curve": curve,
        "without_learning": {"p_at_1": curve[0]["p_at_1"], "r_at_5": curve[0]["r_at_5"]},
        "with_learning": {"p_at_1": curve[curve.len() - 1]["p_at_1"], "r_at_5": curve[curve.len() - 1]["r_at_5"]},
    });
    if json {
        writeln!(out, "{summary}")?;
        return Ok(());
    }
    writeln!(
        out,
        "traffic {}  test {}  poison {poison}  learned {}",
        traffic.len(),
        test.len(),
        learned.len()
    )?;
    writeln!(
        out,
        "{:>8}  {:>7}  {:>8}  {:>6}  {:>6}  {:>6}",
        "after", "learned", "selected", "right", "P@1", "R@5"
    )?;
    for p in &curve {
        writeln!(
            out,
            "{:>8}  {:>7}  {:>8.3}  {:>6.3}  {:>6.3}  {:>6.3}",
            p["after"].as_u64().unwrap_or(0),
            p["learned"].as_u64().unwrap_or(0),
            p["select_rate"].as_f64().unwrap_or(0.0),
            p["selections_right"].as_f64().unwrap_or(0.0),
            p["p_at_1"].as_f64().unwrap_or(0.0),
            p["r_at_5"].as_f64().unwrap_or(0.0)
        )?;
    }
    Ok(())
}

/// Traffic: `split` is "tune"; without a split, half the queries by a stable hash.
fn is_traffic(q: &LabelledQuery) -> bool {
    match q.split.as_deref() {
        Some(s) => s == "tune",
        None => fnv1a(q.query.as_bytes()).is_multiple_of(2),
    }
}

/// FNV-1a, 64 bits: the same halves on every machine and release.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What the model executes for one traffic task after a clarification or a browse, if
/// that teaches anything (a selection teaches nothing: the model made no choice).
fn choose(
    index: &dyn Retriever,
    learned: &Learned,
    q: &LabelledQuery,
    who: &str,
    poisoned: bool,
    opts: &RouteOptions,
) -> Option<(String, String)> {
    let evidence = learned.evidence(&q.query, who, "");
    let never = |_: &ToolRecord| false;
    let d = route_with(index, &q.query, opts, &evidence, &learned.settings, &never);
    let RouteDecision::Clarify { candidates, .. } = &d else {
        return None;
    };
    let expected = |t: &ToolRecord| q.expected.iter().any(|e| *e == t.id.to_string());
    if poisoned {
        let wrong = candidates
            .iter()
            .chain(d.ranked().iter().map(|(t, _)| t))
            .find(|t| !expected(t))?;
        return Some((wrong.id.server.clone(), wrong.id.name.clone()));
    }
    if let Some(t) = candidates.iter().find(|t| expected(t)) {
        return Some((t.id.server.clone(), t.id.name.clone()));
    }
    let listed = index.rank(&q.query, None, BROWSE.min(MAX_BROWSE));
    listed
        .iter()
        .find(|(t, _)| expected(t))
        .map(|(t, _)| (t.id.server.clone(), t.id.name.clone()))
}

fn decision_word(d: &RouteDecision) -> &'static str {
    match d {
        RouteDecision::Select { .. } => "select",
        RouteDecision::Clarify {
            nothing_fits: true, ..
        } => "none",
        RouteDecision::Clarify { .. } => "clarify",
    }
}

fn measure(d: &RouteDecision, q: &LabelledQuery) -> Tested {
    let is = |t: &ToolRecord| q.expected.iter().any(|e| *e == t.id.to_string());
    let ranked = d.ranked();
    let found = q
        .expected
        .iter()
        .filter(|e| ranked.iter().take(5).any(|(t, _)| t.id.to_string() == **e))
        .count();
    Tested {
        selected: d.selected().is_some(),
        right: d.selected().is_some_and(|t| is(t)),
        p1: ranked.first().is_some_and(|(t, _)| is(t)),
        r5: found as f32 / q.expected.len().max(1) as f32,
    }
}

fn point(after: usize, learned: usize, tested: &[Tested]) -> serde_json::Value {
    let n = tested.len().max(1) as f64;
    let selected = tested.iter().filter(|t| t.selected).count();
    let right = tested.iter().filter(|t| t.right).count();
    json!({
        "after": after,
        "learned": learned,
        "select_rate": selected as f64 / n,
        "selections_right": if selected == 0 { 1.0 } else { right as f64 / selected as f64 },
        "p_at_1": tested.iter().filter(|t| t.p1).count() as f64 / n,
        "r_at_5": tested.iter().map(|t| f64::from(t.r5)).sum::<f64>() / n,
    })
}
