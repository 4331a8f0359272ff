//! An upstream's log messages name no call, so the gateway must not guess across API keys:
//! with calls of two keys in flight on one upstream, a log goes to neither client; with one
//! key's calls, to that key's clients; outside calls (a log sent after the call ended),
//! only to the sessions of the key that last called the upstream, when its key and
//! profile cover the whole server (as its resources and prompts do). Over stdio an upstream's
//! sampling request names no call either: with two keys' calls in flight it goes to
//! neither client and the upstream gets an error. Real gateway over HTTP, the fixture over
//! stdio as the shared upstream.
#![expect(
    deprecated,
    reason = "sampling: deprecated by SEP-2577, still what peers speak"
)]

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use rmcp::model::{ClientConfig, CreateMessageRequestParams, CreateMessageResult, Implementation};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A key whose scopes cover only `newsrv`: it may not use the `files` server.
const OTHER: &str = "tg_other_key_for_tests";

async fn connect(url: &str, key: &str) -> (KeyedClient<LogWatch>, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        connect_keyed(url, Some(key), LogWatch { logs: tx }).await,
        rx,
    )
}

/// The log data received so far that carry `marker`.
fn marked(rx: &mut mpsc::UnboundedReceiver<Value>, marker: &str) -> Vec<Value> {
    let mut out = Vec::new();
    while let Ok(v) = rx.try_recv() {
        if v.to_string().contains(marker) {
            out.push(v);
        }
    }
    out
}

/// Waits (up to 10 s) for a log carrying `marker`.
async fn wait_for(rx: &mut mpsc::UnboundedReceiver<Value>, marker: &str) -> Value {
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let v = rx.recv().await.expect("the client is connected");
            if v.to_string().contains(marker) {
                return v;
            }
        }
    });
    found
        .await
        .unwrap_or_else(|_| panic!("no log carrying {marker:?} within 10 s"))
}

fn gateway(dir: &TestDir) -> HttpGateway {
    let other = format!(
        "[policy.keys.other]\nhash = {:?}\nscopes = [\"newsrv/*\"]\ntier = \"read\"\n",
        hash(OTHER)
    );
    HttpGateway::start(&policy_config(dir, "direct", &other), &[])
}

#[tokio::test]
async fn a_log_during_calls_of_two_keys_reaches_neither_and_one_keys_log_reaches_it() {
    let dir = TestDir::new();
    let gw = gateway(&dir);
    let (admin, mut admin_logs) = connect(&gw.url, ADMIN).await;
    let (reader, mut reader_logs) = connect(&gw.url, READER).await;

    // One key alone: its call's log reaches it.
    let log = json!({"path": "/a", "_log": {"mark": "alone"}});
    assert!(!is_error(&call_on(&admin, "files_read_file", log).await));
    wait_for(&mut admin_logs, "alone").await;

    // The reader's slow call is in flight on the same upstream when the admin's call logs.
    let slow = json!({"path": "/slow", "_delay_ms": 3000});
    let reader_call = tokio::spawn(async move {
        let r = call_on(&reader, "files_read_file", slow).await;
        (reader, r)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = json!({"path": "/b", "_log": {"mark": "admins-secret"}});
    assert!(!is_error(&call_on(&admin, "files_read_file", log).await));
    let (reader, r) = reader_call.await.unwrap();
    assert!(!is_error(&r), "{r:?}");
    // Both calls are answered; the log, which could be either's, went to no client.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        marked(&mut reader_logs, "admins-secret"),
        Vec::<Value>::new()
    );
    assert_eq!(
        marked(&mut admin_logs, "admins-secret"),
        Vec::<Value>::new()
    );

    // The reader alone again: its own call's log reaches it.
    let log = json!({"path": "/c", "_log": {"mark": "readers-own"}});
    assert!(!is_error(&call_on(&reader, "files_read_file", log).await));
    wait_for(&mut reader_logs, "readers-own").await;
    // Not asserted for the admin: rmcp may handle the upstream's log after the call's
    // answer, when no call is in flight, and then it goes to every session that may use
    // the whole server, which the admin's key may (the rule the next test checks).
    admin.cancel().await.unwrap();
    reader.cancel().await.unwrap();
}

#[tokio::test]
async fn a_late_log_reaches_only_the_key_that_last_called_the_upstream() {
    let dir = TestDir::new();
    let gw = gateway(&dir);
    let (admin, mut admin_logs) = connect(&gw.url, ADMIN).await;
    // `reader`'s key and profile cover `files/*` (less one tool, as for its resources):
    // it may see the server's logs, but not those of the admin's calls.
    let (reader, mut reader_logs) = connect(&gw.url, READER).await;
    // `other` may not use `files` at all.
    let (other, mut other_logs) = connect(&gw.url, OTHER).await;

    // The upstream logs 1.5 s after answering the admin, when no call is in flight and the
    // admin's call no longer counts as just ended.
    let later = json!({"path": "/a", "_log": {"mark": "after-admins-call"}, "_log_after_ms": 1500});
    assert!(!is_error(&call_on(&admin, "files_read_file", later).await));
    wait_for(&mut admin_logs, "after-admins-call").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        marked(&mut reader_logs, "after-admins-call"),
        Vec::<Value>::new(),
        "the admin's late log reached the reader's key"
    );
    assert_eq!(
        marked(&mut other_logs, "after-admins-call"),
        Vec::<Value>::new()
    );

    // The reader calls last: the next late log is the reader's, and the admin's key does
    // not see it.
    let later =
        json!({"path": "/b", "_log": {"mark": "after-readers-call"}, "_log_after_ms": 1500});
    assert!(!is_error(&call_on(&reader, "files_read_file", later).await));
    wait_for(&mut reader_logs, "after-readers-call").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        marked(&mut admin_logs, "after-readers-call"),
        Vec::<Value>::new(),
        "the reader's late log reached the admin's key"
    );
    for c in [admin, reader, other] {
        c.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_key_sets_the_log_level_only_of_upstreams_in_its_scope() {
    let dir = TestDir::new();
    let gw = gateway(&dir);
    let (admin, mut admin_logs) = connect(&gw.url, ADMIN).await;
    // `other` may use `newsrv` only: its setLevel must not reach `files`.
    let (other, _other_logs) = connect(&gw.url, OTHER).await;
    let r = request(&other, "logging/setLevel", json!({"level": "error"})).await;
    assert!(r.get("error").is_none(), "{r}");
    let log = json!({"path": "/a", "_log": {"mark": "still-at-info"}});
    assert!(!is_error(&call_on(&admin, "files_read_file", log).await));
    wait_for(&mut admin_logs, "still-at-info").await;

    // The admin's key covers `files`: its setLevel does reach it (the fixture then sends
    // no info logs), which shows the check above could fail.
    let r = request(&admin, "logging/setLevel", json!({"level": "error"})).await;
    assert!(r.get("error").is_none(), "{r}");
    let log = json!({"path": "/b", "_log": {"mark": "silenced"}});
    assert!(!is_error(&call_on(&admin, "files_read_file", log).await));
    let log = json!({"path": "/c", "_log": {"mark": "after"}});
    let r = request(&admin, "logging/setLevel", json!({"level": "debug"})).await;
    assert!(r.get("error").is_none(), "{r}");
    assert!(!is_error(&call_on(&admin, "files_read_file", log).await));
    wait_for(&mut admin_logs, "after").await;
    assert_eq!(marked(&mut admin_logs, "silenced"), Vec::<Value>::new());
    for c in [admin, other] {
        c.cancel().await.unwrap();
    }
}

/// A client that declares sampling and answers with its own name, counting what it was asked.
struct Sampler {
    name: &'static str,
    asked: Arc<AtomicUsize>,
}

impl ClientHandler for Sampler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            serde_json::from_value(json!({"sampling": {}})).unwrap(),
            Implementation::new("toolgate-sampling-tests", "0"),
        )
    }
    async fn create_message(
        &self,
        _p: CreateMessageRequestParams,
        _c: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.asked.fetch_add(1, SeqCst);
        let answer = json!({"role": "assistant", "model": "m",
            "content": {"type": "text", "text": format!("sampled by {}", self.name)}});
        Ok(serde_json::from_value(answer).unwrap())
    }
}

