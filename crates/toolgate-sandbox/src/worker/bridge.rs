//! The worker's side of the pipe: messages out (with the console cap) and the tool calls
//! a program has started and not yet seen answered.

use crate::protocol::ToGateway;
use rquickjs::Function;
use std::collections::HashMap;
use std::io::Write;

/// Messages to the gateway, one JSON line each.
pub(super) struct Output {
    writer: Box<dyn Write>,
    /// Console bytes still allowed.
    log_left: usize,
    /// Console bytes dropped past the cap (reported in `Done`).
    pub dropped_log_bytes: u64,
    /// Set once a write failed: the gateway is gone, so the run should stop.
    pub broken: bool,
}

impl Output {
    pub(super) fn new(writer: Box<dyn Write>, max_log_bytes: usize) -> Self {
        Self {
            writer,
            log_left: max_log_bytes,
            dropped_log_bytes: 0,
            broken: false,
        }
    }

    pub(super) fn send(&mut self, msg: &ToGateway) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let r = self
            .writer
            .write_all(&line)
            .and_then(|()| self.writer.flush());
        if r.is_err() {
            self.broken = true;
        }
        r
    }

    /// Sends a console line if it fits what is left of the cap; counts it otherwise.
    pub(super) fn log(&mut self, level: &str, mut text: String) {
        if self.log_left == 0 {
            self.dropped_log_bytes += text.len() as u64;
            return;
        }
        if text.len() > self.log_left {
            let mut cut = self.log_left;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.dropped_log_bytes += (text.len() - cut) as u64;
            text.truncate(cut);
        }
        self.log_left -= text.len();
        let _ = self.send(&ToGateway::Log {
            level: level.into(),
            text,
        });
    }
}

/// A call waiting for its answer: the promise's settle functions and what it called.
pub(super) struct Waiting<'js> {
    pub resolve: Function<'js>,
    pub reject: Function<'js>,
    pub server: String,
    pub tool: String,
}

/// Calls in flight and the count started, for the per-run call limit.
#[derive(Default)]
pub(super) struct Calls<'js> {
    pub waiting: HashMap<u64, Waiting<'js>>,
    /// Tool calls started (state requests do not count).
    pub started: u32,
    /// The last request id given out.
    pub last_id: u64,
}
