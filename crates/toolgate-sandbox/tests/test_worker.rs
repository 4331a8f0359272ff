//! The worker in-process over a socket pair, with this test as the gateway: programs,
//! tool calls, errors and the worker's own limits (the OS limits and the kill are the
//! gateway's, tested end to end in toolgate-cli).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use toolgate_sandbox::protocol::{
    CallAnswer, CallFailure, Done, Limits, Run, ToGateway, ToolEntry,
};

fn limits() -> Limits {
    Limits {
        timeout_ms: 2_000,
        heap_bytes: 32 << 20,
        stack_bytes: 256 << 10,
        max_calls: 5,
        max_log_bytes: 1_000,
        max_result_bytes: 10_000,
        max_args_bytes: 10_000,
        address_space_bytes: 0,
        cpu_secs: 0,
    }
}

fn entry(server: &str, tool: &str, si: &str, ti: &str) -> ToolEntry {
    ToolEntry {
        server: server.into(),
        tool: tool.into(),
        server_ident: si.into(),
        tool_ident: ti.into(),
    }
}

/// What a run sent: calls (server, tool, arguments), logs, and how it ended.
struct Ran {
    calls: Vec<(String, String, Value)>,
    logs: Vec<String>,
    done: Done,
}

/// Runs `code`; `answer` plays the gateway for each call.
fn run_with(code: &str, limits: Limits, answer: impl Fn(&str, &Value) -> CallAnswer) -> Ran {
    let (gw, worker) = UnixStream::pair().unwrap();
    let reader = BufReader::new(worker.try_clone().unwrap());
    let t = std::thread::spawn(move || {
        toolgate_sandbox::worker::serve(reader, Box::new(worker), false).unwrap()
    });
    let run = Run {
        code: code.into(),
        input: json!({"n": 3}),
        tools: vec![
            entry("alpha", "echo", "alpha", "echo"),
            entry("alpha", "get-report", "alpha", "get_report"),
            entry("beta", "__proto__", "beta", "__proto___"),
        ],
        limits,
    };
    let mut w = gw.try_clone().unwrap();
    writeln!(w, "{}", serde_json::to_string(&run).unwrap()).unwrap();
    let mut ran = Ran {
        calls: vec![],
        logs: vec![],
        done: Done {
            status: String::new(),
            result: Value::Null,
            truncated: false,
            error: None,
            dropped_log_bytes: 0,
        },
    };
    for line in BufReader::new(gw).lines() {
        match serde_json::from_str::<ToGateway>(&line.unwrap()).unwrap() {
            ToGateway::Call {
                id,
                server,
                tool,
                arguments,
            } => {
                let mut a = answer(&tool, &arguments);
                a.id = id;
                writeln!(w, "{}", serde_json::to_string(&a).unwrap()).unwrap();
                ran.calls.push((server, tool, arguments));
            }
            ToGateway::Log { text, .. } => ran.logs.push(text),
            ToGateway::Ready => assert!(
                ran.calls.is_empty() && ran.logs.is_empty(),
                "Ready comes first"
            ),
            ToGateway::Done(d) => {
                ran.done = d;
                break;
            }
        }
    }
    t.join().unwrap();
    ran
}

fn echo(_tool: &str, args: &Value) -> CallAnswer {
    CallAnswer {
        id: 0,
        value: Some(args.clone()),
        error: None,
    }
}

fn run(code: &str) -> Ran {
    run_with(code, limits(), echo)
}

#[test]
fn body_with_await_and_return() {
    let r = run("const a = await tools.alpha.echo({x: input.n}); const b = await tools.call('alpha', 'get-report', {y: a.x + 1}); return [a, b];");
    assert_eq!(r.done.status, "ok", "{:?}", r.done);
    assert_eq!(r.done.result, json!([{"x": 3}, {"y": 4}]));
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[1].1, "get-report");
}

#[test]
fn async_function_forms_get_input() {
    for code in [
        "async function main(input) { return input.n * 2 }",
        "async (input) => input.n * 2",
        "return input.n * 2",
    ] {
        let r = run(code);
        assert_eq!(
            (r.done.status.as_str(), &r.done.result),
            ("ok", &json!(6)),
            "{code}"
        );
    }
}

