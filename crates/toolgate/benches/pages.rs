//! Paging a large tool result: the time to shape 1 MiB and 4 MiB of text into pages of the
//! default budget (o200k), as `execute` does with a result over budget.
//!
//! Run: `cargo bench -p toolgate --bench pages`. Prints the median of 5 runs per size and
//! the time per MiB (a one-pass pager keeps that flat as the size grows).

use std::time::Instant;
use toolgate_core::call::CallOutcome;
use toolgate_core::exec::{shape, DEFAULT_BUDGET};
use toolgate_route::shape::Encoding;

fn main() {
    // Log-like text: lines of words, numbers and punctuation, as tools return.
    let line = "2026-11-30T12:00:00Z INFO request id=4f2a path=/api/v1/items?page=3 took 12.5 ms; user alice@example.com ok\n";
    let count = |s: &str| Encoding::O200k.count(s);
    println!("| result | pages | median | per MiB |");
    println!("|---|---|---|---|");
    for mib in [1usize, 4] {
        let text = line.repeat(mib * (1 << 20) / line.len());
        let mut times = Vec::new();
        let mut pages = 0;
        for _ in 0..5 {
            let outcome = CallOutcome {
                content: vec![serde_json::json!({"type": "text", "text": text})],
                structured_content: None,
                is_error: false,
                meta: None,
            };
            let t = Instant::now();
            let shaped = shape(outcome, None, DEFAULT_BUDGET, &count);
            times.push(t.elapsed().as_secs_f64());
            pages = shaped.total_pages;
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "| {mib} MiB | {pages} | {:.0} ms | {:.0} ms |",
            median * 1000.0,
            median * 1000.0 / mib as f64
        );
    }
}
