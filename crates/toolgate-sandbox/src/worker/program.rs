//! One program in one fresh runtime: set up the globals, start the program, and drive its
//! promise, answering tool calls from the gateway, until it settles or the deadline passes.

use super::bridge::{Calls, Output, Waiting};
use super::convert::{show, text, to_json, ConvertError};
use super::timers::Timers;
use crate::protocol::{CallAnswer, Done, ProgramError, Run, ToGateway, STATE_SERVER};
use rquickjs::function::Opt;
use rquickjs::promise::PromiseState;
use rquickjs::{Array, Context, Ctx, Function, Object, Runtime, Value};
use serde_json::Value as Json;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const PRELUDE: &str = include_str!("prelude.js");

/// A runtime and context no program has touched yet: made before the run arrives (that is
/// most of a worker's start-up), used for exactly one run.
pub(super) struct Fresh {
    rt: Runtime,
    ctx: Context,
}

impl Fresh {
    pub(super) fn new() -> std::io::Result<Self> {
        let fail =
            |e: rquickjs::Error| std::io::Error::other(format!("cannot start the runtime: {e}"));
        let rt = Runtime::new().map_err(fail)?;
        let ctx = Context::full(&rt).map_err(fail)?;
        Ok(Self { rt, ctx })
    }
}

/// Runs `run` in `fresh` and says how it ended. Console lines and tool calls go out through
/// `out` as they happen; tool answers come in on `input`, one line each.
pub(super) fn run(
    fresh: Fresh,
    run: Run,
    input: &Receiver<String>,
    out: &Rc<RefCell<Output>>,
) -> Done {
    let timeout = Duration::from_millis(run.limits.timeout_ms);
    let deadline = Instant::now() + timeout;
    let Fresh { rt, ctx } = fresh;
    // The heap limit counts what the context already holds, as it did when it was set first.
    rt.set_memory_limit(run.limits.heap_bytes);
    rt.set_max_stack_size(run.limits.stack_bytes);
    // The first defence against a busy program: QuickJS polls this while running bytecode.
    rt.set_interrupt_handler(Some(Box::new(move || Instant::now() >= deadline)));
    let mut done = ctx.with(|ctx| in_context(&ctx, &run, deadline, input, out));
    out_of_memory(&run, &mut done);
    let explained = done
        .error
        .as_ref()
        .is_some_and(|e| e.name == "TimeoutError" && e.message != "deadline");
    if explained {
        done.status = "timeout".into();
    }
    if done.status != "ok" && Instant::now() >= deadline && !explained {
        done.status = "timeout".into();
        done.error = Some(ProgramError {
            name: "TimeoutError".into(),
            message: format!(
                "the program ran past its deadline of {} ms",
                run.limits.timeout_ms
            ),
            code: None,
            server: None,
            tool: None,
        });
    }
    let dropped = out.borrow().dropped_log_bytes;
    done.dropped_log_bytes = dropped;
    done.truncated |= dropped > 0;
    // A program may leave values the runtime would insist on collecting first; the
    // process ends right after this run, so the kernel reclaims it all instead.
    std::mem::forget(ctx);
    std::mem::forget(rt);
    done
}

/// When QuickJS runs out of heap it throws `null` (it has no memory left to make an error),
/// which would reach the model as the message `null`; said in words instead, with the
/// limit. (The heap is freed by the time the run ends, so usage cannot tell this apart from
/// a program's own `throw null`; the message names both.)
fn out_of_memory(run: &Run, done: &mut Done) {
    let Some(e) = done.error.as_mut() else {
        return;
    };
    let mib = run.limits.heap_bytes >> 20;
    let advice = "keep less in memory at once (page through results, keep only the fields needed)";
    if e.message.contains("out of memory") {
        e.name = "OutOfMemoryError".into();
        e.message = format!(
            "the program ran out of memory: its heap is limited to {mib} MiB (code.heap_mib); {advice}"
        );
    } else if e.name == "Error" && (e.message == "null" || e.message == "undefined") {
        e.message = format!(
            "the program ended with {} thrown: it ran out of memory (its heap is limited to {mib} MiB, code.heap_mib; {advice}), or it threw {} itself",
            e.message, e.message
        );
    }
}