#[test]
fn concurrent_calls_and_tool_errors_are_catchable() {
    let r = run_with(
        "const rs = await Promise.allSettled([tools.alpha.echo({a:1}), tools.alpha.get_report({})]);
         try { await tools.alpha.get_report({}) } catch (e) {
           return [rs.map(r => r.status), e instanceof ToolError, e.code, e.server, e.tool, e.message] }",
        limits(),
        |tool, args| match tool {
            "get-report" => CallAnswer {
                id: 0,
                value: None,
                error: Some(CallFailure {
                    code: "upstream".into(),
                    message: "boom".into(),
                }),
            },
            _ => echo(tool, args),
        },
    );
    assert_eq!(
        r.done.result,
        json!([
            ["fulfilled", "rejected"],
            true,
            "upstream",
            "alpha",
            "get-report",
            "boom"
        ]),
        "{:?}",
        r.done
    );
}

#[test]
fn a_thrown_tool_error_is_reported_with_its_code() {
    let r =
        run("await tools.call('alpha', 'echo', {}); throw new ToolError('a', 'b', 'denied', 'no')");
    assert_eq!(r.done.status, "error");
    let e = r.done.error.unwrap();
    assert_eq!(
        (e.name.as_str(), e.code.as_deref()),
        ("ToolError", Some("denied"))
    );
}

#[test]
fn the_call_limit_throws_limit() {
    let r = run("const out = []; for (let i = 0; i < 7; i++) { try { await tools.alpha.echo({i}); out.push('ok') } catch (e) { out.push(e.code) } } return out");
    assert_eq!(
        r.done.result,
        json!(["ok", "ok", "ok", "ok", "ok", "limit", "limit"])
    );
    assert_eq!(r.calls.len(), 5);
}

#[test]
fn pollution_does_not_change_what_is_sent() {
    let r = run(
        "Object.prototype.injected = 1; Object.prototype.toJSON = () => ({evil: true});
         let reads = 0;
         const args = {get message() { reads++; return reads === 1 ? 'checked' : 'swapped' }, toJSON() { return {message: 'x'} }};
         await tools.alpha.echo(args); return reads",
    );
    assert_eq!(r.done.status, "ok", "{:?}", r.done);
    assert_eq!(r.done.result, json!(1), "the getter ran once");
    assert_eq!(r.calls[0].2, json!({"message": "checked"}));
}

