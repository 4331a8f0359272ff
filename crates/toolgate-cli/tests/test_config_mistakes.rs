//! Configuration mistakes that used to pass in silence, and errors that used to mislead:
//! each is now refused or reported by `toolgate check` (exit 1), naming the key and the fix.
//! Real `toolgate` processes over real fixture upstreams.

mod common;
use common::*;
use std::process::{Command, Output};

fn run(args: &[&str], config: &std::path::Path) -> Output {
    Command::new(toolgate())
        .args(args)
        .arg("--config")
        .arg(config)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn all_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_rename_of_a_tool_that_does_not_exist_fails_check() {
    let dir = TestDir::new();
    let up = dir.stdio_upstream("alpha", "alpha", &[]) + "rename = { ecko = \"say\" }\n";
    let config = dir.config("", &[up]);
    let out = run(&["check"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("upstreams.alpha.rename") && text.contains("no tool \"ecko\""),
        "{text}"
    );
}

#[test]
fn a_rename_onto_another_tools_name_is_not_applied_and_fails_check() {
    let dir = TestDir::new();
    let alpha = dir.stdio_upstream("alpha", "alpha", &[]) + "rename = { echo = \"beta_status\" }\n";
    let beta = dir.stdio_upstream("beta", "beta", &[]);
    let config = dir.config("", &[alpha, beta]);
    let out = run(&["check"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("\"echo\" = \"beta_status\" is not applied")
            && text.contains("beta/status already has that name"),
        "{text}"
    );
    // The tool that owns the name keeps answering to it.
    let out = run(&["tools", "--json"], &config);
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let owner = rows.iter().find(|r| r["exposed"] == "beta_status").unwrap();
    assert_eq!(owner["server"], "beta");
    let echo = rows.iter().find(|r| r["tool"] == "echo").unwrap();
    assert_eq!(echo["exposed"], "alpha_echo");
}

#[test]
fn a_pinned_tool_that_is_not_there_fails_check() {
    let dir = TestDir::new();
    let config = dir.config(
        "startup_wait_ms = 30000\n[guided]\npinned = [\"alpha/echo\", \"alpha/nope\", \"gamma/x\"]\n",
        &[dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let out = run(&["check"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("guided.pinned: \"alpha/nope\": alpha has no such tool"),
        "{text}"
    );
    assert!(
        text.contains("guided.pinned: \"gamma/x\": there is no upstream \"gamma\""),
        "{text}"
    );
    assert!(!text.contains("\"alpha/echo\""), "{text}");
}

#[test]
fn two_upstreams_with_one_prefix_are_refused_before_anything_starts() {
    let dir = TestDir::new();
    let beta = dir.stdio_upstream("beta", "beta", &[]) + "prefix = \"alpha\"\n";
    let config = dir.config("", &[dir.stdio_upstream("alpha", "alpha", &[]), beta]);
    let out = run(&["check"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("upstreams.beta.prefix = \"alpha\"") && text.contains("different `prefix`"),
        "{text}"
    );
}

#[test]
fn a_missing_cwd_is_reported_as_a_missing_folder() {
    let dir = TestDir::new();
    let up = dir.stdio_upstream("alpha", "alpha", &[]).replace(
        "connect_timeout_secs = 10",
        "connect_timeout_secs = 10\ncwd = \"/nonexistent/toolgate-folder\"",
    );
    let config = dir.config("", &[up]);
    let out = run(&["check"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("upstreams.alpha.cwd") && text.contains("/nonexistent/toolgate-folder"),
        "{text}"
    );
    assert!(!text.contains("on PATH"), "{text}");
}

#[test]
fn a_child_that_dies_before_initialize_shows_its_stderr_in_check() {
    let dir = TestDir::new();
    let up = "[upstreams.dying]\ncommand = \"/bin/sh\"\n\
              args = [\"-c\", \"echo 'error: GITHUB_TOKEN is not set' >&2; exit 3\"]\n"
        .to_string();
    let config = dir.config("", &[up]);
    let out = run(&["check"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("exit status: 3") && text.contains("error: GITHUB_TOKEN is not set"),
        "{text}"
    );
    // `tools` says so too, and fails.
    let out = run(&["tools"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("GITHUB_TOKEN is not set"), "{text}");
}

#[test]
fn an_unreachable_http_upstream_is_described_without_rust_type_names() {
    // A port nothing listens on: bind one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = TestDir::new();
    let up = format!(
        "[upstreams.docs]\nurl = \"http://127.0.0.1:{port}/mcp\"\nconnect_timeout_secs = 10\n"
    );
    let config = dir.config("", &[up]);
    let out = run(&["check", "--json"], &config);
    let text = all_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    let detail = row["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("127.0.0.1:{port}")) && detail.contains("Connection refused"),
        "{detail}"
    );
    assert!(
        !detail.contains("::") && !detail.contains("WorkerTransport"),
        "{detail}"
    );
}

#[test]
fn wrong_types_are_explained_in_a_persons_words() {
    let dir = TestDir::new();
    let config = dir.write(
        "bad.toml",
        "[upstreams.a]\ncommand = \"x\"\ncall_timeout_secs = \"ten\"\n",
    );
    let text = all_text(&run(&["check"], &config));
    assert!(text.contains("expected a number of seconds"), "{text}");
    let config = dir.write(
        "bad.toml",
        "[upstreams.a]\ncommand = \"x\"\nargs = \"-v\"\n",
    );
    let text = all_text(&run(&["check"], &config));
    assert!(text.contains("expected an array of strings"), "{text}");
    assert!(
        !text.contains("sequence") && !text.contains("f64"),
        "{text}"
    );
}

#[test]
fn a_telemetry_endpoint_without_the_otel_feature_says_how_to_build() {
    let dir = TestDir::new();
    let up = dir.stdio_upstream("alpha", "alpha", &[]);
    let config = dir.config(
        "",
        &[up + "\n[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\n"],
    );
    let out = run(&["check"], &config);
    let text = all_text(&out);
    // A configuration error exits 2, before anything starts.
    if cfg!(feature = "otel") {
        assert!(!text.contains("--features otel"), "{text}");
    } else {
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains("--features otel"), "{text}");
    }
    let bad = dir.config(
        "",
        &["[telemetry]\nendpoint = \"127.0.0.1:4318\"\nspans = true\n".into()],
    );
    let text = all_text(&run(&["check"], &bad));
    assert!(text.contains("spans"), "an unknown key is named: {text}");
}