fn failed(name: &str, message: String) -> Done {
    Done {
        status: "error".into(),
        result: Json::Null,
        truncated: false,
        error: Some(ProgramError {
            name: name.into(),
            message,
            code: None,
            server: None,
            tool: None,
        }),
        dropped_log_bytes: 0,
    }
}

fn in_context<'js>(
    ctx: &Ctx<'js>,
    run: &Run,
    deadline: Instant,
    input: &Receiver<String>,
    out: &Rc<RefCell<Output>>,
) -> Done {
    let calls: Rc<RefCell<Calls<'js>>> = Rc::default();
    let timers: Rc<RefCell<Timers>> = Rc::default();
    let done = match setup(ctx, run, &calls, &timers, out) {
        Err(e) => failed_with(ctx, e),
        Ok(made) => match start(ctx, &run.code) {
            Err(e) => failed_with(ctx, e),
            Ok(value) => {
                let loop_ = Loop {
                    deadline,
                    input,
                    calls: &calls,
                    timers: &timers,
                    made: &made,
                };
                drive(ctx, value, &loop_, run)
            }
        },
    };
    calls.borrow_mut().waiting.clear();
    done
}

/// What the prelude hands back to the loop: the ToolError factory and the timer trigger.
struct Made<'js> {
    make_error: Function<'js>,
    fire: Function<'js>,
}

/// What the loop waits on.
struct Loop<'a, 'js> {
    deadline: Instant,
    input: &'a Receiver<String>,
    calls: &'a Rc<RefCell<Calls<'js>>>,
    timers: &'a Rc<RefCell<Timers>>,
    made: &'a Made<'js>,
}

/// Installs the globals (`tools`, `console`, `ToolError`, `state`, `skills`, `fs`, the
/// timers, `input`).
fn setup<'js>(
    ctx: &Ctx<'js>,
    run: &Run,
    calls: &Rc<RefCell<Calls<'js>>>,
    timers: &Rc<RefCell<Timers>>,
    out: &Rc<RefCell<Output>>,
) -> rquickjs::Result<Made<'js>> {
    let prelude: Function = ctx.eval(PRELUDE)?;
    let bridge = {
        let (calls, out, limits) = (calls.clone(), out.clone(), run.limits.clone());
        Function::new(
            ctx.clone(),
            move |server: Value<'js>,
                  tool: Value<'js>,
                  args: Opt<Value<'js>>,
                  resolve: Function<'js>,
                  reject: Function<'js>|
                  -> rquickjs::Result<Option<Vec<String>>> {
                let refuse = |code: &str, msg: String| Ok(Some(vec![code.to_string(), msg]));
                let (Some(server), Some(tool)) = (text(&server), text(&tool)) else {
                    return refuse(
                        "invalid_arguments",
                        "tools.call takes (server, tool, arguments) with server and tool as strings".into(),
                    );
                };
                // Reserve the slot before reading the arguments: a getter could call again.
                let id = {
                    let mut c = calls.borrow_mut();
                    if server != STATE_SERVER {
                        if c.started >= limits.max_calls {
                            return refuse(
                                "limit",
                                format!("a run may make at most {} tool calls", limits.max_calls),
                            );
                        }
                        c.started += 1;
                    }
                    c.last_id += 1;
                    c.last_id
                };
                let mut budget = limits.max_args_bytes;
                let arguments = match args.0 {
                    None => Json::Object(Default::default()),
                    Some(v) if v.is_undefined() => Json::Object(Default::default()),
                    Some(v) => match to_json(&v, &mut budget) {
                        Ok(j) => j,
                        Err(ConvertError::TooLarge) => {
                            return refuse(
                                "limit",
                                format!(
                                    "the arguments are larger than {} bytes",
                                    limits.max_args_bytes
                                ),
                            )
                        }
                        Err(e) => return refuse("invalid_arguments", e.to_string()),
                    },
                };
                let waiting = Waiting {
                    resolve,
                    reject,
                    server: server.clone(),
                    tool: tool.clone(),
                };
                calls.borrow_mut().waiting.insert(id, waiting);
                let msg = ToGateway::Call {
                    id,
                    server,
                    tool,
                    arguments,
                };
                if out.borrow_mut().send(&msg).is_err() {
                    calls.borrow_mut().waiting.remove(&id);
                    return refuse("upstream", "the gateway is gone".into());
                }
                Ok(None)
            },
        )?
    };
    let log = {
        let (out, cap) = (out.clone(), run.limits.max_log_bytes);
        Function::new(
            ctx.clone(),
            move |level: String, args: Array<'js>| -> rquickjs::Result<()> {
                let mut parts = Vec::new();
                let mut budget = cap + 1;
                for i in 0..args.len() {
                    let v: Value = args.get(i)?;
                    parts.push(show(&v, &mut budget));
                }
                out.borrow_mut().log(&level, parts.join(" "));
                Ok(())
            },
        )?
    };
    let arm = {
        let timers = timers.clone();
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, ms: f64, repeat: bool| -> rquickjs::Result<f64> {
                match timers.borrow_mut().arm(ms, repeat) {
                    Ok(id) => Ok(id as f64),
                    Err(e) => Err(rquickjs::Exception::throw_range(&ctx, &e)),
                }
            },
        )?
    };
    let disarm = {
        let timers = timers.clone();
        Function::new(ctx.clone(), move |id: f64| {
            timers.borrow_mut().disarm(id as u64)
        })?
    };
    let spec = Array::new(ctx.clone())?;
    for (i, t) in run.tools.iter().enumerate() {
        let row = Array::new(ctx.clone())?;
        for (j, s) in [&t.server, &t.tool, &t.server_ident, &t.tool_ident]
            .into_iter()
            .enumerate()
        {
            row.set(j, s.as_str())?;
        }
        spec.set(i, row)?;
    }
    let made: Object = prelude.call((bridge, log, spec, arm, disarm))?;
    let globals = ctx.globals();
    // A high-resolution clock serves timing attacks better than it serves tool scripts.
    globals.remove("performance")?;
    for key in [
        "tools",
        "console",
        "ToolError",
        "state",
        "skills",
        "fs",
        "setTimeout",
        "setInterval",
        "clearTimeout",
        "clearInterval",
        "sleep",
    ] {
        globals.set(key, made.get::<_, Value>(key)?)?;
    }
    let input = serde_json::to_string(&run.input).unwrap_or_else(|_| "null".into());
    globals.set("input", ctx.json_parse(input)?)?;
    Ok(Made {
        make_error: made.get("makeError")?,
        fire: made.get("fire")?,
    })
}

