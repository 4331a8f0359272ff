//! `toolgate tokens` and `toolgate lint` run as a user runs them, on realcat.

mod common;

use std::process::Command;

/// realcat's path, or `None` when the shared datasets are missing (outside CI).
fn realcat() -> Option<String> {
    common::dataset_or_skip("realcat/catalog.json").map(|p| p.display().to_string())
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
    let Some(cat) = realcat() else { return };
    let (code, out) = toolgate(&["tokens", "--catalog", &cat, "--json"]);
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
    let Some(cat) = realcat() else { return };
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

/// `--config` and `--mcp-json`: the gateway starts, the fixture upstreams settle, and the
/// live catalog is measured with the configuration's `[direct]` options.
#[test]
fn tokens_and_lint_measure_a_live_configuration() {
    let dir = common::TestDir::new();
    let direct = "[direct]\nprofile = \"slim\"\n[direct.slim]\ndescription_max = 20\n";
    let cfg = dir.config(
        "",
        &[
            dir.stdio_upstream("alpha", "alpha", &[]),
            dir.stdio_upstream("beta", "beta", &[]),
            direct.to_string(),
        ],
    );
    let cfg = cfg.display().to_string();
    let (code, out) = toolgate(&["tokens", "--config", &cfg, "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tools"], 5);
    let servers: Vec<&str> = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["alpha", "beta"]);
    let t = &v["totals"];
    assert!(t["direct"].as_u64().unwrap() > 0);
    assert!(t["slim"].as_u64() < t["direct"].as_u64(), "{t}");

    let (code, out) = toolgate(&["lint", "--config", &cfg, "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["profile"], "slim", "the configured profile by default");
    assert_eq!(v["tools"], 5);

    let queries = dir.write(
        "queries.jsonl",
        "{\"query\": \"echo a message\", \"expected\": [\"alpha/echo\"]}\n\
         {\"query\": \"add numbers then get the Q3 report\", \"expected\": [\"alpha/add_numbers\", \"beta/get.report\"]}\n",
    );
    let q = queries.display().to_string();
    let (code, out) = toolgate(&["tokens", "--config", &cfg, "--simulate", &q, "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(v["profile"], "slim");
    for k in ["direct", "guided", "code"] {
        let sum: u64 = rows.iter().map(|r| r[k].as_u64().unwrap()).sum();
        assert_eq!(v["totals"][k].as_u64(), Some(sum), "{k}");
    }
    assert!(v["totals"]["ratio"].as_f64().unwrap() > 0.0);
    assert!(v["totals"]["code_ratio"].as_f64().unwrap() > 0.0);
    // Code mode: describe_tools, execute_code, the final answer, whatever the tool count.
    assert_eq!(rows[1]["code_requests"], 3, "{}", rows[1]);
    assert!(v["code_surface"].as_u64() > v["guided_surface"].as_u64());
    assert!(v["oracle"].as_str().unwrap().contains("execute_code"));
    let (code, out) = toolgate(&["tokens", "--config", &cfg, "--simulate", &q]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("code/direct") && out.contains("never reach the model"),
        "{out}"
    );

    // An mcpServers file works the same way.
    let alpha = serde_json::json!({"mcpServers": {"alpha": {
        "command": common::toolgate(),
        "args": ["fixture", "--catalog", dir.path("catalog.json"), "--server", "alpha"]}}});
    let mcp = dir.write("mcp.json", &alpha.to_string());
    let (code, out) = toolgate(&["lint", "--mcp-json", &mcp.display().to_string(), "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tools"], 3);
    assert_eq!(v["profile"], "raw");

    // With --catalog, --config only supplies options (and policy profiles): the catalog
    // file is what is measured, and no upstream is started for it.
    // The rest needs realcat.
    let Some(cat) = realcat() else { return };
    let (code, out) = toolgate(&["tokens", "--json", "--config", &cfg, "--catalog", &cat]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tools"], 589);
    for _ in 0..100 {
        if dir.processes().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(dir.processes().is_empty(), "upstream processes left behind");
}

#[test]
fn the_static_html_page_keeps_a_tool_name_that_looks_like_markup_inside_its_script() {
    let dir = common::TestDir::new();
    let name = "x<!--<script>";
    let catalog = serde_json::json!([{"server": "s", "tool": {"name": name,
        "description": "Ends </script><script>alert(1)</script> & more.",
        "inputSchema": {"type": "object"}}}]);
    let cat = dir.write("odd.json", &catalog.to_string());
    let html = dir.path("odd.html");
    let (code, _) = toolgate(&[
        "tokens",
        "--catalog",
        cat.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let page = std::fs::read_to_string(&html).unwrap();
    // The inlined data: what the script assigns to INLINE, up to the end of its line.
    let start = page.find("const INLINE = ").expect("the data line") + "const INLINE = ".len();
    let data = &page[start..start + page[start..].find(";\n").unwrap()];
    assert!(
        !data.contains(['<', '>', '&']),
        "markup left in the script: {data}"
    );
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    assert!(v.to_string().contains(name), "{v}");
    // The page has the one script element it was written with.
    assert_eq!(page.matches("<script").count(), 1);
}
