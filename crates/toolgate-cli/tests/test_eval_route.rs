//! `toolgate eval route` run as a user runs it, on two small labelled sets cut from the
//! demo catalog: per-query JSON with the decision's features, and `--leave-one-out` with
//! its per-catalog threshold table and `--params` applied to it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The demo catalog the fixture serves (`toolgate fixture --demo`).
fn demo_catalog() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../toolgate-fixture/demo/catalog.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Writes a set folder: the demo's tools of `servers`, and `queries` as (task, expected).
fn write_set(root: &Path, name: &str, servers: &[&str], queries: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let tools: Vec<Value> = demo_catalog()
        .into_iter()
        .filter(|e| servers.contains(&e["server"].as_str().unwrap()))
        .collect();
    std::fs::write(dir.join("catalog.json"), Value::from(tools).to_string()).unwrap();
    let lines: Vec<String> = queries
        .iter()
        .map(|(q, e)| serde_json::json!({"query": q, "expected": [e]}).to_string())
        .collect();
    std::fs::write(dir.join("queries.jsonl"), lines.join("\n")).unwrap();
    dir
}

/// Two sets of ten tasks each (two in each tuning split).
fn sets(root: &Path) -> (PathBuf, PathBuf) {
    let work = write_set(
        root,
        "work",
        &["tickets", "docs", "calendar"],
        &[
            ("open a support ticket", "tickets/create_issue"),
            ("add a comment to issue WEB-12", "tickets/add_comment"),
            ("read the wiki page on deploys", "docs/get_page"),
            ("list my calendar for tomorrow", "calendar/list_events"),
            (
                "find free slots for a meeting with Ana",
                "calendar/find_free_slots",
            ),
            ("delete the wiki page of old runbooks", "docs/delete_page"),
            (
                "search issues for the login regression",
                "tickets/search_issues",
            ),
            ("cancel the standup event", "calendar/cancel_event"),
            ("assign the issue to Bob", "tickets/assignIssue"),
            (
                "create a calendar event for Friday",
                "calendar/create_event",
            ),
        ],
    );
    let ops = write_set(
        root,
        "ops",
        &["mail", "files", "metrics", "deploy"],
        &[
            ("send an email to the team", "mail/send_email"),
            (
                "list the files in the reports directory",
                "files/list_directory",
            ),
            ("roll back the payments service", "deploy/rollback"),
            ("which alerts are firing", "metrics/list_alerts"),
            ("restart the web service", "deploy/restart_service"),
            ("list the newest messages in my inbox", "mail/list_inbox"),
            ("share the file with Carla", "files/share_file"),
            (
                "silence the disk alert for an hour",
                "metrics/silence_alert",
            ),
            ("set the api service to 5 replicas", "deploy/scaleService"),
            (
                "download the attachment of that message",
                "mail/get-attachment",
            ),
        ],
    );
    (work, ops)
}

