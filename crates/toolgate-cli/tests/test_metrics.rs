//! `/metrics`, `/ui/data` and the session budget against a real gateway process with real
//! fixture upstreams (one stdio child, one over HTTP): the counters move after real calls,
//! the exposition passes `promtool check metrics` (Debian `prometheus`; skipped with a
//! message when missing, a failure in CI), only an admin key reads them (and off loopback
//! only with `gateway.admin_allow_remote`), and a session
//! near `guided.session_budget_tokens` gets smaller pages with a note.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

const ADMIN: &str = "tg_admin_key_for_metrics";
const READER: &str = "tg_reader_key_for_metrics";

fn hash(key: &str) -> String {
    let h = toolgate::hash_key(key);
    format!(
        "sha256:{}",
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// A guided gateway over `alpha` (stdio child) and `beta` (an HTTP fixture).
fn config(dir: &TestDir, beta: &HttpFixture, extra: &str) -> std::path::PathBuf {
    dir.write("catalog.json", &test_catalog().to_string());
    let alpha = dir.stdio_upstream("alpha", "alpha", &[]);
    let beta = format!("[upstreams.beta]\nurl = {:?}\n", beta.url);
    dir.config(
        &format!("mode = \"guided\"\nstartup_wait_ms = 30000\n{extra}"),
        &[alpha, beta],
    )
}

async fn get(url: &str, key: Option<&str>) -> (u16, String) {
    let mut r = reqwest::Client::new().get(url);
    if let Some(k) = key {
        r = r.header("authorization", format!("Bearer {k}"));
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The value of the sample whose line starts with `name{` and carries every label given.
fn sample(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|lab| l.contains(lab)))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

fn promtool(text: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        return common::skip("promtool check: promtool is missing (apt-get install prometheus)");
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{text}"
    );
}

#[tokio::test]
async fn metrics_count_real_calls_and_pass_promtool() {
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let gw = HttpGateway::start(&config(&dir, &beta, ""), &[]);
    let metrics = format!("{}/metrics", gw.base());
    let (status, before) = get(&metrics, None).await;
    assert_eq!(status, 200, "{before}");
    promtool(&before);
    assert_eq!(sample(&before, "toolgate_tool_calls_total", &[]), 0.0);

    let (client, _) = connect_http(&gw.url).await;
    assert!(tool_names(&client).await.contains(&"route".to_string()));
    let r = call(&client, "route", json!({"task": "echo the message back"})).await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "hi"}}),
    )
    .await;
    assert!(text(&r).contains("hi"), "{}", text(&r));
    let r = call(
        &client,
        "execute",
        json!({"tool": "beta/status", "arguments": {}}),
    )
    .await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "x", "_error": true}}),
    )
    .await;
    assert!(r.is_error.unwrap_or(false), "{}", text(&r));
    let (direct, _) = connect_http(&format!("{}/mcp/direct", gw.base())).await;
    let r = call(&direct, "alpha_add_numbers", json!({"a": 2, "b": 3})).await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    // Calls no upstream sees are counted as refused, by reason, on every path.
    let r = call(&direct, "alpha_no_such_tool", json!({})).await;
    assert!(r.is_error.unwrap_or(false), "{}", text(&r));
    let r = call(&direct, "alpha_add_numbers", json!({"a": "two", "b": 3})).await;
    assert!(r.is_error.unwrap_or(false), "{}", text(&r));
    let r = call(&client, "execute", json!({"tool": "alpha/no_such_tool"})).await;
    assert!(r.is_error.unwrap_or(false), "{}", text(&r));

    let (_, after) = get(&metrics, None).await;
    promtool(&after);
    let refused = "toolgate_tool_calls_refused_total";
    for (surface, reason) in [
        ("direct", "not_visible"),
        ("direct", "invalid_arguments"),
        ("guided", "not_visible"),
    ] {
        let labels = [
            format!("surface=\"{surface}\""),
            format!("reason=\"{reason}\""),
        ];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        assert_eq!(
            sample(&after, refused, &labels),
            1.0,
            "{surface} {reason}: {after}"
        );
    }
    assert_eq!(sample(&after, refused, &[]), 3.0, "{after}");
    let echo = ["upstream=\"alpha\"", "tool=\"echo\"", "surface=\"guided\""];
    assert_eq!(
        sample(
            &after,
            "toolgate_tool_calls_total",
            &[&echo[..], &["outcome=\"ok\""]].concat()
        ),
        1.0,
        "{after}"
    );
    assert_eq!(
        sample(
            &after,
            "toolgate_tool_calls_total",
            &[&echo[..], &["outcome=\"tool_error\""]].concat()
        ),
        1.0,
        "{after}"
    );
    let beta_ok = ["upstream=\"beta\"", "tool=\"status\"", "outcome=\"ok\""];
    assert_eq!(
        sample(&after, "toolgate_tool_calls_total", &beta_ok),
        1.0,
        "{after}"
    );
    assert_eq!(
        sample(
            &after,
            "toolgate_tool_calls_total",
            &["surface=\"direct\"", "tool=\"add_numbers\""]
        ),
        1.0,
        "{after}"
    );
    assert_eq!(
        sample(
            &after,
            "toolgate_upstream_call_duration_seconds_count",
            &["upstream=\"alpha\""]
        ),
        3.0,
        "{after}"
    );
    assert_eq!(
        sample(&after, "toolgate_gateway_added_duration_seconds_count", &[]),
        4.0,
        "{after}"
    );
    let routed = sample(&after, "toolgate_route_decisions_total", &[]);
    assert_eq!(routed, 1.0, "{after}");
    assert!(
        sample(
            &after,
            "toolgate_tokens_sent_total",
            &["surface=\"guided\"", "kind=\"result\""]
        ) > 0.0
    );
    assert!(
        sample(
            &after,
            "toolgate_tokens_sent_total",
            &["kind=\"definitions\""]
        ) > 0.0
    );
    // Each tools/list the clients made counts what direct would have cost: more than guided's.
    let guided_defs = sample(
        &after,
        "toolgate_tokens_sent_total",
        &["surface=\"guided\"", "kind=\"definitions\""],
    );
    assert!(
        sample(
            &after,
            "toolgate_direct_definition_tokens_total",
            &["surface=\"guided\""]
        ) > 0.0
    );
    assert!(guided_defs > 0.0);
    assert_eq!(
        sample(&after, "toolgate_upstream_up", &["upstream=\"beta\""]),
        1.0,
        "{after}"
    );
    assert_eq!(
        sample(&after, "toolgate_sessions_total", &["era=\"legacy\""]),
        2.0,
        "{after}"
    );
    // No task text, no argument values in any label.
    assert!(
        !after.contains("echo the message") && !after.contains("\"hi\""),
        "{after}"
    );
    client.cancel().await.unwrap();
    direct.cancel().await.unwrap();
}

