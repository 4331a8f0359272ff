//! The audit trail end to end, over HTTP with real fixture upstreams: a call is recorded when
//! it starts and when it ends, calls of unknown tools are recorded, argument hashes are keyed,
//! `toolgate audit verify` finds an edited record, a cut head and a forged line, SIGHUP
//! reopens the log for rotation (the gateway keeps serving; the new file names the one it
//! continues), and floods of unauthenticated requests are counted, not written.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use serde_json::{json, Value};
use std::process::Command;

fn verify(args: &[&str]) -> (bool, String) {
    let out = Command::new(toolgate())
        .args(["audit", "verify"])
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[tokio::test]
async fn calls_are_recorded_before_and_after_and_the_chain_verifies() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "direct", "");
    let gw = HttpGateway::start(&config, &[]);
    let c = connect_as(&gw.url, READER).await;
    let r = call_on(&c, "files_read_file", json!({"path": "/etc/motd"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = call_on(&c, "files_no_such_tool", json!({})).await;
    assert!(is_error(&r));

    let read: Vec<Value> = audit(&dir)
        .into_iter()
        .filter(|r| r["tool"] == "read_file")
        .collect();
    let phases: Vec<&str> = read.iter().filter_map(|r| r["phase"].as_str()).collect();
    assert_eq!(phases, ["start", "end"], "{read:?}");
    assert_eq!(read[0]["callId"], read[1]["callId"]);
    assert_eq!(read[1]["outcome"], "ok");
    // The hash is keyed: not the plain SHA-256 a guesser could recompute.
    let hmac = read[0]["argumentsHmac"].as_str().unwrap();
    assert_eq!(hmac.len(), 64);
    assert!(read[0].get("argumentsSha256").is_none());
    let unknown: Vec<Value> = audit(&dir)
        .into_iter()
        .filter(|r| r["decision"] == "unavailable")
        .collect();
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert_eq!(unknown[0]["tool"], "files_no_such_tool");

    let (ok, out) = verify(&["--config", config.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("chain intact"), "{out}");

    // An edit anywhere is found, and named by line.
    let path = dir.path("audit.jsonl");
    let log = std::fs::read_to_string(&path).unwrap();
    let edited = log.replacen("\"key\":\"reader\"", "\"key\":\"admin\"", 1);
    assert_ne!(edited, log);
    std::fs::write(&path, edited).unwrap();
    let (ok, out) = verify(&["--config", config.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("audit.jsonl:1: the MAC does not match"),
        "{out}"
    );
}

#[tokio::test]
async fn sighup_reopens_the_log_and_the_gateway_keeps_serving() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "direct", "");
    let gw = HttpGateway::start(&config, &[]);
    let c = connect_as(&gw.url, READER).await;
    let r = call_on(&c, "files_read_file", json!({"path": "/a"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let path = dir.path("audit.jsonl");
    let rotated = dir.path("audit.jsonl.1");
    std::fs::rename(&path, &rotated).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gw.child.id() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    // The signal is handled asynchronously: call until a record lands in the new file.
    let mut reopened = false;
    for _ in 0..100 {
        let r = call_on(&c, "files_read_file", json!({"path": "/b"})).await;
        assert!(!is_error(&r), "the gateway still serves: {}", text(&r));
        if path.exists() {
            reopened = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        reopened,
        "no record was written to a new audit.jsonl after SIGHUP"
    );
    // The chain runs on from the rotated file into the new one.
    let secret = dir.path("audit.jsonl.secret");
    let (ok, out) = verify(&[
        rotated.to_str().unwrap(),
        path.to_str().unwrap(),
        "--secret-file",
        secret.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    // The new file alone begins at a rotation record that names the file it continues:
    // that file must be given too, or knowingly left out.
    let new_alone = [
        path.to_str().unwrap(),
        "--secret-file",
        secret.to_str().unwrap(),
    ];
    let (ok, out) = verify(&new_alone);
    assert!(!ok, "{out}");
    assert!(
        out.contains("begins at a rotation record") && out.contains("audit.jsonl (through seq"),
        "{out}"
    );
    let (ok, out) = verify(&[&new_alone[..], &["--from-rotation"]].concat());
    assert!(ok && out.contains("continues a chain"), "{out}");
}

/// A gateway that wrote a few records, stopped: its configuration and log.
async fn written_log(dir: &TestDir) -> (std::path::PathBuf, std::path::PathBuf) {
    let config = policy_config(dir, "direct", "");
    let mut gw = HttpGateway::start(&config, &[]);
    let c = connect_as(&gw.url, READER).await;
    for i in 0..4 {
        let r = call_on(&c, "files_read_file", json!({"path": format!("/{i}")})).await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    c.cancel().await.unwrap();
    gw.stop();
    (config, dir.path("audit.jsonl"))
}

#[tokio::test]
async fn verify_fails_a_log_whose_head_was_cut() {
    let dir = TestDir::new();
    let (config, path) = written_log(&dir).await;
    let log = std::fs::read_to_string(&path).unwrap();
    assert!(log.lines().count() >= 8, "{log}");
    let cut: String = log.lines().skip(3).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, cut).unwrap();
    let (ok, out) = verify(&["--config", config.to_str().unwrap()]);
    assert!(!ok, "a log without its first records verified: {out}");
    assert!(
        out.contains("audit.jsonl:1:") && out.contains("head of the log was cut"),
        "{out}"
    );
    // No rotation record to waive: --from-rotation does not make it pass.
    let (ok, out) = verify(&["--config", config.to_str().unwrap(), "--from-rotation"]);
    assert!(!ok, "{out}");
}

#[tokio::test]
async fn verify_fails_a_forged_line_instead_of_calling_it_torn() {
    let dir = TestDir::new();
    let (config, path) = written_log(&dir).await;
    let log = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.contains("\"latencyMs\":"))
        .expect("an end record");
    let forged = regex_free_nan(lines[end]);
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited[end] = forged;
    std::fs::write(&path, edited.join("\n") + "\n").unwrap();
    let (ok, out) = verify(&["--config", config.to_str().unwrap(), "--json"]);
    assert!(!ok, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["torn"], json!([]), "{v}");
    let at = format!("audit.jsonl:{}", end + 1);
    assert!(v["broken"][0]["at"].as_str().unwrap().ends_with(&at), "{v}");
}

/// `line` with its `latencyMs` value replaced by `NaN` (not JSON any more).
fn regex_free_nan(line: &str) -> String {
    let at = line.find("\"latencyMs\":").unwrap() + "\"latencyMs\":".len();
    let end = at + line[at..].find(',').unwrap();
    format!("{}NaN{}", &line[..at], &line[end..])
}

#[tokio::test]
async fn verify_with_a_config_elsewhere_finds_a_relative_log_and_its_secret_beside_the_config() {
    let dir = TestDir::new();
    let (config, path) = written_log(&dir).await;
    // The same configuration with the log's path relative (to the file's folder).
    let text = std::fs::read_to_string(&config).unwrap();
    let relative = text.replace(
        &format!("{:?}", path.display().to_string()),
        "\"audit.jsonl\"",
    );
    assert_ne!(relative, text);
    let config = dir.write("relative.toml", &relative);
    let elsewhere = tempfile::tempdir().unwrap();
    let out = Command::new(toolgate())
        .args(["audit", "verify", "--config"])
        .arg(&config)
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("chain intact"), "{said}");
}

#[tokio::test]
async fn a_flood_of_unauthenticated_requests_is_counted_not_written_line_by_line() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "direct", "");
    let mut gw = HttpGateway::start(&config, &[]);
    let http = reqwest::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    for _ in 0..300 {
        let r = http
            .post(&gw.url)
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    gw.stop();
    let auth: Vec<Value> = audit(&dir)
        .into_iter()
        .filter(|r| r["type"] == "auth")
        .collect();
    let one_by_one = auth
        .iter()
        .filter(|r| r.get("aggregated").is_none())
        .count();
    let counted: u64 = auth.iter().filter_map(|r| r["aggregated"].as_u64()).sum();
    assert!(one_by_one < 300, "{one_by_one} records for 300 refusals");
    assert_eq!(
        one_by_one as u64 + counted,
        300,
        "every refusal is written or counted"
    );
    let (ok, out) = verify(&["--config", config.to_str().unwrap()]);
    assert!(ok, "{out}");
}
