//! Code mode: the model writes a short JavaScript program; toolgate runs it in a sandbox
//! worker where each tool the caller may use is an async function, and only what the
//! program returns or logs reaches the model.
//!
//! - [`names`]: tool and server names as safe identifiers (`tools.<server>.<tool>`).
//! - [`typescript`]: JSON Schema to TypeScript declarations (`describe_tools`, route's
//!   `detail: "typescript"`).
//! - [`worker`]: one worker process per run: spawn, converse, kill at the deadline.
//! - [`pool`]: workers started ahead of time (`code.pool_size`), each still used once.
//! - [`answer`]: what the model sees of a run, within the output budget.
//! - [`state`]: `state.get/set`, small values kept per session between runs.
//! - [`history`]: finished runs kept a while, so one can be proposed as a skill.
//! - [`pii`]: session-scoped tokens for PII leaving a run, restored when passed back.
//! - [`flows`]: `[code.flows]` rules, where restored PII may go.
//! - [`workspace`]: files kept per principal between runs (`fs` over `./workspace`).
//! - [`tree`]: the tool tree (`fs` over `./servers`), TypeScript per tool.
//!
//! The sandbox itself (QuickJS, the OS limits) is the `toolgate-sandbox` crate; running a
//! program or a skill (above the gate and the engine, which take these services) is
//! the `programs` module.

pub(crate) mod answer;
pub(crate) mod flows;
pub(crate) mod history;
pub(crate) mod names;
pub(crate) mod pii;
pub(crate) mod pool;
pub(crate) mod state;
pub(crate) mod tree;
pub(crate) mod typescript;
pub(crate) mod worker;
pub(crate) mod workspace;

/// `text` on one line (whitespace collapsed), cut to at most `max` bytes with an ellipsis.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.len() <= max {
        return line;
    }
    let mut end = max.saturating_sub(3);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use toolgate_core::catalog::{Catalog, ToolRecord};
use toolgate_sandbox::protocol::ToolEntry;

/// The `tools` layout of a run and the records behind it: every tool in `catalog` (the
/// policy module narrows this to what the caller may use).
pub(crate) type ToolSet = (Vec<ToolEntry>, HashMap<(String, String), Arc<ToolRecord>>);

/// Every tool of `catalog` as a run lays them out (`tools.<server>.<tool>`), and the records behind them.
pub fn tools_for(catalog: &Catalog) -> ToolSet {
    tools_where(catalog, |_| true)
}

/// Like [`tools_for`], holding only the tools `keep` lets through (what the caller's key
/// may call), so a program cannot even name the rest.
pub(crate) fn tools_where(
    catalog: &Catalog,
    keep: impl Fn(&toolgate_core::catalog::ToolRecord) -> bool,
) -> ToolSet {
    let kept: Vec<_> = catalog.tools().iter().filter(|t| keep(t)).collect();
    let pairs: Vec<(String, String)> = kept
        .iter()
        .map(|t| (t.id.server.clone(), t.id.name.clone()))
        .collect();
    let entries = names::assign(&pairs);
    let allowed = kept
        .iter()
        .map(|t| ((t.id.server.clone(), t.id.name.clone()), (*t).clone()))
        .collect();
    (entries, allowed)
}

/// Runs in progress per owner (see `Caller::limit_owner`: an API key, else a session), so
/// one caller cannot take every worker; the gateway holds one for all its sessions. The
/// owner `""` is no caller's: it counts every run, for the gateway-wide worker limit.
#[derive(Default)]
pub(crate) struct RunSlots {
    running: Mutex<HashMap<String, usize>>,
}

/// A run's slot; given back when dropped.
pub(crate) struct Slot<'a> {
    slots: &'a RunSlots,
    key: String,
}

impl RunSlots {
    /// A slot for `key`, unless it already has `max` runs going.
    pub(crate) fn take(&self, key: &str, max: usize) -> Option<Slot<'_>> {
        let mut running = self.running.lock().expect("run slots");
        let n = running.entry(key.to_string()).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self,
            key: key.to_string(),
        })
    }

    /// Runs in progress, every key together (for `/metrics`).
    pub(crate) fn running_total(&self) -> usize {
        self.running.lock().expect("run slots").values().sum()
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut running = self.slots.running.lock().expect("run slots");
        if let Some(n) = running.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.key);
            }
        }
    }
}

/// The program without the markdown fence a model may have put around it.
pub(crate) fn strip_fences(code: &str) -> &str {
    let t = code.trim();
    match t.strip_prefix("```") {
        Some(rest) => {
            let body = rest.split_once('\n').map_or("", |(_, b)| b);
            body.trim_end()
                .strip_suffix("```")
                .unwrap_or(body)
                .trim_end()
        }
        None => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_stripped() {
        assert_eq!(strip_fences("```js\nreturn 1\n```\n"), "return 1");
        assert_eq!(strip_fences("```\nreturn 1"), "return 1");
        assert_eq!(strip_fences("  return `x`  "), "return `x`");
    }

    #[test]
    fn slots_are_bounded_and_given_back() {
        let s = RunSlots::default();
        let a = s.take("k", 2).unwrap();
        let _b = s.take("k", 2).unwrap();
        assert!(s.take("k", 2).is_none());
        assert!(s.take("other", 2).is_some());
        drop(a);
        assert!(s.take("k", 2).is_some());
    }
}