#[tokio::test]
async fn metrics_and_the_dashboard_need_a_key_with_the_admin_scope() {
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let keys = format!(
        "[policy.keys.ops]\nhash = {:?}\nscopes = [\"admin\"]\n[policy.keys.reader]\nhash = {:?}\nscopes = [\"*\"]\n",
        hash(ADMIN),
        hash(READER)
    );
    let path = config(&dir, &beta, "");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&keys);
    std::fs::write(&path, text).unwrap();
    let gw = HttpGateway::start(&path, &[]);
    for endpoint in ["/metrics", "/ui", "/ui/data"] {
        let url = format!("{}{endpoint}", gw.base());
        let (status, body) = get(&url, None).await;
        assert_eq!(status, 401, "{endpoint} without a key: {body}");
        let (status, body) = get(&url, Some(READER)).await;
        assert_eq!(status, 403, "{endpoint} with a key without admin: {body}");
        assert!(body.contains("\"admin\""), "{body}");
        let (status, body) = get(&url, Some("tg_not_a_key")).await;
        assert_eq!(status, 401, "{endpoint} with a bad key: {body}");
        let (status, body) = get(&url, Some(ADMIN)).await;
        assert_eq!(status, 200, "{endpoint} with the admin key: {body}");
    }
    // The browser's way: the key in the cookie the key form sets.
    let r = reqwest::Client::new()
        .get(format!("{}/ui/data", gw.base()))
        .header("cookie", format!("toolgate_key={ADMIN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn the_dashboard_data_shows_the_figures_tokens_json_prints() {
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let path = config(&dir, &beta, "");
    let gw = HttpGateway::start(&path, &[]);
    let (status, body) = get(&format!("{}/ui/data", gw.base()), None).await;
    assert_eq!(status, 200, "{body}");
    let data: Value = serde_json::from_str(&body).unwrap();
    let html = dir.path("tokens.html");
    let report = tokens_json(&path, &["--html", &html.display().to_string()]);
    assert_eq!(data["catalog"]["totals"], report["totals"]);
    assert_eq!(data["catalog"]["servers"], report["servers"]);
    assert_eq!(data["catalog"]["tool_rows"].as_array().unwrap().len(), 5);
    let ups = data["upstreams"].as_array().unwrap();
    assert!(ups.iter().all(|u| u["status"] == "ready"), "{ups:?}");
    // The static page carries the same report inline, and no live sections' data.
    let page = std::fs::read_to_string(&html).unwrap();
    let direct = report["totals"]["direct"].to_string();
    assert!(
        page.contains(&format!("\"direct\":{direct}")),
        "the report is inlined"
    );
    assert!(page.contains("\"static\":true"));
}

#[tokio::test]
async fn a_session_near_its_budget_gets_smaller_pages_and_a_note() {
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let gw = HttpGateway::start(
        &config(&dir, &beta, "[guided]\nsession_budget_tokens = 4000\n"),
        &[],
    );
    let (client, _) = connect_http(&gw.url).await;
    let big = json!({"tool": "alpha/echo", "arguments": {"message": "m", "_result_bytes": 6000}});
    // Far from the budget: a full page, no note.
    let first = call(&client, "execute", big.clone()).await;
    let s = first.structured_content.clone().unwrap_or_default();
    assert!(s.get("budget").is_none(), "{s}");
    let mut shrunk = None;
    for _ in 0..20 {
        let r = call(&client, "execute", big.clone()).await;
        if let Some(b) = r.structured_content.as_ref().and_then(|s| s.get("budget")) {
            shrunk = Some((b.clone(), text(&r)));
            break;
        }
    }
    let (budget, said) = shrunk.expect("answers shrink as the session nears its budget");
    assert_eq!(budget["budgetTokens"], 4000);
    assert!(budget["sentTokens"].as_u64().unwrap() >= 3000, "{budget}");
    let page = budget["pageTokens"].as_u64().unwrap();
    assert!(page < 1000, "{budget}");
    assert!(
        said.contains("session_budget_tokens") && said.contains("fields"),
        "{said}"
    );
    // The page really is smaller: more pages for the same result.
    let pages = |r: &rmcp::model::CallToolResult| {
        r.structured_content
            .as_ref()
            .and_then(|s| s["pages"].as_u64())
            .unwrap_or(1)
    };
    let later = call(&client, "execute", big.clone()).await;
    assert!(
        pages(&later) > pages(&first),
        "{} vs {}",
        pages(&later),
        pages(&first)
    );
    // The dashboard shows the session against its budget.
    let (_, body) = get(&format!("{}/ui/data", gw.base()), None).await;
    let data: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(data["budgetTokens"], 4000);
    let sessions = data["sessions"].as_array().unwrap();
    assert!(
        sessions.iter().any(|s| s["shrunk"].as_u64().unwrap() > 0),
        "{sessions:?}"
    );
    client.cancel().await.unwrap();
}

/// This machine's own address on a non-loopback interface, if it has one (the source
/// address the kernel would use; no packet is sent).
fn own_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.123:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// `toolgate serve --http ADDR:0`; returns the child (killed on drop) and the base URL.
fn serve_on(ip: std::net::IpAddr, config: &std::path::Path) -> (KillOnDrop, String) {
    use std::io::BufRead;
    let mut child = Command::new(toolgate())
        .args(["serve", "--http", &format!("{ip}:0"), "--config"])
        .arg(config)
        // The embedded store (the HTTP default) goes in the test's folder, not the user's.
        .env("XDG_STATE_HOME", config.parent().unwrap().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(rest) = line.split("MCP endpoint: ").nth(1) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the endpoint");
    (KillOnDrop(child), url.trim_end_matches("/mcp").to_string())
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn off_loopback_the_admin_endpoints_answer_only_when_configured_to() {
    let Some(ip) = own_address() else {
        return common::skip(
            "this machine has no non-loopback address to connect from (no route to \
             192.0.2.123)",
        );
    };
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let alpha = dir.stdio_upstream("alpha", "alpha", &[]);
    let keys = format!(
        "[policy.keys.ops]\nhash = {:?}\nscopes = [\"admin\"]\n",
        hash(ADMIN)
    );
    let closed = dir.config("mode = \"guided\"", &[alpha.clone(), keys.clone()]);
    let (_gw, base) = serve_on(ip, &closed);
    let (status, body) = get(&format!("{base}/metrics"), Some(ADMIN)).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("gateway.admin_allow_remote"), "{body}");
    let open_dir = TestDir::new();
    open_dir.write("catalog.json", &test_catalog().to_string());
    let alpha = open_dir.stdio_upstream("alpha", "alpha", &[]);
    let open = open_dir.config(
        "mode = \"guided\"\nadmin_allow_remote = true",
        &[alpha, keys],
    );
    let (_gw, base) = serve_on(ip, &open);
    let (status, body) = get(&format!("{base}/metrics"), None).await;
    assert_eq!(status, 401, "still a key: {body}");
    let (status, body) = get(&format!("{base}/metrics"), Some(ADMIN)).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_2026_07_28_client_is_counted_under_its_principal_across_requests() {
    use rmcp::model::ProtocolVersion;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::{ClientLifecycleMode, ClientServiceExt};
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let gw = HttpGateway::start(&config(&dir, &beta, ""), &[]);
    let client = test_client()
        .0
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(gw.url.clone()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover at 2026-07-28");
    assert!(tool_names(&client).await.contains(&"execute".to_string()));
    for message in ["one", "two"] {
        let r = call(
            &client,
            "execute",
            json!({"tool": "alpha/echo", "arguments": {"message": message}}),
        )
        .await;
        assert!(text(&r).contains(message), "{}", text(&r));
    }
    let (_, metrics) = get(&format!("{}/metrics", gw.base()), None).await;
    // Every request is its own Session, but one principal: one count.
    assert_eq!(
        sample(&metrics, "toolgate_sessions_total", &["era=\"stateless\""]),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "toolgate_sessions_open", &[]),
        0.0,
        "{metrics}"
    );
    let (_, body) = get(&format!("{}/ui/data", gw.base()), None).await;
    let data: Value = serde_json::from_str(&body).unwrap();
    let sessions = data["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let s = &sessions[0];
    assert_eq!(
        (s["era"].as_str(), s["label"].as_str()),
        (Some("stateless"), Some("local"))
    );
    assert!(
        s["definitionTokens"].as_u64().unwrap() > 0 && s["resultTokens"].as_u64().unwrap() > 0,
        "{s}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn on_a_dual_stack_listener_a_local_ipv4_client_may_read_metrics_and_the_dashboard() {
    if std::net::TcpListener::bind("[::]:0").is_err() {
        skip("no IPv6 on this machine: cannot listen on [::]");
        return;
    }
    let dir = TestDir::new();
    dir.write("catalog.json", &test_catalog().to_string());
    let beta = HttpFixture::start(&dir, "beta");
    let path = config(&dir, &beta, "");
    let (gw, _log) = HttpGateway::start_on("[::]:0", &path, &[], None, &[]);
    // The peer is ::ffff:127.0.0.1 on the [::] socket: loopback all the same.
    let port = gw
        .url
        .rsplit_once("]:")
        .unwrap()
        .1
        .split('/')
        .next()
        .unwrap()
        .to_string();
    for page in ["metrics", "ui", "ui/data"] {
        let (status, body) = get(&format!("http://127.0.0.1:{port}/{page}"), None).await;
        assert_eq!(status, 200, "/{page}: {body}");
    }
}