/// Compiles the program (an async function, or a body that may `await` and `return`) and
/// calls it with `input`. Compiling runs none of it, so a syntax error in one form can
/// fall back to the other.
fn start<'js>(ctx: &Ctx<'js>, code: &str) -> rquickjs::Result<Value<'js>> {
    let trimmed = code.trim_start();
    let function_form = trimmed.starts_with("async function")
        || trimmed.starts_with("function")
        || (trimmed.starts_with("async") && trimmed.contains("=>"));
    let mut f: Option<Function> = None;
    if function_form {
        match ctx.eval::<Value, _>(format!("({code}\n)")) {
            Ok(v) => f = v.into_function(),
            Err(_) => drop(ctx.catch()),
        }
    }
    let f = match f {
        Some(f) => f,
        // The body starts on the wrapper's line, so error line numbers match the program.
        None => ctx.eval(format!("(async function (input) {{{code}\n}})"))?,
    };
    let input: Value = ctx.globals().get("input")?;
    f.call((input,))
}

fn drive<'js>(ctx: &Ctx<'js>, value: Value<'js>, l: &Loop<'_, 'js>, run: &Run) -> Done {
    let Some(promise) = value.as_promise().cloned() else {
        return finished(value, run);
    };
    loop {
        while ctx.execute_pending_job() {
            if Instant::now() >= l.deadline {
                return failed("TimeoutError", "deadline".into());
            }
        }
        match promise.state() {
            PromiseState::Resolved => {
                return match promise.result::<Value>() {
                    Some(Ok(v)) => finished(v, run),
                    _ => failed_with(ctx, rquickjs::Error::Exception),
                }
            }
            PromiseState::Rejected => {
                let _ = promise.result::<Value>();
                return failed_with(ctx, rquickjs::Error::Exception);
            }
            PromiseState::Pending => {}
        }
        let now = Instant::now();
        if now >= l.deadline {
            return failed("TimeoutError", "deadline".into());
        }
        // A timer that is due runs before anything else is waited for; what it throws
        // ends the run, as an uncaught error in a timer callback does elsewhere.
        let due = l.timers.borrow_mut().take_due(now);
        if let Some(id) = due {
            if let Err(e) = l.made.fire.call::<_, ()>((id as f64,)) {
                return failed_with(ctx, e);
            }
            continue;
        }
        let next = l.timers.borrow().next_due();
        if l.calls.borrow().waiting.is_empty() {
            match next {
                None => return failed(
                    "Error",
                    "the program is waiting for a promise that nothing will settle (no tool call or timer is running)".into(),
                ),
                Some(due) if due > l.deadline => {
                    return failed("TimeoutError", format!(
                        "the program ran past its deadline of {} ms waiting for a timer due {} ms after it",
                        run.limits.timeout_ms,
                        due.duration_since(l.deadline).as_millis()
                    ));
                }
                Some(_) => {}
            }
        }
        let until = next.map_or(l.deadline, |due| due.min(l.deadline));
        let line = match l.input.recv_timeout(until.saturating_duration_since(now)) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                return failed("Error", "the gateway closed the pipe".into())
            }
        };
        let Ok(answer) = serde_json::from_str::<CallAnswer>(&line) else {
            return failed("Error", "the gateway sent something unreadable".into());
        };
        let Some(w) = l.calls.borrow_mut().waiting.remove(&answer.id) else {
            continue;
        };
        settle(ctx, w, answer, &l.made.make_error);
    }
}

