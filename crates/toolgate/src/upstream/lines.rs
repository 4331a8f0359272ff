//! Line reading with a maximum length: an over-long line is reported and skipped, never
//! buffered whole; its two ends are kept to find the JSON-RPC id it answered.
//!
//! Cancel-safe: rmcp's serve loop reads in a `select!` and drops the read whenever another
//! branch is ready first (a message to send, say), so a line may be dropped half read. What
//! was read of it stays here, and the next read goes on with it.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

pub(super) struct Lines<R> {
    reader: BufReader<R>,
    max: usize,
    /// The line read so far (empty past the limit: `dropped` keeps its ends then).
    buf: Vec<u8>,
    /// A line is under way: read in part by a read that was dropped.
    partial: bool,
    /// The line under way is over the limit.
    too_long: bool,
    /// The ends of the last line dropped as too long, until taken.
    pub dropped: Option<Dropped>,
}

/// The first and last bytes of a line too long to keep: enough to find its JSON-RPC id.
#[derive(Default)]
pub(super) struct Dropped {
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// Bytes kept of each end of a dropped line.
const END: usize = 4096;

impl Dropped {
    fn keep(&mut self, bytes: &[u8]) {
        if self.head.len() < END {
            let n = (END - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
        }
        self.tail
            .extend_from_slice(&bytes[bytes.len().saturating_sub(END)..]);
        if self.tail.len() > 2 * END {
            self.tail.drain(..self.tail.len() - END);
        }
    }

    /// The message's top-level `id`: near the start (`{"jsonrpc":"2.0","id":7,...`) or,
    /// as the TypeScript SDK writes it, at the end (`...,"jsonrpc":"2.0","id":7}`).
    pub(super) fn id(&self) -> Option<serde_json::Value> {
        let head = String::from_utf8_lossy(&self.head);
        let tail = String::from_utf8_lossy(&self.tail);
        top_level_id(&head).or_else(|| trailing_id(tail.trim_end()))
    }
}

/// The value of key `id` at depth 1 of a JSON object's beginning, if it comes before
/// any nested value is entered.
pub(crate) fn top_level_id(head: &str) -> Option<serde_json::Value> {
    let rest = head.trim_start().strip_prefix('{')?;
    let mut s = rest;
    loop {
        s = s.trim_start();
        let after_key = s.strip_prefix('"')?;
        let end = after_key.find('"')?;
        let key = &after_key[..end];
        s = after_key[end + 1..]
            .trim_start()
            .strip_prefix(':')?
            .trim_start();
        let value_end = scalar_end(s)?;
        if key == "id" {
            return serde_json::from_str(&s[..value_end]).ok();
        }
        s = s[value_end..].trim_start().strip_prefix(',')?;
    }
}

/// The value of a final `"id":VALUE}` of a JSON object's end.
fn trailing_id(tail: &str) -> Option<serde_json::Value> {
    let body = tail.strip_suffix('}')?;
    let at = body.rfind("\"id\"")?;
    let value = body[at + 4..].trim_start().strip_prefix(':')?.trim();
    serde_json::from_str::<serde_json::Value>(value)
        .ok()
        .filter(|v| v.is_number() || v.is_string())
}

/// Where a scalar (number, string without escapes, literal) at the start of `s` ends.
fn scalar_end(s: &str) -> Option<usize> {
    if let Some(rest) = s.strip_prefix('"') {
        return Some(rest.find('"')? + 2);
    }
    let end = s.find([',', '}'])?;
    (!s[..end].contains(['{', '['])).then_some(end)
}

pub(super) fn lines<R: AsyncRead + Unpin>(r: R, max: usize) -> Lines<R> {
    Lines {
        reader: BufReader::with_capacity(64 * 1024, r),
        max,
        buf: Vec::new(),
        partial: false,
        too_long: false,
        dropped: None,
    }
}

impl<R: AsyncRead + Unpin> Lines<R> {
    /// The next line without its newline; `None` at end of input. Cancel-safe (see the
    /// module): the only await is `fill_buf`, which consumes nothing, and what a chunk adds
    /// to the line is kept in `self` before the chunk is consumed.
    pub(super) async fn next_line(&mut self) -> Option<std::io::Result<String>> {
        if !self.partial {
            self.buf.clear();
            self.dropped = None;
            self.too_long = false;
            self.partial = true;
        }
        loop {
            let chunk = match self.reader.fill_buf().await {
                Ok(c) => c,
                Err(e) => return Some(Err(e)),
            };
            if chunk.is_empty() {
                return if self.buf.is_empty() && !self.too_long {
                    self.partial = false;
                    None
                } else {
                    Some(self.finish())
                };
            }
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if !self.too_long {
                // The limit is the message's: its newline does not count.
                if self.buf.len() + take - usize::from(done) > self.max {
                    self.too_long = true;
                    let mut dropped = Dropped::default();
                    dropped.keep(&self.buf);
                    self.buf.clear();
                    self.dropped = Some(dropped);
                } else {
                    self.buf.extend_from_slice(&chunk[..take]);
                }
            }
            if self.too_long {
                if let Some(d) = self.dropped.as_mut() {
                    d.keep(&chunk[..take]);
                }
            }
            self.reader.consume(take);
            if done {
                return Some(self.finish());
            }
        }
    }