#[test]
fn nothing_outside_the_sandbox_is_reachable() {
    let r = run("const t = x => typeof globalThis[x];
         let imp; try { await import('fs'); imp = 'loaded' } catch (e) { imp = 'threw' }
         const F = tools.constructor;
         const ctor = tools.alpha.echo.constructor.constructor('return Object.keys(this)')();
         return {require: t('require'), fetch: t('fetch'), std: t('std'), os: t('os'),
                 imp, F: typeof F, keys: Object.keys(tools), ns: Object.keys(tools.beta),
                 frozen: Object.isFrozen(tools), ctor: ctor.sort()}");
    assert_eq!(r.done.status, "ok", "{:?}", r.done);
    let v = &r.done.result;
    for k in ["require", "fetch", "std", "os"] {
        assert_eq!(v[k], "undefined", "{k}");
    }
    assert_eq!(v["imp"], "threw");
    assert_eq!(v["F"], "undefined", "tools has no prototype to walk");
    assert_eq!(v["keys"], json!(["alpha", "beta"]));
    assert_eq!(v["ns"], json!(["__proto___"]));
    assert_eq!(v["frozen"], true);
    assert_eq!(
        v["ctor"],
        json!([
            "ToolError",
            "clearInterval",
            "clearTimeout",
            "console",
            "fs",
            "input",
            "setInterval",
            "setTimeout",
            "skills",
            "sleep",
            "state",
            "tools"
        ])
    );
}

#[test]
fn a_tool_named_proto_is_reachable_both_ways() {
    let r = run("return [await tools.beta.__proto___({a: 1}), await tools.call('beta', '__proto__', {b: 2})]");
    assert_eq!(r.done.result, json!([{"a": 1}, {"b": 2}]), "{:?}", r.done);
    assert_eq!(r.calls[1].1, "__proto__");
}

#[test]
fn cpu_loops_end_at_the_deadline() {
    let fast = Limits {
        timeout_ms: 200,
        ..limits()
    };
    for code in [
        "while (true) {}",
        "for (;;) { try { while (true) {} } catch (e) {} }",
        "async function f() { for (;;) await null } await f()",
        "/(a+)+$/.test('a'.repeat(40) + 'b')",
    ] {
        let r = run_with(code, fast.clone(), echo);
        assert_eq!(r.done.status, "timeout", "{code}: {:?}", r.done);
    }
}

#[test]
fn memory_and_stack_limits_throw() {
    for code in [
        "const a = []; for (;;) a.push({x: [1, 2, 3]})",
        "let s = 'x'; for (;;) s = s + s",
        "new Uint8Array(1e9)",
        "function f(n) { return f(n + 1) + 1 } f(0)",
    ] {
        let r = run(code);
        assert_eq!(r.done.status, "error", "{code}: {:?}", r.done);
    }
    // And the next run is unaffected.
    assert_eq!(run("return 1").done.result, json!(1));
}

#[test]
fn a_program_out_of_heap_is_told_so_not_null() {
    for code in [
        "const a = []; for (;;) a.push({x: [1, 2, 3]})",
        "const a = []; for (;;) a.push('y'.repeat(100000) + a.length)",
    ] {
        let r = run(code);
        let e = r.done.error.expect("an error");
        assert!(
            e.message.contains("ran out of memory") && e.message.contains("32 MiB"),
            "{code}: {e:?}"
        );
    }
}

#[test]
fn a_promise_nothing_settles_ends_at_once() {
    let r = run("await new Promise(() => {})");
    assert_eq!(r.done.status, "error");
    assert!(r
        .done
        .error
        .unwrap()
        .message
        .contains("nothing will settle"));
}

#[test]
fn console_output_is_capped_and_counted() {
    let r = run("for (let i = 0; i < 10000; i++) console.log('x'.repeat(1000)); console.log({a: 1}); return 'done'");
    assert_eq!(r.done.status, "ok");
    assert!(r.done.truncated);
    assert!(r.done.dropped_log_bytes > 9_000_000);
    assert!(r.logs.iter().map(String::len).sum::<usize>() <= 1_000);
}

#[test]
fn a_large_return_value_is_replaced_by_a_note() {
    let r = run("return 'x'.repeat(20_000_000)");
    assert_eq!(r.done.status, "ok", "{:?}", r.done.error);
    assert!(r.done.truncated);
    assert!(r.done.result.as_str().unwrap().contains("larger than"));
}

#[test]
fn syntax_errors_name_the_problem() {
    let r = run("return (1 +");
    assert_eq!(r.done.status, "error");
    assert_eq!(r.done.error.unwrap().name, "SyntaxError");
}

#[test]
fn timers_run_in_due_order_and_can_be_cleared() {
    // Only orders that hold however late the loop wakes: the earlier due time first.
    let r = run("const seen = [];
         setTimeout((x) => seen.push(x), 30, 'late');
         setTimeout(() => seen.push('soon'), 0);
         const gone = setTimeout(() => seen.push('cleared'), 10);
         clearTimeout(gone);
         let n = 0;
         const every = setInterval(() => { if (++n === 3) clearInterval(every); }, 5);
         while (n < 3 || seen.length < 2) await sleep(10);
         await sleep(20);
         const a = await tools.alpha.echo({after: seen.length});
         return [seen, n, a.after]");
    assert_eq!(r.done.status, "ok", "{:?}", r.done);
    assert_eq!(
        r.done.result,
        json!([["soon", "late"], 3, 2]),
        "{:?}",
        r.done
    );
}

#[test]
fn a_sleep_past_the_deadline_ends_the_run_with_a_timeout() {
    let r = run("await tools.alpha.echo({}); await sleep(60000); return 'never'");
    assert_eq!(r.done.status, "timeout", "{:?}", r.done);
    let e = r.done.error.unwrap();
    assert_eq!(e.name, "TimeoutError");
    assert!(
        e.message.contains("deadline of 2000 ms") && e.message.contains("timer"),
        "{}",
        e.message
    );
}

#[test]
fn an_interval_that_is_never_cleared_ends_at_the_deadline() {
    let mut l = limits();
    l.timeout_ms = 300;
    let r = run_with(
        "let n = 0; setInterval(() => n++, 1); await new Promise(() => {})",
        l,
        echo,
    );
    assert_eq!(r.done.status, "timeout", "{:?}", r.done);
}

#[test]
fn a_timer_callback_that_throws_ends_the_run_with_its_error() {
    let r = run(
        "setTimeout(() => { throw new TypeError('from the timer') }, 0); await sleep(50); return 1",
    );
    assert_eq!(r.done.status, "error", "{:?}", r.done);
    let e = r.done.error.unwrap();
    assert_eq!(e.name, "TypeError");
    assert!(e.message.contains("from the timer"), "{}", e.message);
}

#[test]
fn timers_need_functions_and_are_bounded() {
    let r = run("const out = [];
         try { setTimeout('return 1', 1) } catch (e) { out.push(e.name) }
         try { for (let i = 0; i < 2000; i++) setTimeout(() => {}, 1e9) } catch (e) { out.push(e.name) }
         return out");
    assert_eq!(
        r.done.result,
        json!(["TypeError", "RangeError"]),
        "{:?}",
        r.done
    );
}
