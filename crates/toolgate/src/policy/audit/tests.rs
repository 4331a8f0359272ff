//! The audit log's own tests: records, keyed hashes, reopening, recovery, bounded floods.
use super::file::rfc3339;
use super::*;
use std::fs::OpenOptions;
use std::io::Write;

fn record<'a>(args: &'a Map<String, Value>, verdict: Verdict) -> CallRecord<'a> {
    CallRecord {
        session: "s",
        key: "ci",
        subject: None,
        profile: None,
        surface: "direct",
        server: "alpha",
        tool: "echo",
        call_id: "c1",
        phase: None,
        visible: true,
        tier: "read",
        arguments: args,
        verdict,
        reason: Some("no".into()),
        approved: None,
        outcome: None,
        error: None,
        latency: None,
        result_tokens: None,
        code: None,
        run: None,
        upstream_token: None,
    }
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_failed_write_is_reported_to_the_caller() {
    // /dev/full accepts the open and fails every write (ENOSPC), like a full disk.
    let Ok(log) = AuditLog::open(Path::new("/dev/full"), false, Some("k")) else {
        return;
    };
    assert!(log.failure().is_none());
    let args = Map::new();
    assert!(log.call(&record(&args, Verdict::Refused), true).is_err());
    assert!(log.failure().is_some());
}

#[test]
fn times_are_rfc3339() {
    assert_eq!(rfc3339(Duration::ZERO), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        rfc3339(Duration::from_millis(1_709_251_199_123)),
        "2024-02-29T23:59:59.123Z"
    );
}

#[test]
fn records_append_across_reopens_and_the_chain_continues() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let args = serde_json::from_value(json!({"secret": "s3"})).unwrap();
    let rec = record(&args, Verdict::Refused);
    AuditLog::open(&path, false, None)
        .unwrap()
        .call(&rec, true)
        .unwrap();
    AuditLog::open(&path, true, None)
        .unwrap()
        .call(&rec, false)
        .unwrap();
    let lines = lines(&path);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["decision"], "refused");
    assert!(
        lines[0].get("arguments").is_none(),
        "arguments only when asked"
    );
    assert_eq!(lines[1]["arguments"]["secret"], "s3");
    assert_eq!(lines[0]["argumentsHmac"], lines[1]["argumentsHmac"]);
    assert_eq!(
        (lines[0]["seq"].as_u64(), lines[1]["seq"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(lines[1]["prev"], lines[0]["mac"]);
    // The secret was made once, beside the log, and the chain verifies under it.
    let secret = std::fs::read(secret_path(&path)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let v = chain::verify(&secret, &[&text], false);
    assert!(v.intact() && v.records == 2, "{v:?}");
}

#[test]
fn argument_hashes_are_keyed() {
    let dir = tempfile::tempdir().unwrap();
    let args = serde_json::from_value(json!({"pin": "123456"})).unwrap();
    let hash = |secret: &str, name: &str| {
        let path = dir.path().join(name);
        AuditLog::open(&path, false, Some(secret))
            .unwrap()
            .call(&record(&args, Verdict::Refused), false)
            .unwrap();
        lines(&path)[0]["argumentsHmac"].clone()
    };
    let plain = chain::mac(b"", Value::Object(args.clone()).to_string().as_bytes());
    assert_ne!(hash("one", "a.jsonl"), json!(plain));
    assert_ne!(hash("one", "b.jsonl"), hash("two", "c.jsonl"));
}

#[test]
fn a_reopen_follows_a_rotated_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let log = AuditLog::open(&path, false, Some("k")).unwrap();
    let args = Map::new();
    log.call(&record(&args, Verdict::Refused), false).unwrap();
    std::fs::rename(&path, dir.path().join("a.jsonl.1")).unwrap();
    reopen_all();
    log.call(&record(&args, Verdict::Refused), false).unwrap();
    let new = lines(&path);
    assert_eq!(new.len(), 2, "the record went to the new file");
    assert_eq!(new[0]["seq"], 2);
    assert_eq!(
        new[0]["type"], "rotation",
        "the new file names the one it continues"
    );
    assert_eq!(new[0]["continuesSeq"], 1);
    assert_eq!(new[1]["seq"], 3);
    let old = std::fs::read_to_string(dir.path().join("a.jsonl.1")).unwrap();
    let new = std::fs::read_to_string(&path).unwrap();
    assert!(chain::verify(b"k", &[&old, &new], false).intact());
    assert!(!chain::verify(b"k", &[&new], false).intact());
    assert!(chain::verify(b"k", &[&new], true).intact());
}

#[test]
fn a_log_recovers_when_the_disk_does_and_closes_the_torn_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let log = AuditLog::open(&path, false, Some("k")).unwrap();
    let args = Map::new();
    log.call(&record(&args, Verdict::Refused), false).unwrap();
    // The disk fills: the write fails, part of a line may be left behind.
    let real = {
        let mut w = log.writer.lock().unwrap();
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        w.file.replace(full)
    };
    assert!(log.call(&record(&args, Verdict::Refused), false).is_err());
    assert!(log.failure().is_some());
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"time\":\"torn")
        .unwrap();
    // Space is freed: the next record is written, on a line of its own.
    log.writer.lock().unwrap().file = real;
    log.call(&record(&args, Verdict::Refused), false).unwrap();
    assert!(log.failure().is_none());
    let text = std::fs::read_to_string(&path).unwrap();
    let v = chain::verify(b"k", &[&text], false);
    assert!(v.intact(), "{v:?}");
    assert_eq!((v.records, v.torn), (2, vec![(0, 2)]));
}

#[test]
fn unauthenticated_refusals_past_the_limit_are_counted_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let log = AuditLog::open(&path, false, Some("k")).unwrap();
    for _ in 0..(AUTH_RECORDS_PER_WINDOW + 500) {
        log.rejected_key(None, "no key", "/mcp");
    }
    assert_eq!(lines(&path).len() as u64, AUTH_RECORDS_PER_WINDOW);
    drop(log);
    let all = lines(&path);
    let summary = all.last().unwrap();
    assert_eq!(summary["aggregated"], 500, "{summary}");
    assert_eq!(summary["paths"]["/mcp"], 500);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(chain::verify(b"k", &[&text], false).intact());
}