fn toolgate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .expect("toolgate runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn json_lines_carry_the_decisions_features() {
    let root = tempfile::tempdir().unwrap();
    let (work, _) = sets(root.path());
    let (code, out, err) = toolgate(&[
        "eval",
        "route",
        "--catalog",
        &s(&work.join("catalog.json")),
        "--queries",
        &s(&work.join("queries.jsonl")),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 11, "ten queries and the summary: {out}");
    for q in &lines[..10] {
        let f = q["features"].as_object().unwrap_or_else(|| panic!("{q}"));
        for name in ["softmax_logit", "margin", "name_share", "task_explained"] {
            assert!(f[name].is_number(), "{name} in {q}");
        }
        assert!(f.values().all(Value::is_number), "{q}");
        assert_eq!(q["may_select"], true, "{q}");
    }
    // The first task is right and selects, with the features that made it confident.
    assert_eq!(lines[0]["decision"], "select", "{}", lines[0]);
    assert_eq!(lines[0]["features"]["name_share"], 1.0, "{}", lines[0]);
    assert!(lines[10]["p_at_1"].as_f64().unwrap() > 0.5, "{}", lines[10]);
}

#[test]
fn leave_one_out_reports_each_catalogs_threshold_and_takes_params() {
    let root = tempfile::tempdir().unwrap();
    let (work, ops) = sets(root.path());
    let (work, ops) = (s(&work), s(&ops));
    let run = |extra: &[&str]| {
        let mut args = vec!["eval", "route", "--leave-one-out", &work, &ops];
        args.extend_from_slice(extra);
        toolgate(&args)
    };
    let (code, out, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("The threshold each left-out set needs"),
        "{out}"
    );
    let row = |out: &str, prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no row {prefix} in {out}"))
            .to_string()
    };
    // | work | test | 8 | P@1 | ...: the default ranking finds most of the tasks' tools.
    let p_at_1 = |line: &str| -> f64 { line.split('|').nth(4).unwrap().trim().parse().unwrap() };
    assert!(p_at_1(&row(&out, "| work | test |")) >= 0.5, "{out}");
    assert!(row(&out, "| ops | ").contains('|'));
    assert!(out.contains("(chosen: the lowest"), "{out}");
    // A threshold given is used, and said to be given, not chosen.
    let (code, given, err) = run(&["--threshold", "0.9"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        given.contains("measured on the left-out set; threshold 0.90\n(given by --threshold)"),
        "{given}"
    );
    // --params reaches the leave-one-out ranking: with every field weighing nothing no
    // tool scores, so nothing is found.
    let (code, zero, err) = run(&["--params", r#"{"weights":[0,0,0,0,0,0,0]}"#]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p_at_1(&row(&zero, "| work | test |")), 0.0, "{zero}");
    let (code, _, err) = run(&["--params", r#"{"k2":1}"#]);
    assert_ne!(code, 0);
    assert!(err.contains("--params is not BM25F parameters"), "{err}");
}

/// `--replay`: the tuning tasks are traffic a model answers, the rest are tested after it.
/// Reworded scaling tasks, asked cold, select once two principals chose the same tool;
/// `--json` prints each test query and the curve; a poison share outside 0..=1 is refused.
#[test]
fn replay_learns_from_the_traffic_and_prints_the_curve() {
    let root = tempfile::tempdir().unwrap();
    let dir = write_set(
        root.path(),
        "ops",
        &["mail", "files", "metrics", "deploy"],
        &[],
    );
    let lines: Vec<String> = [
        ("scale the web deployment to 5 replicas", "tune"),
        ("scale the api deployment to 3 replicas", "tune"),
        ("scale the worker deployment to 2 replicas", "tune"),
        ("scale the payments deployment to 4 replicas", "test"),
    ]
    .iter()
    .map(|(q, split)| {
        serde_json::json!({"query": q, "expected": ["deploy/scaleService"], "split": split})
            .to_string()
    })
    .collect();
    let queries = dir.join("queries.jsonl");
    std::fs::write(&queries, lines.join("\n")).unwrap();
    let catalog = s(&dir.join("catalog.json"));
    let args = [
        "eval",
        "route",
        "--catalog",
        &catalog,
        "--queries",
        &s(&queries),
        "--replay",
    ];
    let (code, out, err) = toolgate(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one test query and the summary: {out}");
    let q = &lines[0];
    for key in ["query", "ranked", "decision", "confidence"] {
        assert!(q.get(key).is_some(), "{key} in {q}");
    }
    assert_eq!(q["decision"], "select", "{q}");
    let summary = &lines[1];
    assert_eq!(summary["traffic"], 3, "{summary}");
    // Two principals' choices teach; by the third task route selects, and a selection
    // teaches nothing (no model chose).
    assert_eq!(summary["learned"], 2, "{summary}");
    let curve = summary["curve"].as_array().unwrap();
    assert_eq!(curve[0]["select_rate"], 0.0, "cold, route asks: {summary}");
    assert_eq!(curve[curve.len() - 1]["select_rate"], 1.0, "{summary}");
    assert_eq!(curve[curve.len() - 1]["selections_right"], 1.0, "{summary}");
    // The table, and a poison share that is not a share.
    let (code, out, err) = toolgate(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("after  learned  selected"), "{out}");
    let (code, _, err) = toolgate(&[&args[..], &["--poison", "2"]].concat());
    assert_ne!(code, 0);
    assert!(err.contains("--poison"), "{err}");
}