/// Resolves or rejects a call's promise with the gateway's answer.
fn settle<'js>(ctx: &Ctx<'js>, w: Waiting<'js>, answer: CallAnswer, make_error: &Function<'js>) {
    let failure = match (answer.error, answer.value) {
        (Some(f), _) => Some((f.code, f.message)),
        (None, v) => {
            let text = serde_json::to_string(&v.unwrap_or(Json::Null)).unwrap_or_default();
            match ctx.json_parse(text) {
                Ok(js) => {
                    let _ = w.resolve.call::<_, ()>((js,));
                    None
                }
                Err(_) => {
                    drop(ctx.catch());
                    Some((
                        "limit".to_string(),
                        "the tool's result does not fit in the program's memory".to_string(),
                    ))
                }
            }
        }
    };
    if let Some((code, message)) = failure {
        match make_error.call::<_, Value>((w.server, w.tool, code, message)) {
            Ok(e) => drop(w.reject.call::<_, ()>((e,))),
            Err(_) => {
                let e = ctx.catch();
                drop(w.reject.call::<_, ()>((e,)));
            }
        }
    }
}

/// The program returned `value`.
fn finished(value: Value<'_>, run: &Run) -> Done {
    let mut budget = run.limits.max_result_bytes;
    let (result, truncated) = match to_json(&value, &mut budget) {
        Ok(j) => (j, false),
        Err(ConvertError::TooLarge) => (
            Json::String(format!(
                "[the returned value is larger than {} bytes: return less, e.g. filtered rows or a summary]",
                run.limits.max_result_bytes
            )),
            true,
        ),
        Err(e) => return failed("Error", format!("the returned value cannot be sent: {e}")),
    };
    Done {
        status: "ok".into(),
        result,
        truncated,
        error: None,
        dropped_log_bytes: 0,
    }
}

/// The program threw (or setup failed): what it threw, in words.
fn failed_with(ctx: &Ctx<'_>, e: rquickjs::Error) -> Done {
    if !matches!(e, rquickjs::Error::Exception) {
        return failed("Error", e.to_string());
    }
    let v = ctx.catch();
    let mut error = ProgramError {
        name: "Error".into(),
        message: String::new(),
        code: None,
        server: None,
        tool: None,
    };
    if let Some(o) = v.as_object() {
        let get = |k: &str| o.get::<_, Value>(k).ok().and_then(|v| text(&v));
        error.name = get("name").unwrap_or_else(|| "Error".into());
        error.message = get("message").unwrap_or_default();
        if let Some(at) = get("stack")
            .as_deref()
            .and_then(|s| s.lines().find(|l| l.trim_start().starts_with("at ")))
        {
            error.message = format!("{} ({})", error.message, at.trim());
        }
        if error.name == "ToolError" {
            (error.code, error.server, error.tool) = (get("code"), get("server"), get("tool"));
        }
    } else {
        error.message = show(&v, &mut 4096);
    }
    Done {
        status: "error".into(),
        result: Json::Null,
        truncated: false,
        error: Some(error),
        dropped_log_bytes: 0,
    }
}