/// Two keys that may use everything, and the conformance fixture (which samples) over
/// stdio as `a`, shared by both; `b` only so that exposed names carry their server.
fn sampling_gateway(dir: &TestDir) -> HttpGateway {
    let keys = format!(
        "[policy.keys.admin]\nhash = {:?}\nscopes = [\"*\"]\ntier = \"destructive\"\n\
         [policy.keys.other]\nhash = {:?}\nscopes = [\"*\"]\ntier = \"destructive\"\n",
        hash(ADMIN),
        hash(OTHER)
    );
    HttpGateway::start(
        &dir.config(
            "mode = \"direct\"",
            &[
                keys,
                dir.conformance_upstream("a"),
                dir.conformance_upstream("b"),
            ],
        ),
        &[],
    )
}

#[tokio::test]
async fn a_sampling_request_during_calls_of_two_keys_reaches_neither() {
    let dir = TestDir::new();
    let gw = sampling_gateway(&dir);
    let admin_asked = Arc::new(AtomicUsize::new(0));
    let other_asked = Arc::new(AtomicUsize::new(0));
    let sampler = |name, asked: &Arc<AtomicUsize>| Sampler {
        name,
        asked: asked.clone(),
    };
    let admin = connect_keyed(&gw.url, Some(ADMIN), sampler("admin", &admin_asked)).await;
    let other = connect_keyed(&gw.url, Some(OTHER), sampler("other", &other_asked)).await;

    // One key alone: the upstream's request reaches that key's client.
    let r = call_on(&admin, "a_test_sampling", json!({"prompt": "hi"})).await;
    assert!(
        !is_error(&r) && text(&r).contains("sampled by admin"),
        "{r:?}"
    );

    // The admin's call asks 3 s in; the other key's call starts 1 s in and is still
    // running then, so the newest call in flight is the other key's. The request names
    // neither call: it goes to no client, and the upstream is told why.
    let slow = json!({"prompt": "hi", "_delay_ms": 3000});
    let admin_call = tokio::spawn(async move {
        let r = call_on(&admin, "a_test_sampling", slow).await;
        (admin, r)
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let other_call =
        tokio::spawn(async move { call_on(&other, "a_test_cancellable", json!({})).await });
    let (admin, r) = admin_call.await.unwrap();
    assert!(is_error(&r), "{r:?}");
    assert!(
        text(&r).contains("sampling failed") && text(&r).contains("several API keys"),
        "{r:?}"
    );
    assert_eq!(
        other_asked.load(SeqCst),
        0,
        "the other key's client was asked"
    );
    assert_eq!(admin_asked.load(SeqCst), 1);
    other_call.abort();
    admin.cancel().await.unwrap();
}
