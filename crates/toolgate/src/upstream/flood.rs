//! Bounds on what one upstream may send unasked: log messages and progress notifications
//! pass at a fixed rate per upstream (the rest are counted and dropped, as stderr lines
//! are), a log message's data is cut to a bounded size, and `list_changed` notifications
//! are coalesced (one pending change at most; the last one is never lost).

use serde_json::Value;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Log messages passed on (to callers and to the gateway's log) per second per upstream.
pub(super) const LOGS_PER_SEC: u32 = 50;
/// Progress notifications passed on per second per upstream.
pub(super) const PROGRESS_PER_SEC: u32 = 200;
/// The most of a log message's `data` kept, as JSON text; the rest is cut and marked.
pub(super) const LOG_DATA_MAX: usize = 8 * 1024;
/// The shortest time between two passed-on resource or prompt list changes of an upstream.
pub(super) const LIST_CHANGE_GAP: Duration = Duration::from_millis(200);

/// A fixed number of events per one-second window; what is over it is counted.
pub(super) struct Rate {
    per_sec: u32,
    window: Mutex<Window>,
}

struct Window {
    started: Instant,
    passed: u32,
    dropped: u64,
}

impl Rate {
    pub(super) fn new(per_sec: u32) -> Self {
        Self {
            per_sec,
            window: Mutex::new(Window {
                started: Instant::now(),
                passed: 0,
                dropped: 0,
            }),
        }
    }

    /// Whether this event passes; with it, how many were dropped in the window that just
    /// ended (for one line saying so), if any.
    pub(super) fn admit(&self) -> (bool, Option<u64>) {
        let mut w = self.window.lock().expect("rate window");
        let mut ended = None;
        if w.started.elapsed() >= Duration::from_secs(1) {
            if w.dropped > 0 {
                ended = Some(w.dropped);
            }
            *w = Window {
                started: Instant::now(),
                passed: 0,
                dropped: 0,
            };
        }
        if w.passed < self.per_sec {
            w.passed += 1;
            (true, ended)
        } else {
            w.dropped += 1;
            (false, ended)
        }
    }
}

/// `data` as it is passed on: whole when its JSON is at most `LOG_DATA_MAX` bytes, else a
/// string of the first bytes and a note of how many were cut.
pub(super) fn bounded_data(data: &Value) -> Value {
    let text = match data {
        Value::String(s) if s.len() <= LOG_DATA_MAX => return data.clone(),
        Value::String(s) => s.clone(),
        other => {
            let t = other.to_string();
            if t.len() <= LOG_DATA_MAX {
                return data.clone();
            }
            t
        }
    };
    let mut cut = LOG_DATA_MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Value::String(format!(
        "{}… [toolgate: {} more bytes cut]",
        &text[..cut],
        text.len() - cut
    ))
}

/// One connection's bounds, shared by its client handler's concurrent notification tasks.
pub(crate) struct Floodgate {
    pub logs: Rate,
    pub progress: Rate,
    /// Resource and prompt list changes, coalesced (`coalesce`).
    pub resources: tokio::sync::mpsc::Sender<()>,
    pub prompts: tokio::sync::mpsc::Sender<()>,
}

impl Floodgate {
    /// The bounds for one connection of `relay`'s upstream `name`; the coalescing tasks end
    /// with the connection's handler.
    pub(crate) fn new(
        name: std::sync::Arc<str>,
        relay: std::sync::Arc<super::requests::Relay>,
    ) -> Self {
        use super::requests::Notice;
        Self {
            logs: Rate::new(LOGS_PER_SEC),
            progress: Rate::new(PROGRESS_PER_SEC),
            resources: coalesce(name.clone(), relay.clone(), Notice::ResourcesChanged),
            prompts: coalesce(name, relay, Notice::PromptsChanged),
        }
    }
}

/// A sender whose signals become `notice`s at most once per `LIST_CHANGE_GAP`: one signal
/// waits in the channel's single slot while the last is passed on, the rest add nothing.
fn coalesce(
    name: std::sync::Arc<str>,
    relay: std::sync::Arc<super::requests::Relay>,
    notice: super::requests::Notice,
) -> tokio::sync::mpsc::Sender<()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            relay.notice(&name, notice.clone());
            tokio::time::sleep(LIST_CHANGE_GAP).await;
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_rate_passes_its_number_per_second_and_counts_the_rest() {
        let r = Rate::new(3);
        let passed = (0..10).filter(|_| r.admit().0).count();
        assert_eq!(passed, 3);
        tokio::time::advance(Duration::from_millis(1001)).await;
        assert_eq!(r.admit(), (true, Some(7)));
    }

    #[test]
    fn long_log_data_is_cut_and_says_so() {
        let small = serde_json::json!({"a": 1});
        assert_eq!(bounded_data(&small), small);
        let big = Value::String("é".repeat(LOG_DATA_MAX));
        let cut = bounded_data(&big);
        let s = cut.as_str().unwrap();
        assert!(
            s.len() < LOG_DATA_MAX + 100 && s.contains("more bytes cut"),
            "{}",
            s.len()
        );
    }
}
