//! Code mode end to end: a real gateway over stdio, real fixture upstreams, real sandbox
//! workers. Every hostile program must end (deadline plus grace at most) with a status,
//! and the gateway must answer the next run.

mod common;
use common::*;
use rmcp::model::CallToolResult;
use serde_json::{json, Value};

/// The shared test catalog plus tools for names, destruction and strict schemas.
fn catalog() -> Value {
    let mut c = test_catalog();
    let extra = json!([
        {"server": "gamma", "tool": {"name": "__proto__", "description": "A tool with a hostile name.",
            "inputSchema": {"type": "object"}}},
        {"server": "gamma", "tool": {"name": "delete-item", "description": "Delete an item for good.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "annotations": {"destructiveHint": true}}},
    ]);
    c.as_array_mut()
        .unwrap()
        .extend(extra.as_array().unwrap().iter().cloned());
    c
}

/// A gateway with code mode on and short limits, so hostile programs end fast.
fn setup(code: &str) -> (TestDir, std::path::PathBuf) {
    let dir = TestDir::new();
    dir.write("catalog.json", &catalog().to_string());
    let mut tables = vec![format!(
        "[code]\nenabled = true\ntimeout_ms = 1500\ngrace_ms = 500\nmax_tool_result_bytes = 1048576\n{code}\n"
    )];
    for s in ["alpha", "beta", "gamma"] {
        tables.push(dir.stdio_upstream(s, s, &[]));
    }
    let config = dir.config("mode = \"guided\"", &tables);
    (dir, config)
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// Runs a program; returns the structured answer and the text.
async fn run(client: &Client, code: &str) -> (Value, String) {
    let r = call(client, "execute_code", json!({"code": code})).await;
    (structured(&r), text(&r))
}

/// Runs a program and checks how it ended.
async fn expect(client: &Client, code: &str, status: &str) -> Value {
    let (s, t) = run(client, code).await;
    assert_eq!(s["status"], status, "{code}\n{t}");
    assert!(s["calls"].is_array(), "calls are always there: {s}");
    s
}

async fn healthy(client: &Client) {
    let (s, t) = run(client, "return 40 + 2").await;
    assert_eq!(s["result"], 42, "{t}");
}

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
async fn cpu_and_memory_attacks_end_and_the_gateway_stays_healthy() {
    let (_dir, config) = setup("");
    let (client, _) = connect_stdio(&config, &[]).await;
    for code in [
        "while (true) {}",
        "for (;;) { try { while (true) {} } catch (e) {} }",
        "async function f() { for (;;) await null } await f()",
        "/(a+)+$/.test('a'.repeat(40) + 'b')",
    ] {
        expect(&client, code, "timeout").await;
    }
    // Array methods on huge array-likes run without reaching the interrupt handler: the
    // gateway's kill at the deadline plus grace ends them.
    for code in [
        "Array.prototype.join.call({length: 2**32 - 1}, '')",
        "Array.prototype.sort.call({length: 2**32 - 1})",
        "Array.prototype.reverse.call({length: 2**32 - 1})",
        "Array.prototype.copyWithin.call({length: 2**32 - 1}, 0, 1)",
        "Array.prototype.splice.call({length: 2**32 - 1}, 0, 1)",
        "new Array(1e9) + ''",
    ] {
        expect(&client, code, "timeout").await;
    }
    healthy(&client).await;
    for code in [
        "const a = []; for (;;) a.push({x: [1, 2, 3], y: 'abc'})",
        "let s = 'x'; for (;;) s = s + s",
        "new Uint8Array(1e9)",
        "function f(n) { return f(n + 1) + 1 } f(0)",
    ] {
        let s = expect(&client, code, "error").await;
        assert!(s["error"]["message"].is_string(), "{s}");
    }
    healthy(&client).await;
}

#[tokio::test]
async fn hangs_and_call_limits() {
    let (_dir, config) = setup("max_tool_calls = 50");
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(&client, "await new Promise(() => {})", "error").await;
    assert!(s["error"]["message"]
        .as_str()
        .unwrap()
        .contains("nothing will settle"));
    // 10,000 calls at once: the first 50 run, the rest throw `limit`.
    let s = expect(
        &client,
        "await Promise.all(Array.from({length: 10000}, (_, i) => tools.alpha.echo({message: String(i)})))",
        "error",
    )
    .await;
    assert_eq!(s["error"]["code"], "limit", "{s}");
    assert!(s["calls"].as_array().unwrap().len() <= 50);
    // One call over a lowered limit.
    let r = call(
        &client,
        "execute_code",
        json!({"code": "await tools.alpha.status({}); try { await tools.alpha.status({}) } catch (e) { return e.code }", "max_tool_calls": 1}),
    )
    .await;
    assert_eq!(structured(&r)["result"], "limit", "{}", text(&r));
    // A tool slower than the run: the run ends at its deadline, the call listed as unfinished
    // or timed out.
    let (s, t) = run(
        &client,
        "await tools.alpha.echo({message: 'slow', _delay_ms: 60000})",
    )
    .await;
    assert!(
        ["timeout", "error"].contains(&s["status"].as_str().unwrap()),
        "{t}"
    );
    assert_eq!(s["calls"].as_array().unwrap().len(), 1, "{s}");
    healthy(&client).await;
}

#[tokio::test]
async fn output_floods_are_cut() {
    let (_dir, config) = setup("");
    let (client, _) = connect_stdio(&config, &[]).await;
    let r = call(&client, "execute_code", json!({"code": "for (let i = 0; i < 10000; i++) console.log('x'.repeat(1000)); return 'done'"})).await;
    let s = structured(&r);
    assert_eq!(
        (s["status"].as_str(), s["truncated"].as_bool()),
        (Some("ok"), Some(true)),
        "{}",
        text(&r)
    );
    assert!(serde_json::to_string(&r).unwrap().len() < 30 << 10);
    let r = call(
        &client,
        "execute_code",
        json!({"code": "return 'y'.repeat(20 * 1024 * 1024)"}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(
        (s["status"].as_str(), s["truncated"].as_bool()),
        (Some("ok"), Some(true))
    );
    assert!(serde_json::to_string(&r).unwrap().len() < 30 << 10);
    let s = expect(
        &client,
        "try { await tools.alpha.echo({message: 'm', _result_bytes: 2000000}) } catch (e) { return [e.code, e.tool] }",
        "ok",
    )
    .await;
    assert_eq!(s["result"], json!(["limit", "echo"]));
}

#[tokio::test]
async fn escapes_lead_nowhere() {
    let (_dir, config) = setup("");
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(
        &client,
        "let imp; try { await import('fs'); imp = 'loaded' } catch (e) { imp = 'threw' }
         const g = tools.alpha.echo.constructor.constructor('return this')();
         return {imp, require: typeof require, fetch: typeof fetch, std: typeof std, os: typeof os,
                 ctor: typeof tools.constructor, globals: Object.getOwnPropertyNames(g).filter(k => /^[a-z]/.test(k)).sort()}",
        "ok",
    )
    .await;
    let v = &s["result"];
    assert_eq!(v["imp"], "threw");
    for k in ["require", "fetch", "std", "os", "ctor"] {
        assert_eq!(v[k], "undefined", "{k}: {v}");
    }
    assert_eq!(
        v["globals"],
        json!([
            "atob",
            "btoa",
            "console",
            "decodeURI",
            "decodeURIComponent",
            "encodeURI",
            "encodeURIComponent",
            "escape",
            "eval",
            "globalThis",
            "input",
            "isFinite",
            "isNaN",
            "parseFloat",
            "parseInt",
            "queueMicrotask",
            "state",
            "tools",
            "undefined",
            "unescape"
        ])
    );
    // Pollution changes neither what is validated nor what is sent.
    let s = expect(
        &client,
        "Object.prototype.message = 'polluted';
         let first; try { await tools.alpha.echo({}) } catch (e) { first = e.code }
         Object.prototype.toJSON = function () { return {message: 42} };
         const sent = await tools.alpha.echo({message: 'real', toJSON() { return {message: 7} }});
         return [first, sent.arguments]",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!(["invalid_arguments", {"message": "real"}])
    );
    // A tool named __proto__ is an ordinary tool.
    let s = expect(
        &client,
        "const a = await tools.gamma.__proto___({x: 1}); const b = await tools.call('gamma', '__proto__', {y: 2});
         return [a.tool, b.arguments, Object.keys(tools.gamma).sort()]",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!(["__proto__", {"y": 2}, ["__proto___", "delete_item"]])
    );
    // Only catalog tools, and destructive ones need approval.
    let s = expect(
        &client,
        "const out = [];
         for (const [s, t] of [['alpha', 'nope'], ['secret', 'read'], ['gamma', 'delete-item']]) {
           try { await tools.call(s, t, {id: 'x'}); out.push('called') } catch (e) { out.push(e.code) } }
         return out",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!(["denied", "denied", "approval_required"])
    );
}

#[tokio::test]
async fn runs_are_isolated_and_bounded_per_session() {
    let (_dir, config) =
        setup("max_runs_per_session = 1\nallow_destructive = [\"gamma/delete-item\"]");
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
    assert!(text(&fast).contains("already running"), "{}", text(&fast));
    healthy(&client).await;
}

#[tokio::test]
async fn a_crashed_worker_is_reported_and_the_next_run_gets_a_new_one() {
    let wrapper = format!(
        "IFS= read -r line; case \"$line\" in *crash-me*) kill -KILL $$;; esac; {{ printf '%s\\n' \"$line\"; exec /bin/cat; }} | exec {} sandbox-worker",
        toolgate().display()
    );
    let (_dir, config) = setup(&format!("worker = [\"/bin/sh\", \"-c\", {wrapper:?}]"));
    let (client, _) = connect_stdio(&config, &[]).await;
    let (s, t) = run(&client, "// crash-me\nreturn 1").await;
    assert_eq!(s["status"], "crashed", "{t}");
    assert!(
        s["error"]["message"].as_str().unwrap().contains("died"),
        "{s}"
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
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": token}}),
    )
    .await;
    assert_eq!(
        structured(&r)["arguments"]["message"],
        "ann@example.com",
        "{}",
        text(&r)
    );

    // A forged token, and a token from another session, fail the call.
    let r = call(
        &client,
        "execute",
        json!({"tool": "alpha/echo", "arguments": {"message": "[[EMAIL:aaaaaa]]"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).contains("not a token of this session"),
        "{}",
        text(&r)
    );
    let (other, _) = connect_stdio(&config, &[]).await;
    let r = call(
        &other,
        "execute_code",
        json!({"code": "return input", "input": token}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("another session"), "{}", text(&r));
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
        "another session's state is not visible"
    );
    let s = expect(
        &client,
        "try { await state.set('big', 'x'.repeat(100000)) } catch (e) { return e.code }",
        "ok",
    )
    .await;
    assert_eq!(s["result"], "limit");
}
