//! Code mode end to end, what it is for: a real gateway over stdio, real fixture upstreams,
//! real sandbox workers; discovery, chaining tools with only the answer coming back,
//! isolation between runs, bad requests, PII tokens and state.

mod common;
use common::code::*;
use common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn a_program_chains_two_tools_and_only_its_answer_comes_back() {
    let (_dir, config) = setup("");
    let (client, _) = connect_stdio(&config, &[]).await;
    let names = tool_names(&client).await;
    assert!(
        names.contains(&"execute_code".to_string())
            && names.contains(&"describe_tools".to_string()),
        "{names:?}"
    );
    let info = client.peer_info().unwrap();
    assert!(info
        .instructions
        .as_deref()
        .unwrap_or("")
        .contains("execute_code"));

    // Discovery: TypeScript for exactly the tools asked for.
    let r = call(
        &client,
        "describe_tools",
        json!({"tools": ["alpha/echo", "alpha/add_numbers", "gamma/__proto__", "nope/none"]}),
    )
    .await;
    let ts = text(&r);
    assert!(ts.contains("declare namespace tools.alpha {"), "{ts}");
    assert!(
        ts.contains("function echo(args: {\n    message: string;\n  }): Promise<unknown>;"),
        "{ts}"
    );
    assert!(ts.contains("function add_numbers(args: {"), "{ts}");
    assert!(
        ts.contains("}): Promise<{\n    sum: number;\n  }>;"),
        "{ts}"
    );
    assert!(
        ts.contains("function __proto___(args: Record<string, unknown>)"),
        "{ts}"
    );
    assert_eq!(structured(&r)["unknown"], json!(["nope/none"]));
    let r = call(
        &client,
        "route",
        json!({"task": "alpha/add_numbers", "detail": "typescript"}),
    )
    .await;
    assert!(
        structured(&r)["inputSchema"]["typescript"]
            .as_str()
            .unwrap()
            .contains("function add_numbers("),
        "{}",
        text(&r)
    );

    // The program reads a large intermediate result and returns a small answer.
    let code = "```js
const big = await tools.alpha.echo({message: 'INTERMEDIATE-' + 'x'.repeat(20000) + input.tag});
const sum = await tools.call('alpha', 'add_numbers', {a: 2, b: 3});
console.log('read', big.arguments.message.length, 'chars');
return {length: big.arguments.message.length, endsWith: big.arguments.message.slice(-3), sum: typeof sum.sum};
```";
    let r = call(
        &client,
        "execute_code",
        json!({"code": code, "input": {"tag": "END"}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(s["status"], "ok");
    assert_eq!(
        s["result"],
        json!({"length": 20016, "endsWith": "END", "sum": "number"})
    );
    assert_eq!(s["logs"], json!(["read 20016 chars"]));
    assert_eq!(s["calls"].as_array().unwrap().len(), 2);
    assert_eq!(s["calls"][0]["server"], "alpha");
    assert_eq!(s["calls"][1]["ok"], true);
    let everything = serde_json::to_string(&r).unwrap();
    assert!(
        !everything.contains("INTERMEDIATE"),
        "the intermediate data reached the client"
    );
}

#[tokio::test]
async fn runs_are_isolated_and_bounded_per_session() {
    let (_dir, config) = setup("max_runs_per_key = 1\nallow_destructive = [\"gamma/delete-item\"]");
    let (client, _) = connect_stdio(&config, &[]).await;
    expect(
        &client,
        "globalThis.leak = 'secret'; Object.prototype.p = 1; return 1",
        "ok",
    )
    .await;
    let s = expect(&client, "return [typeof leak, ({}).p === undefined]", "ok").await;
    assert_eq!(s["result"], json!(["undefined", true]));
    // Configured destructive tools may be called.
    let s = expect(
        &client,
        "return (await tools.gamma.delete_item({id: 'a'})).arguments",
        "ok",
    )
    .await;
    assert_eq!(s["result"], json!({"id": "a"}));
    // A second run while one is going is refused, not queued.
    let slow = call(
        &client,
        "execute_code",
        json!({"code": "await tools.alpha.echo({message: 's', _delay_ms: 800}); return 'slow'"}),
    );
    let fast = async {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        call(&client, "execute_code", json!({"code": "return 'fast'"})).await
    };
    let (slow, fast) = tokio::join!(slow, fast);
    assert_eq!(structured(&slow)["result"], "slow", "{}", text(&slow));
    assert_eq!(fast.is_error, Some(true));
    assert!(
        text(&fast).contains("this session already has 1 programs running"),
        "{}",
        text(&fast)
    );
    healthy(&client).await;
}

#[tokio::test]
async fn bad_requests_say_what_to_fix() {
    let (_dir, config) = setup("max_source_bytes = 100");
    let (client, _) = connect_stdio(&config, &[]).await;
    for (args, needle) in [
        (json!({}), "\"code\" is required"),
        (json!({"code": "x".repeat(200)}), "limit is 100"),
        (json!({"code": "1", "extra": 1}), "unknown argument"),
    ] {
        let r = call(&client, "execute_code", args).await;
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains(needle), "{}", text(&r));
    }
    let s = expect(&client, "return (1 +", "error").await;
    assert_eq!(s["error"]["name"], "SyntaxError");
}

#[tokio::test]
async fn pii_leaves_as_tokens_and_comes_back_as_values() {
    let (_dir, config) = setup("pii = true\npii_fields = [\"name\"]");
    let (client, _) = connect_stdio(&config, &[]).await;
    let r = call(
        &client,
        "execute_code",
        json!({"code": "const r = await tools.alpha.echo({message: 'Write to ann@example.com'});
                        console.log('card 4111 1111 1111 1111');
                        return {note: r.arguments.message, name: 'Ann Lee', inside: r.arguments.message.includes('@example.com')}"}),
    )
    .await;
    let s = structured(&r);
    let seen = serde_json::to_string(&r).unwrap();
    assert!(
        !seen.contains("ann@example.com") && !seen.contains("4111") && !seen.contains("Ann Lee"),
        "{seen}"
    );
    assert_eq!(
        s["result"]["inside"], true,
        "values are real inside the run"
    );
    let note = s["result"]["note"].as_str().unwrap().to_string();
    let token = note.strip_prefix("Write to ").unwrap().to_string();
    assert!(token.starts_with("[[EMAIL:"), "{note}");
    assert!(s["result"]["name"]
        .as_str()
        .unwrap()
        .starts_with("[[FIELD:"));
    assert!(s["logs"][0].as_str().unwrap().starts_with("card [[CARD:"));

    // The token goes back in a run's input and in execute's arguments: tools see the value.
    let r = call(
        &client,
        "execute_code",
        json!({"code": "const r = await tools.alpha.echo({message: input.to}); return r.arguments.message === 'ann@example.com'",
               "input": {"to": token}}),
    )
    .await;
    assert_eq!(structured(&r)["result"], true, "{}", text(&r));
    // execute restores through the same gate as the run above, and its answer leaves
    // tokenized too: the value comes back as the same token (one token per value).
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": token}}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(
        structured(&r)["arguments"]["message"],
        token.as_str(),
        "{}",
        text(&r)
    );
    assert!(!serde_json::to_string(&r)
        .unwrap()
        .contains("ann@example.com"));

    // A forged token, and a token another gateway process made (state is in memory), fail
    // the call. Tokens of another principal: test_principal.rs.
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "[[EMAIL:aaaaaa]]"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("not a token you hold"), "{}", text(&r));
    let (other, _) = connect_stdio(&config, &[]).await;
    let r = call(
        &other,
        "execute_code",
        json!({"code": "return input", "input": token}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("not a token you hold"), "{}", text(&r));
}

#[tokio::test]
async fn state_carries_over_between_runs_of_a_session() {
    let (_dir, config) = setup("max_tool_calls = 1");
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(
        &client,
        "const before = await state.get('cursor'); await state.set('cursor', {page: 2});
         await state.set('a', 1); await state.set('b', 2); return before",
        "ok",
    )
    .await;
    assert_eq!(s["result"], Value::Null);
    assert_eq!(s["calls"], json!([]), "state requests are not tool calls");
    let s = expect(
        &client,
        "return [await state.get('cursor'), await state.get('b')]",
        "ok",
    )
    .await;
    assert_eq!(s["result"], json!([{"page": 2}, 2]));
    let (other, _) = connect_stdio(&config, &[]).await;
    let s = expect(&other, "return await state.get('cursor')", "ok").await;
    assert_eq!(
        s["result"],
        Value::Null,
        "another gateway process's state is not visible"
    );
    let s = expect(
        &client,
        "try { await state.set('big', 'x'.repeat(100000)) } catch (e) { return e.code }",
        "ok",
    )
    .await;
    assert_eq!(s["result"], "limit");
}