    /// The line under way, ended: the next read starts a new one.
    fn finish(&mut self) -> std::io::Result<String> {
        self.partial = false;
        if self.too_long {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line longer than {} bytes was dropped", self.max),
            ));
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        Ok(String::from_utf8_lossy(&self.buf).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use tokio::io::AsyncWriteExt;

    /// A read dropped halfway through a line (as rmcp's `select!` drops it) loses nothing:
    /// the next read returns the whole line, then the next one.
    #[tokio::test]
    async fn a_read_dropped_mid_line_loses_nothing() {
        let (mut w, r) = tokio::io::duplex(1 << 20);
        let mut l = lines(r, 1 << 20);
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"{}\"}}",
            "y".repeat(200_000)
        );
        let (first, rest) = line.split_at(70_000);
        w.write_all(first.as_bytes()).await.unwrap();
        // Polled once: it reads what there is, finds no newline, waits; then it is dropped.
        assert!(l.next_line().now_or_never().is_none());
        assert!(l.next_line().now_or_never().is_none());
        w.write_all(rest.as_bytes()).await.unwrap();
        w.write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n")
            .await
            .unwrap();
        assert_eq!(l.next_line().await.unwrap().unwrap(), line);
        let next = l.next_line().await.unwrap().unwrap();
        assert_eq!(next, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
    }

    /// The same for a line over the limit: dropped once, reported once, with its id.
    #[tokio::test]
    async fn a_read_dropped_in_a_long_line_still_reports_it() {
        let (mut w, r) = tokio::io::duplex(1 << 20);
        let mut l = lines(r, 1000);
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":\"{}\"}}\n",
            "z".repeat(5000)
        );
        let (first, rest) = line.split_at(2500);
        w.write_all(first.as_bytes()).await.unwrap();
        assert!(l.next_line().now_or_never().is_none());
        w.write_all(rest.as_bytes()).await.unwrap();
        w.write_all(b"{\"id\":10}\n").await.unwrap();
        assert!(l.next_line().await.unwrap().is_err());
        assert_eq!(
            l.dropped.take().and_then(|d| d.id()),
            Some(serde_json::json!(9))
        );
        assert_eq!(l.next_line().await.unwrap().unwrap(), "{\"id\":10}");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

        /// Stdio framing: one item per line, in order; a line over the limit is an error
        /// whose id is found at either end, every other line comes back whole.
        #[test]
        fn every_line_comes_back_or_is_reported_with_its_id(
            msgs in prop::collection::vec((0u64..1000, 0usize..3000, any::<bool>(), "[ -~]{0,20}"), 1..12),
            max in 64usize..2048,
        ) {
            let mut text = String::new();
            for (id, pad, id_last, noise) in &msgs {
                let pad = "x".repeat(*pad);
                let noise = noise.replace('"', "'").replace('\\', "/");
                if *id_last {
                    text.push_str(&format!("{{\"result\":{{\"t\":\"{pad}{noise}\"}},\"jsonrpc\":\"2.0\",\"id\":{id}}}\n"));
                } else {
                    text.push_str(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"t\":\"{pad}{noise}\"}}}}\n"));
                }
            }
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(async {
                let mut l = lines(text.as_bytes(), max);
                for (n, expected) in text.lines().enumerate() {
                    let got = l.next_line().await.expect("one item per line");
                    let id = msgs[n].0;
                    match got {
                        Ok(line) => {
                            prop_assert!(expected.len() <= max, "line {n} over the limit came back");
                            prop_assert_eq!(line, expected);
                        }
                        Err(_) => {
                            prop_assert!(expected.len() > max, "line {n} within the limit was dropped");
                            let found = l.dropped.take().and_then(|d| d.id());
                            prop_assert_eq!(found, Some(serde_json::json!(id)));
                        }
                    }
                }
                prop_assert!(l.next_line().await.is_none());
                Ok(())
            })?;
        }
    }
}
