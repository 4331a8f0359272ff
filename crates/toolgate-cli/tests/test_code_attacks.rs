//! Code mode against hostile programs: every one must end (deadline plus grace at most)
//! with a status, and the gateway must answer the next run.

mod common;
use common::code::*;
use common::*;
use serde_json::json;

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
    wait_for_tool(&client, "alpha", "echo").await;
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
    let (s, t) = run_with(
        &client,
        "await tools.alpha.echo({message: 'slow', _delay_ms: 60000})",
        HOSTILE_TIMEOUT_MS,
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
            "clearInterval",
            "clearTimeout",
            "console",
            "decodeURI",
            "decodeURIComponent",
            "encodeURI",
            "encodeURIComponent",
            "escape",
            "eval",
            "fs",
            "globalThis",
            "input",
            "isFinite",
            "isNaN",
            "parseFloat",
            "parseInt",
            "queueMicrotask",
            "setInterval",
            "setTimeout",
            "skills",
            "sleep",
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
async fn a_crashed_worker_is_reported_and_the_next_run_gets_a_new_one() {
    let wrapper = format!(
        "IFS= read -r line; case \"$line\" in *crash-me*) kill -KILL $$;; esac; {{ printf '%s\\n' \"$line\"; exec /bin/cat; }} | exec {} sandbox-worker",
        toolgate().display()
    );
    // The wrapper reads the run before the worker starts, so it cannot wait in the pool.
    let (_dir, config) = setup(&format!(
        "pool_size = 0\nworker = [\"/bin/sh\", \"-c\", {wrapper:?}]"
    ));
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
async fn cancelling_a_run_kills_its_worker() {
    use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
    // The worker runs through a link in the test's folder, so only this test's workers match.
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("toolgate-link");
    std::os::unix::fs::symlink(toolgate(), &link).unwrap();
    let (_dir, config) = setup_with(
        60_000,
        &format!(
            // Started per run, so the only worker that matches is this run's (the pool's
            // workers are in test_code_pool.rs).
            "pool_size = 0\nworker = [{:?}, \"sandbox-worker\"]",
            link.display().to_string()
        ),
    );
    let (client, _) = connect_stdio(&config, &[]).await;
    let marker = link.display().to_string();
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("execute_code")
            .with_arguments(args(json!({"code": "while (true) {}"}))),
    ));
    let handle = client
        .send_cancellable_request(request, Default::default())
        .await
        .unwrap();
    let mut started = false;
    for _ in 0..100 {
        if !processes_mentioning(&marker).is_empty() {
            started = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(started, "the worker did not start");
    handle.cancel(Some("test".into())).await.unwrap();
    let mut left = processes_mentioning(&marker);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        left = processes_mentioning(&marker);
    }
    assert!(
        left.is_empty(),
        "the worker outlived the cancelled run: {left:?}"
    );
    healthy(&client).await;
}
