//! The last route decisions, for the dashboard: when, what was decided, how confident,
//! and the task that was asked about. Kept in memory only, [`KEEP`] of them; the tasks
//! are shown to admin keys alone and never become metric labels.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// How many decisions are kept.
pub(super) const KEEP: usize = 500;
/// A task longer than this is cut (with "…") before it is kept.
pub(super) const TASK_CHARS: usize = 200;

/// One route decision, as the dashboard shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteEvent {
    /// Unix milliseconds.
    pub at_ms: u64,
    /// select, clarify, exact, list or error.
    pub decision: String,
    /// The decision's confidence, when it has one.
    pub confidence: Option<f64>,
    /// The task, trimmed and cut short.
    pub task: String,
    /// The selected tool (`server/name`), for a select.
    pub tool: Option<String>,
}

/// The last route decisions, oldest dropped first.
#[derive(Default)]
pub struct RouteLog {
    events: Mutex<VecDeque<RouteEvent>>,
}

impl RouteLog {
    /// Records one decision (the task is cut short).
    pub fn push(&self, decision: &str, confidence: Option<f64>, task: &str, tool: Option<&str>) {
        let trimmed = task.trim();
        let mut task: String = trimmed.chars().take(TASK_CHARS).collect();
        if trimmed.chars().count() > TASK_CHARS {
            task.push('…');
        }
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut events = self.events.lock().expect("route log");
        if events.len() >= KEEP {
            events.pop_front();
        }
        events.push_back(RouteEvent {
            at_ms,
            decision: decision.to_string(),
            confidence,
            task,
            tool: tool.map(str::to_string),
        });
    }

    /// Oldest first.
    pub fn all(&self) -> Vec<RouteEvent> {
        self.events
            .lock()
            .expect("route log")
            .iter()
            .cloned()
            .collect()
    }
}
