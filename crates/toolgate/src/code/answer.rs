//! What the model sees of a run: `structuredContent {status, result, logs, calls,
//! truncated, error?}` and a text with the same facts. `calls` is always there, even after
//! a timeout or a crash, so the model knows which writes may have happened.
//!
//! The result and the console lines are cut so that the text and the structured copy
//! together stay within `output_bytes`; a cut sets `truncated`.

use super::worker::RunReport;
use serde_json::{json, Value};
use toolgate_core::meta::MetaResult;

/// Room kept for the status line, the call list and the JSON around them.
const FRAME_BYTES: usize = 512;

pub(crate) fn render(report: RunReport, output_bytes: usize) -> MetaResult {
    let calls: Vec<Value> = report
        .calls
        .iter()
        .map(|c| match c.ok {
            Some(ok) => json!({"server": c.server, "tool": c.tool, "ok": ok, "ms": c.ms}),
            None => {
                json!({"server": c.server, "tool": c.tool, "ok": false, "ms": c.ms, "unfinished": true})
            }
        })
        .collect();
    let calls_bytes = Value::Array(calls.clone()).to_string().len();
    // Text and structured content each carry the result and the logs: half the budget each.
    let room = (output_bytes / 2)
        .saturating_sub(FRAME_BYTES + calls_bytes)
        .max(256);
    let mut truncated = report.truncated;
    let result_text = report.result.to_string();
    let log_bytes: usize = report.logs.iter().map(|l| l.len() + 4).sum();
    let result_room = if log_bytes == 0 {
        room
    } else {
        room.saturating_sub(log_bytes.min(room / 3))
    };
    let result = if result_text.len() > result_room {
        truncated = true;
        Value::String(format!(
            "{} [cut: the value is {} bytes as JSON; return less]",
            super::clip(&result_text, result_room.saturating_sub(60)),
            result_text.len()
        ))
    } else {
        report.result
    };
    let mut logs_left = room.saturating_sub(result.to_string().len());
    let mut logs = Vec::new();
    for line in report.logs {
        if line.len() + 4 > logs_left {
            truncated = true;
            break;
        }
        logs_left -= line.len() + 4;
        logs.push(line);
    }
    let ok = report.status == "ok";
    let mut structured = json!({
        "status": report.status,
        "result": result,
        "logs": logs,
        "calls": calls,
        "truncated": truncated,
    });
    let done = report.calls.iter().filter(|c| c.ok == Some(true)).count();
    let mut text = format!(
        "status: {}; {} tool call{} ({done} ok)",
        report.status,
        report.calls.len(),
        if report.calls.len() == 1 { "" } else { "s" }
    );
    if let Some(e) = &report.error {
        let mut error = json!({"name": e.name, "message": super::clip(&e.message, 1000)});
        for (k, v) in [("code", &e.code), ("server", &e.server), ("tool", &e.tool)] {
            if let Some(v) = v {
                error[k] = json!(v);
            }
        }
        text.push_str(&format!(
            "\nerror: {}: {}",
            e.name,
            super::clip(&e.message, 1000)
        ));
        structured["error"] = error;
    }
    if ok || !structured["result"].is_null() {
        text.push_str(&format!("\nresult: {}", structured["result"]));
    }
    if !structured["logs"].as_array().is_none_or(Vec::is_empty) {
        text.push_str("\nlogs:");
        for l in structured["logs"].as_array().into_iter().flatten() {
            text.push_str("\n  ");
            text.push_str(l.as_str().unwrap_or_default());
        }
    }
    let unfinished: Vec<String> = report
        .calls
        .iter()
        .filter(|c| c.ok.is_none())
        .map(|c| format!("{}/{}", c.server, c.tool))
        .collect();
    if !unfinished.is_empty() {
        text.push_str(&format!(
            "\nstill running when the run ended (they may have taken effect): {}",
            unfinished.join(", ")
        ));
    }
    if truncated {
        text.push_str("\n(output cut to fit; return or log less)");
    }
    MetaResult {
        content: vec![toolgate_core::exec::text_block(text)],
        structured: Some(structured),
        is_error: !ok,
        meta: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::worker::CallRecord;

    fn report(result: Value, logs: Vec<String>) -> RunReport {
        RunReport {
            status: "ok".into(),
            result,
            error: None,
            logs,
            calls: vec![CallRecord {
                server: "a".into(),
                tool: "t".into(),
                ok: None,
                ms: 3,
            }],
            truncated: false,
            origins: Default::default(),
            carried: Vec::new(),
        }
    }

    #[test]
    fn small_runs_pass_whole() {
        let r = render(report(json!({"rows": 5}), vec!["hi".into()]), 24 << 10);
        let s = r.structured.unwrap();
        assert_eq!(s["result"], json!({"rows": 5}));
        assert_eq!(s["logs"], json!(["hi"]));
        assert_eq!(s["truncated"], false);
        assert_eq!(s["calls"][0]["unfinished"], true);
        assert!(!r.is_error);
    }

    #[test]
    fn big_results_and_logs_are_cut_within_budget() {
        let big = json!("x".repeat(100_000));
        let logs = (0..1000)
            .map(|i| format!("line {i} {}", "y".repeat(50)))
            .collect();
        let r = render(report(big, logs), 24 << 10);
        let s = r.structured.clone().unwrap();
        assert_eq!(s["truncated"], true);
        let total = s.to_string().len() + r.content[0]["text"].as_str().unwrap().len();
        assert!(total <= 24 << 10, "{total}");
    }
}
