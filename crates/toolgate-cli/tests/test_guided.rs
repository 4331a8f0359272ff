//! Guided mode end to end: three meta-tools over a real gateway and real fixture
//! upstreams; route, execute, continue, and every way they can go wrong.

mod common;
use common::*;
use serde_json::{json, Value};

fn guided_config(dir: &TestDir, extra: &str) -> std::path::PathBuf {
    let guided = format!("[guided]\nwait_secs = 1\n{extra}\n");
    let mut ups = vec![guided];
    ups.push(dir.stdio_upstream("alpha", "alpha", &[]));
    ups.push(dir.stdio_upstream("beta", "beta", &[]));
    dir.config("mode = \"guided\"", &ups)
}

async fn scenario(client: &Client) {
    // A constant surface of three meta-tools and a standing instruction.
    assert_eq!(
        tool_names(client).await,
        vec!["continue", "execute", "route"]
    );
    let info = client.peer_info().expect("initialized");
    assert!(info.instructions.as_deref().unwrap_or("").contains("route"));

    // route -> execute with the selection it returned.
    let r = call(
        client,
        "route",
        json!({"task": "add two integers together"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["decision"], "select", "{s}");
    assert_eq!(s["name"], "add_numbers");
    assert_eq!(s["nextCall"]["tool"], "execute");
    assert_eq!(
        s["nextCall"]["arguments"]["arguments"],
        json!({"a": "<integer>", "b": "<integer>"})
    );
    assert!(s["inputSchema"]["signature"]
        .as_str()
        .unwrap()
        .starts_with("add_numbers(a: integer, b: integer"));
    let sel = s["selectionId"].as_str().unwrap().to_string();
    let r = call(
        client,
        "execute",
        json!({"selectionId": sel, "arguments": {"a": 2, "b": 3}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(structured(&r)["sum"].is_i64(), "{r:?}");

    // An exact name wins outright, in any spelling.
    for spelling in ["alpha/echo", "alpha_echo", "echo"] {
        let s =
            structured(&call(client, "route", json!({"task": spelling, "detail": "full"})).await);
        assert_eq!(s["decision"], "select", "{spelling}: {s}");
        assert_eq!(
            (s["server"].as_str(), s["name"].as_str()),
            (Some("alpha"), Some("echo"))
        );
        assert_eq!(
            s["inputSchema"]["required"],
            json!(["message"]),
            "full detail is the upstream schema"
        );
    }

    // A name two servers share is a question, not a guess.
    let r = call(client, "route", json!({"task": "status"})).await;
    let s = structured(&r);
    assert_eq!(s["decision"], "clarify", "{s}");
    let servers: Vec<&str> = s["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["server"].as_str().unwrap())
        .collect();
    assert_eq!(servers, vec!["alpha", "beta"]);
    assert!(text(&r).contains("alpha/status"));

    // Arguments are checked against the full schema; the error says what to fix.
    let r = call(
        client,
        "execute",
        json!({"tool": "alpha/add_numbers", "arguments": {"a": "two"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let t = text(&r);
    assert!(
        t.contains("/a") && t.contains("integer") && t.contains("/b") && t.contains("required"),
        "{t}"
    );
    let problems = &structured(&r)["validation"]["problems"];
    assert_eq!(problems.as_array().unwrap().len(), 2, "{problems}");
    let r = call(
        client,
        "execute",
        json!({"tool": "alpha/add_numbers", "arguments": {"a": 2, "b": 40}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true));

    // A large result comes in pages that join to exactly the original.
    let original = toolgate_fixture::payload::sized_text("echo", 60_000);
    let r = call(
        client,
        "execute",
        json!({"tool": "alpha_echo", "arguments": {"message": "m", "_result_bytes": 60_000}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let mut joined = body(&r);
    let mut cursor = structured(&r)["nextCursor"]
        .as_str()
        .expect("a cursor for the rest")
        .to_string();
    let mut pages = 1;
    loop {
        let r = call(client, "continue", json!({"cursor": cursor})).await;
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        joined.push_str(&body(&r));
        pages += 1;
        // Every page says where it stands, the last one too.
        let total = structured(&r)["pages"].as_u64().expect("pages");
        assert_eq!(structured(&r)["page"], pages, "{}", text(&r));
        assert!(
            text(&r).contains(&format!("page {pages} of {total}")),
            "{}",
            text(&r)
        );
        match structured(&r)["nextCursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
        assert!(pages < 100);
    }
    assert!(
        pages >= 3,
        "60 kB should take several 4,000-token pages, got {pages}"
    );
    assert_eq!(joined.len(), original.len());
    assert!(joined == original, "pages join to exactly the original");

    // A slow call becomes an operation, followed to its result.
    let r = call(
        client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "late", "_delay_ms": 2500}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["status"], "running", "{s}");
    let op = s["operationId"].as_str().unwrap().to_string();
    let mut done = None;
    for _ in 0..10 {
        let r = call(client, "continue", json!({"operationId": op})).await;
        if structured(&r)["status"] != "running" {
            done = Some(r);
            break;
        }
    }
    let r = done.expect("the operation finished");
    assert!(text(&r).contains("late"), "{}", text(&r));

    // ...and one can be cancelled.
    let r = call(
        client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "never", "_delay_ms": 30000}}),
    )
    .await;
    let op = structured(&r)["operationId"].as_str().unwrap().to_string();
    let r = call(
        client,
        "continue",
        json!({"operationId": op, "cancel": true}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "cancelled", "{r:?}");

    // Model mistakes are tool errors that say what to do.
    let r = call(client, "execute", json!({"arguments": {}})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("selectionId"));
    let r = call(client, "route", json!({})).await;
    assert!(r.is_error == Some(true) && text(&r).contains("task"));
    let r = call(client, "alpha_echo", json!({"message": "x"})).await;
    assert!(
        r.is_error == Some(true) && text(&r).contains("route"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn guided_over_stdio() {
    let dir = TestDir::new();
    let (client, _n) = connect_stdio(&guided_config(&dir, ""), &[]).await;
    scenario(&client).await;
    client.cancel().await.unwrap();
    assert!(wait_no_processes(&dir).await.is_empty());
}

#[tokio::test]
async fn guided_over_http_with_shared_and_expired_cursors() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&guided_config(&dir, "result_ttl_secs = 2"), &[]);
    let (a, _n) = connect_http(&gw.url).await;
    scenario(&a).await;

    let big = json!({"tool": "alpha_echo", "arguments": {"message": "m", "_result_bytes": 40_000}});
    let r = call(&a, "execute", big.clone()).await;
    let cursor = structured(&r)["nextCursor"].as_str().unwrap().to_string();
    let sel =
        structured(&call(&a, "route", json!({"task": "alpha/echo"})).await)["selectionId"].clone();
    // Handles belong to the principal (here the gateway's local identity: no keys), not
    // to the session: another session reads the pages and uses the selection, even once
    // the first one has closed. Keys keep callers apart (test_principal.rs).
    a.cancel().await.unwrap();
    let (b, _n2) = connect_http(&gw.url).await;
    let r = call(&b, "continue", json!({"cursor": cursor})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let r = call(
        &b,
        "execute",
        json!({"selectionId": sel, "arguments": {"message": "x"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let r = call(&b, "execute", big.clone()).await;
    let cursor = structured(&r)["nextCursor"].as_str().unwrap().to_string();
    // A cursor left unused past its time expires, and says so.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let r = call(&b, "continue", json!({"cursor": cursor})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("expired"), "{}", text(&r));
    let r = call(&b, "continue", json!({"cursor": "pg-not-a-real-cursor"})).await;
    assert!(
        r.is_error == Some(true) && text(&r).contains("unknown"),
        "{}",
        text(&r)
    );
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn the_guided_surface_is_the_same_for_any_catalog() {
    // Ten tools or ten thousand: the meta-tools and instructions are identical.
    let small = TestDir::new();
    let big = TestDir::new();
    let many: Vec<Value> = (0..10_000)
        .map(|i| json!({"server": "bulk", "tool": {"name": format!("tool_{i}"), "description": format!("Tool number {i}."), "inputSchema": {"type": "object"}}}))
        .collect();
    big.write("catalog.json", &Value::Array(many).to_string());
    let cfg = |d: &TestDir, server: &str| {
        d.config("mode = \"guided\"", &[d.stdio_upstream("up", server, &[])])
    };
    let (c1, _) = connect_stdio(&cfg(&small, "alpha"), &[]).await;
    let (c2, _) = connect_stdio(&cfg(&big, "bulk"), &[]).await;
    let l1 = c1.list_all_tools().await.unwrap();
    let l2 = c2.list_all_tools().await.unwrap();
    assert_eq!(
        serde_json::to_value(&l1).unwrap(),
        serde_json::to_value(&l2).unwrap()
    );
    assert_eq!(
        c1.peer_info().unwrap().instructions,
        c2.peer_info().unwrap().instructions
    );
    // Both are real: the big one routes among its 10,000 tools (once they have arrived:
    // a 10,000-tool upstream may take longer than the startup wait in a debug build).
    let mut name = Value::Null;
    for _ in 0..120 {
        name = structured(&call(&c2, "route", json!({"task": "tool_9876"})).await)["name"].clone();
        if name == "tool_9876" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(name, "tool_9876");
    c1.cancel().await.unwrap();
    c2.cancel().await.unwrap();
}

#[tokio::test]
async fn pinned_and_expanded_tools_are_listed_and_callable() {
    let dir = TestDir::new();
    let config = guided_config(&dir, "pinned = [\"beta/status\"]\nexpand_selected = true");
    let (client, mut notes) = connect_stdio(&config, &[]).await;
    assert_eq!(
        tool_names(&client).await,
        vec!["beta_status", "continue", "execute", "route"]
    );
    let r = call(&client, "beta_status", json!({})).await;
    assert_ne!(
        r.is_error,
        Some(true),
        "a pinned tool is called directly: {}",
        text(&r)
    );
    while notes.list_changed.try_recv().is_ok() {}

    let s = structured(&call(&client, "route", json!({"task": "alpha/echo"})).await);
    assert_eq!(s["decision"], "select");
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        notes.list_changed.recv(),
    )
    .await
    .expect("tools/list_changed after route expanded the list");
    let names = tool_names(&client).await;
    assert!(names.contains(&"alpha_echo".to_string()), "{names:?}");
    let r = call(&client, "alpha_echo", json!({"message": "direct now"})).await;
    assert!(text(&r).contains("direct now"), "{}", text(&r));
    // Tools that were neither pinned nor chosen stay behind route.
    let r = call(&client, "alpha_add_numbers", json!({"a": 1, "b": 2})).await;
    assert_eq!(r.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn route_examples_teach_route_new_wording() {
    // "tally up my receipts" shares no word with any tool of the catalog: without
    // examples route cannot pick add_numbers; once it is a labelled example, it selects it.
    let task = json!({"task": "tally up my receipts"});
    let dir = TestDir::new();
    let (plain, _) = connect_stdio(&guided_config(&dir, ""), &[]).await;
    let s = structured(&call(&plain, "route", task.clone()).await);
    assert_eq!(s["decision"], "clarify", "{s}");
    assert!(!s.to_string().contains("add_numbers"), "{s}");
    plain.cancel().await.unwrap();

    dir.write(
        "examples.jsonl",
        "{\"query\": \"tally up my receipts\", \"expected\": [\"alpha/add_numbers\"]}\n",
    );
    // Relative to the config file's folder. (Five tools make idf figures small, hence a
    // threshold below the default.)
    let config = guided_config(
        &dir,
        "route_examples = \"examples.jsonl\"\nroute_threshold = 0.9",
    );
    let (taught, _) = connect_stdio(&config, &[]).await;
    let s = structured(&call(&taught, "route", task).await);
    assert_eq!(s["decision"], "select", "{s}");
    assert_eq!(
        (&s["server"], &s["name"]),
        (&json!("alpha"), &json!("add_numbers"))
    );
    taught.cancel().await.unwrap();

    // A file that is not labelled queries stops the start with the key and the line.
    dir.write("examples.jsonl", "{\"query\": \"no expected key\"}\n");
    let out = std::process::Command::new(toolgate())
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("guided.route_examples") && err.contains("examples.jsonl:1"),
        "{err}"
    );
}

#[tokio::test]
async fn a_task_of_several_steps_is_offered_each_steps_tool() {
    // One candidate for the whole task (limit 1); its second step's tool comes under
    // "steps", with its own selectionId that execute takes.
    let dir = TestDir::new();
    let (client, _) = connect_stdio(&guided_config(&dir, "route_steps = true"), &[]).await;
    let task = "echo the message hello back, then add two integers together";
    let r = call(&client, "route", json!({"task": task, "limit": 1})).await;
    let s = structured(&r);
    assert_eq!(s["decision"], "clarify", "{s}");
    assert_eq!(s["candidates"].as_array().unwrap().len(), 1, "{s}");
    let first = s["candidates"][0]["name"].as_str().unwrap();
    let steps = s["steps"].as_array().unwrap_or_else(|| panic!("{s}"));
    let named: Vec<&str> = steps.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(!named.contains(&first), "a candidate is not repeated: {s}");
    // Both steps' tools are offered: one as the candidate, the other under its step.
    let (other, step, arguments) = match first {
        "add_numbers" => (
            "echo",
            "echo the message hello back",
            json!({"message": "hello"}),
        ),
        _ => (
            "add_numbers",
            "add two integers together",
            json!({"a": 2, "b": 3}),
        ),
    };
    let offered = (steps.iter())
        .find(|t| t["name"] == other)
        .unwrap_or_else(|| panic!("the other step's tool: {s}"));
    assert_eq!(offered["step"], step, "{s}");
    assert!(text(&r).contains("For its steps:"), "{}", text(&r));
    let sel = offered["selectionId"].as_str().unwrap();
    let r = call(
        &client,
        "execute",
        json!({"selectionId": sel, "arguments": arguments}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    // A task of one step lists no steps.
    let s = structured(&call(&client, "route", json!({"task": "status", "limit": 1})).await);
    assert!(s.get("steps").is_none(), "{s}");
    client.cancel().await.unwrap();
}
