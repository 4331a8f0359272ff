//! A hostile upstream (`--fault flood-notifications`: 5,000 log messages and 500 of each
//! `list_changed` before every answer): calls are still answered, the caller receives log
//! messages at the per-upstream rate only, each cut to a bounded size, and the tool-list
//! refreshes the flood triggers are coalesced.

// Logging is deprecated by SEP-2577 but is what a flooding 2025-era server sends.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]

mod common;

use common::*;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    LoggingMessageNotificationParam,
};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Log messages passed on per upstream per second (`upstream::flood::LOGS_PER_SEC`).
const LOGS_PER_SEC: usize = 50;

#[derive(Clone, Default)]
struct Counting {
    logs: Arc<AtomicUsize>,
    biggest: Arc<AtomicUsize>,
}

impl ClientHandler for Counting {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("flood-test", "0"),
        )
    }
    async fn on_logging_message(
        &self,
        p: LoggingMessageNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        self.logs.fetch_add(1, Ordering::Relaxed);
        let size = p.data.to_string().len();
        self.biggest.fetch_max(size, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_upstream_is_rate_limited_and_its_calls_still_answer() {
    let dir = TestDir::new();
    let up = dir.stdio_upstream("alpha", "alpha", &["--fault", "flood-notifications"]);
    let config = dir.config("mode = \"direct\"", &[up]);
    let (gw, log) = HttpGateway::start_logging(&config, &[], Some("info,rmcp=off"));
    let handler = Counting::default();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(gw.url.clone());
    let client = handler.clone().serve(transport).await.unwrap();
    let started = Instant::now();
    let calls = 3;
    for n in 0..calls {
        let message = format!("call {n}");
        let r = client
            .call_tool(
                CallToolRequestParams::new("alpha_echo")
                    .with_arguments(args(json!({"message": message}))),
            )
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        assert!(
            text(&r).contains(&message),
            "call {n} got another's answer: {}",
            text(&r)
        );
    }
    let windows = started.elapsed().as_secs() as usize + 2;
    let logs = handler.logs.load(Ordering::Relaxed);
    // Without the rate, every one of the 15,000 messages would reach the caller.
    assert!(
        logs <= LOGS_PER_SEC * windows,
        "{logs} log messages reached the caller in {windows} one-second windows"
    );
    assert!(handler.biggest.load(Ordering::Relaxed) <= 8 * 1024 + 200);
    client.cancel().await.unwrap();
    drop(gw);
    let lines: Vec<String> = log.try_iter().collect();
    let refreshes = lines
        .iter()
        .filter(|l| l.contains("tools/list_changed"))
        .count();
    assert!(
        refreshes < 100,
        "{refreshes} tools/list_changed acted on for 1,500 sent: not coalesced"
    );
    let passed_logs = lines.iter().filter(|l| l.contains("\"flood\"")).count();
    eprintln!("flood: {logs} logs to the caller, {passed_logs} to the gateway's log, {refreshes} refreshes, {windows} windows");
    assert!(
        passed_logs <= LOGS_PER_SEC * windows,
        "{passed_logs} upstream log messages written to the gateway's log"
    );
}
