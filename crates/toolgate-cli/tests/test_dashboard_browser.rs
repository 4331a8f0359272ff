//! `/ui` in a real browser: headless Chromium (Debian `chromium`) driven by npm
//! `playwright-core` (`tests/browser/dashboard.cjs`) against a gateway with real fixture
//! upstreams. The page loads without console errors, shows the direct total `toolgate
//! tokens --json` prints, updates after real calls, refuses a key without `admin`, and
//! leaves a screenshot (`artifacts/dashboard.png`, or `$TOOLGATE_SCREENSHOT`). Skipped
//! with a message when chromium or playwright-core is missing; with CI set, a failure.

mod common;
use common::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const ADMIN: &str = "tg_admin_key_for_the_browser";
const READER: &str = "tg_reader_key_for_the_browser";

fn hash(key: &str) -> String {
    let h = toolgate::hash_key(key);
    format!(
        "sha256:{}",
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where playwright-core is: `$TOOLGATE_BROWSER_MODULES`, `$TOOLGATE_PEERS/browser`, or
/// the worktree's `.peers-extra`.
fn modules() -> Option<PathBuf> {
    let mut places: Vec<PathBuf> = Vec::new();
    if let Some(m) = std::env::var_os("TOOLGATE_BROWSER_MODULES") {
        places.push(m.into());
    }
    if let Some(p) = std::env::var_os("TOOLGATE_PEERS") {
        places.push(PathBuf::from(p).join("browser/node_modules"));
    }
    places.push(repo().join(".peers-extra/node_modules"));
    places
        .into_iter()
        .find(|p| p.join("playwright-core").is_dir())
}

/// The node process, killed if the test fails before it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_dashboard_in_headless_chromium_shows_the_token_figures_and_updates() {
    let chromium = PathBuf::from("/usr/bin/chromium");
    if !chromium.exists() {
        return common::skip("/usr/bin/chromium is missing (apt-get install chromium)");
    }
    let Some(modules) = modules() else {
        return common::skip("npm playwright-core is missing (see .ci/run, section \"browser\")");
    };
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let alpha = dir.stdio_upstream("alpha", "alpha", &[]);
    let beta_table = format!("[upstreams.beta]\nurl = {:?}\n", beta.url);
    let keys = format!(
        "[guided]\nsession_budget_tokens = 20000\n[policy.audit]\npath = {:?}\n[policy.keys.ops]\nhash = {:?}\nscopes = [\"admin\", \"*\"]\n[policy.keys.reader]\nhash = {:?}\nscopes = [\"*\"]\n",
        dir.path("audit.jsonl").display().to_string(),
        hash(ADMIN),
        hash(READER)
    );
    let path = dir.config("mode = \"guided\"", &[alpha, beta_table, keys]);
    let report = tokens_json(&path, &[]);
    let direct = report["totals"]["direct"].to_string();

    let gw = HttpGateway::start(&path, &[]);
    let shot = std::env::var_os("TOOLGATE_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("artifacts/dashboard.png"));
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let mut node = KillOnDrop(
        Command::new("node")
            .arg(repo().join("tests/browser/dashboard.cjs"))
            .env("NODE_PATH", &modules)
            .env("TG_BASE", gw.base())
            .env("TG_ADMIN", ADMIN)
            .env("TG_READER", READER)
            .env("TG_DIRECT", &direct)
            .env("TG_SCREENSHOT", &shot)
            .env("CHROMIUM", &chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let node = &mut node.0;
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    if first != "loaded" {
        let status = node.wait().unwrap();
        panic!("the page did not load as expected ({status}; see FAIL above)");
    }
    // Real calls with the admin key, then tell the page to look again.
    let client = {
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        use rmcp::ServiceExt;
        let config = StreamableHttpClientTransportConfig::with_uri(gw.url.clone())
            .auth_header(ADMIN.to_string());
        let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
        test_client().0.serve(transport).await.expect("initialize")
    };
    let _ = tool_names(&client).await;
    let r = call(
        &client,
        "route",
        json!({"task": "fetch the quarterly report"}),
    )
    .await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "hello"}}),
    )
    .await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    let mut stdin = node.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let last = lines.next().and_then(Result::ok).unwrap_or_default();
    let status = node.wait().unwrap();
    assert!(
        status.success() && last == "ok",
        "the browser check failed ({status}; see FAIL above)"
    );
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a screenshot at {}",
        shot.display()
    );
    eprintln!("screenshot: {}", shot.display());
    client.cancel().await.unwrap();
}
