//! A fleet: two toolgate replicas on one Redis, behind HAProxy (round robin, no
//! stickiness), the fixture as upstream, 2026-07-28 clients (stateless: every request
//! may reach either replica). Any replica serves any handle of its caller: route on one,
//! execute on the other; pages read through alternating replicas join to exactly the
//! original; a slow call started on A is followed to its result from B; A killed while B
//! serves A's cursors; a task started on A is read to its result from B; Redis stopped mid-run: calls that need it give clear errors, a call that needs nothing stored still answers, and Redis back heals the store.
//! `docs/deploy.md` describes the same setup.

mod common;
mod fleet;

use common::*;
use rmcp::model::ProtocolVersion;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

const KEY: &str = "5f1c0a9e3b7d2468ace013579bdf2468ace013579bdf2468ace013579bdf2468";

/// A 2026-07-28 client: no initialize, no session, each request on its own.
async fn modern(url: &str) -> Client {
    test_client()
        .0
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url.to_string()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover at 2026-07-28")
}

fn port_of(url: &str) -> u16 {
    let rest = url.trim_start_matches("http://127.0.0.1:");
    rest.split('/').next().unwrap().parse().unwrap()
}

/// Executes a large result on `first`; returns its first page and cursor.
async fn big(client: &Client, bytes: usize) -> (String, String) {
    let r = call(
        client,
        "execute",
        json!({"tool": "alpha_echo", "arguments": {"message": "m", "_result_bytes": bytes}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let cursor = structured(&r)["nextCursor"]
        .as_str()
        .expect("paged")
        .to_string();
    (body(&r), cursor)
}

/// Reads every page from `cursor` on, the i-th request going to `clients[i % n]`.
async fn read_rest(clients: &[&Client], mut cursor: String) -> String {
    let mut joined = String::new();
    for i in 0.. {
        let r = call(
            clients[i % clients.len()],
            "continue",
            json!({"cursor": cursor}),
        )
        .await;
        assert_ne!(r.is_error, Some(true), "page {}: {}", i + 2, text(&r));
        joined.push_str(&body(&r));
        match structured(&r)["nextCursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
        assert!(i < 200, "too many pages");
    }
    joined
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_redis_serve_each_others_handles() {
    let Some((redis_bin, haproxy_bin)) = fleet::programs_or_skip() else {
        return;
    };
    let dir = TestDir::new();
    let redis_dir = dir.path("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let redis_port = fleet::free_port();
    let mut redis = fleet::redis(&redis_bin, redis_port, &redis_dir);
    let store = format!(
        "[guided]\nwait_secs = 0.05\n[code]\nenabled = true\n[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{redis_port}\"\n"
    );
    let config = dir.config(
        "mode = \"guided\"",
        &[store, dir.stdio_upstream("alpha", "alpha", &[])],
    );
    let env = [("TOOLGATE_STORE_KEY", KEY)];
    let (a, _) = HttpGateway::start_with_env(&config, &[], None, &env);
    let (mut b, _) = HttpGateway::start_with_env(&config, &[], None, &env);
    let lb_port = fleet::free_port();
    let _lb = fleet::haproxy(
        &haproxy_bin,
        lb_port,
        &[port_of(&a.url), port_of(&b.url)],
        dir.dir.path(),
    );
    let (on_a, on_b) = (modern(&a.url).await, modern(&b.url).await);
    let via_lb = modern(&format!("http://127.0.0.1:{lb_port}/mcp")).await;

    // Route on A, execute its selection on B.
    let r = call(&on_a, "route", json!({"task": "add two numbers"})).await;
    let sel = structured(&r)["selectionId"]
        .as_str()
        .unwrap_or_else(|| panic!("a selection: {}", text(&r)))
        .to_string();
    let r = call(
        &on_b,
        "execute",
        json!({"selectionId": sel, "arguments": {"a": 2, "b": 40}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("\"tool\":\"add_numbers\""),
        "{}",
        text(&r)
    );

    // Code mode's state set by a program on A, read by one on B.
    let r = call(
        &on_a,
        "execute_code",
        json!({"code": "await state.set('progress', {done: 7}); return 'set'"}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "ok", "{}", text(&r));
    let r = call(
        &on_b,
        "execute_code",
        json!({"code": "return await state.get('progress')"}),
    )
    .await;
    assert_eq!(structured(&r)["result"], json!({"done": 7}), "{}", text(&r));

    // Every page of a large result through alternating replicas, and through the
    // balancer, joins to exactly the original.
    let original = toolgate_fixture::payload::sized_text("echo", 60_000);
    let (first, cursor) = big(&on_a, 60_000).await;
    let joined = first + &read_rest(&[&on_b, &on_a], cursor).await;
    assert!(
        joined == original,
        "pages across replicas join to the original"
    );
    let (first, cursor) = big(&via_lb, 60_000).await;
    let joined = first + &read_rest(&[&via_lb], cursor).await;
    assert!(
        joined == original,
        "pages through the balancer join to the original"
    );

    // A slow call started on A, followed to its result from B.
    let r = call(
        &on_a,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "slow-on-a", "_delay_ms": 1500}}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    let op = structured(&r)["operationId"].as_str().unwrap().to_string();
    let mut result = None;
    for _ in 0..40 {
        let r = call(&on_b, "continue", json!({"operationId": op})).await;
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        if structured(&r)["status"] != "running" {
            result = Some(r);
            break;
        }
    }
    let r = result.expect("B saw A's operation finish");
    assert!(text(&r).contains("slow-on-a"), "{}", text(&r));

    // A task (direct surface, a client that declared tasks) started on A, followed to its
    // inlined result from B, and through the balancer.
    let direct = |url: &str| format!("{url}/direct");
    let params =
        json!({"name": "alpha_echo", "arguments": {"message": "task-on-a", "_delay_ms": 1500}});
    let (_, created) = post_modern(
        &direct(&a.url),
        "tools/call",
        params,
        tasks_capabilities(),
        None,
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_string();
    let mut ended = None;
    for _ in 0..100 {
        let params = json!({"taskId": task});
        let (_, got) = post_modern(
            &direct(&b.url),
            "tasks/get",
            params,
            tasks_capabilities(),
            None,
        )
        .await;
        if got["result"]["status"] != "working" {
            ended = Some(got);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let ended = ended.expect("B saw A's task end");
    assert_eq!(ended["result"]["status"], "completed", "{ended}");
    assert!(ended.to_string().contains("task-on-a"), "{ended}");
    let lb_direct = format!("http://127.0.0.1:{lb_port}/mcp/direct");
    let params = json!({"taskId": task});
    let (_, again) = post_modern(&lb_direct, "tasks/get", params, tasks_capabilities(), None).await;
    assert_eq!(again["result"]["status"], "completed", "{again}");

    // A killed (no clean shutdown): B serves A's cursors.
    let (first, read_now) = big(&on_a, 60_000).await;
    let (_, read_later) = big(&on_a, 60_000).await;
    let running = call(
        &on_a,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "dies-with-a", "_delay_ms": 60_000}}),
    )
    .await;
    let running = structured(&running)["operationId"]
        .as_str()
        .unwrap()
        .to_string();
    let _ = on_a.cancel().await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    drop(a);
    let joined = first + &read_rest(&[&on_b], read_now).await;
    assert!(joined == original, "B reads A's pages after A died");
    // A's running call: running until A's heartbeat runs out, then lost.
    let mut lost = None;
    for _ in 0..120 {
        let r = call(&on_b, "continue", json!({"operationId": running})).await;
        if r.is_error == Some(true) {
            lost = Some(text(&r));
            break;
        }
        assert_eq!(structured(&r)["status"], "running", "{}", text(&r));
    }
    let lost = lost.expect("A's call reported lost once A stopped beating");
    assert!(
        lost.contains("was lost") && lost.contains("call execute again"),
        "{lost}"
    );

    // Redis down: calls that need it say so; nothing pretends to work.
    redis.stop();
    let r = call(&on_b, "continue", json!({"cursor": read_later})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(
        text(&r).contains("state store (redis) is not answering"),
        "{}",
        text(&r)
    );
    // A call that needs nothing stored still works: its operation is kept by this replica
    // only (issue 40: a store fault costs only the calls that need a stored value).
    let r = call(
        &on_b,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "while-down"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert!(text(&r).contains("while-down"), "{}", text(&r));

    // Redis back on the same port and data: B reconnects by itself.
    let _redis = fleet::redis(&redis_bin, redis_port, &redis_dir);
    let r = call(
        &on_b,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "after-restart"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("after-restart"), "{}", text(&r));
    let joined = read_rest(&[&on_b], read_later).await;
    assert!(
        original.ends_with(&joined) && joined.len() > 10_000,
        "A's other cursor survives Redis's restart"
    );
    let _ = (on_b.cancel().await, via_lb.cancel().await);
    assert!(b.stop().success());
}
