//! Code mode's run limit is per API key, gateway-wide: two HTTP sessions presenting the
//! same key share its slots, another key has its own, and slots come back when runs end.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use rmcp::ClientHandler;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::mpsc;

/// A program that announces itself (a log notification carrying `tag`), then holds its
/// run open in a slow tool call.
fn slow_program(tag: &str) -> Value {
    json!({"code": format!(
        "await tools.files.read_file({{path: 'a', _log: '{tag}', _delay_ms: 6000}}); return '{tag} done'"
    )})
}

/// Waits (bounded) until every tag in `tags` has been logged, in any order.
async fn logged(rx: &mut mpsc::UnboundedReceiver<Value>, tags: &[&str]) {
    let mut left: Vec<Value> = tags.iter().map(|t| json!(t)).collect();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while !left.is_empty() {
            let v = rx.recv().await.expect("the log stream ended");
            left.retain(|t| *t != v);
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "{tags:?}: not every run reached its slow call"
    );
}

async fn run_on<H: ClientHandler>(client: &KeyedClient<H>, code: &str) -> Value {
    let r = call_on(client, "execute_code", json!({ "code": code })).await;
    assert!(!is_error(&r), "{}", text(&r));
    structured(&r)["result"].clone()
}

#[tokio::test]
async fn runs_are_limited_per_key_across_sessions() {
    let dir = TestDir::new();
    let config = policy_config(&dir, "guided", "");
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml.push_str("\n[code]\nenabled = true\ntimeout_ms = 60000\nmax_runs_per_key = 2\n");
    std::fs::write(&config, toml).unwrap();
    let _gw = HttpGateway::start(&config, &[]);
    let url = format!("{}/mcp/guided", _gw.base());

    let (tx, mut logs) = mpsc::unbounded_channel();
    // Each writer session watches its own log stream: a run's log reaches the session
    // that started it.
    let one = connect_keyed(&url, Some(WRITER), LogWatch { logs: tx.clone() }).await;
    let two = connect_keyed(&url, Some(WRITER), LogWatch { logs: tx.clone() }).await;
    let third = connect_keyed(&url, Some(WRITER), LogWatch { logs: tx }).await;
    let other = connect_as(&url, ADMIN).await;
    assert!(tool_names(&one).await.contains(&"execute_code".to_string()));

    // Two slow runs of the key "writer", from two sessions; while both are inside their
    // slow call, both of the key's slots are taken.
    let hold1 = call_on(&one, "execute_code", slow_program("hold-1"));
    let hold2 = call_on(&two, "execute_code", slow_program("hold-2"));
    let while_held = async {
        logged(&mut logs, &["hold-1", "hold-2"]).await;
        // A third session with the same key is refused, and so is a session already running.
        for client in [&third, &two] {
            let r = call_on(client, "execute_code", json!({"code": "return 1"})).await;
            assert!(is_error(&r), "{}", text(&r));
            let t = text(&r);
            assert!(
                t.contains("API key \"writer\"")
                    && t.contains("already has 2 programs running")
                    && t.contains("max_runs_per_key = 2")
                    && t.contains("Wait for one of them to finish"),
                "{t}"
            );
        }
        // Another key still runs.
        assert_eq!(run_on(&other, "return 'admin ran'").await, "admin ran");
    };
    let (hold1, hold2, ()) = tokio::join!(hold1, hold2, while_held);
    assert_eq!(
        structured(&hold1)["result"],
        "hold-1 done",
        "{}",
        text(&hold1)
    );
    assert_eq!(
        structured(&hold2)["result"],
        "hold-2 done",
        "{}",
        text(&hold2)
    );

    // The runs have ended (a slot is given back before the answer is sent): the key has
    // both its slots again, here from the session that was refused and a new one.
    let fourth = connect_as(&url, WRITER).await;
    let (a, b) = tokio::join!(run_on(&third, "return 'a'"), run_on(&fourth, "return 'b'"));
    assert_eq!((a, b), (json!("a"), json!("b")));
}
