//! `toolgate tokens` and `toolgate lint` run as a user runs them, on realcat.

use std::process::Command;
use toolgate::catalog::file::datasets_dir;

fn realcat() -> String {
    let path = datasets_dir().join("realcat/catalog.json");
    assert!(
        path.exists(),
        "realcat is missing at {}: set TOOLGATE_DATASETS to the shared datasets folder",
        path.display()
    );
    path.display().to_string()
}

fn toolgate(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .expect("toolgate runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn tokens_json_has_numeric_totals_and_server_rows() {
    let (code, out) = toolgate(&["tokens", "--catalog", &realcat(), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in ["direct", "slim", "local", "guided"] {
        assert!(
            v["totals"][k].as_u64().is_some_and(|n| n > 0),
            "totals.{k}: {}",
            v["totals"]
        );
    }
    assert_eq!(v["servers"].as_array().unwrap().len(), 15);
    assert_eq!(v["encoding"], "o200k_base");
}

#[test]
fn lint_exit_codes() {
    let cat = realcat();
    let (code, _) = toolgate(&["lint", "--catalog", &cat]);
    assert_eq!(code, 0, "findings alone do not fail");
    let (code, _) = toolgate(&["lint", "--catalog", &cat, "--deny"]);
    assert_eq!(code, 1, "--deny fails on findings");
    let (code, out) = toolgate(&[
        "lint",
        "--catalog",
        &cat,
        "--profile",
        "local",
        "--deny",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["findings"].as_array().unwrap().len(), 0);
    assert!(v["counts"].as_object().unwrap().values().all(|n| n == 0));
    let (code, _) = toolgate(&["lint", "--catalog", "/nonexistent.json"]);
    assert_eq!(code, 2, "an unreadable catalog is an error");
}
