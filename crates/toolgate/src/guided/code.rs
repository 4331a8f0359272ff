//! The `execute_code` meta-tool: run a program in a sandbox worker, its tool calls going
//! through the same gate as execute, and show the model only what it returns or logs.

use super::{opt_str, opt_uint, Engine, MetaResult};
use crate::code::calls::Gate;
use crate::code::worker::{self, WorkerSettings, MAX_RESULT_BYTES};
use crate::code::{answer, strip_fences};
use crate::policy::Caller;
use serde_json::{Map, Value};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use toolgate_sandbox::protocol::{Limits, Run, STATE_SERVER};

/// QuickJS stack: deep recursion throws a RangeError well before the thread's 8 MiB.
const STACK_BYTES: usize = 1 << 20;

pub async fn run(
    engine: &Engine,
    session: &str,
    args: &Map<String, Value>,
    cancel: CancellationToken,
    caller: &Caller,
) -> MetaResult {
    let cfg = &engine.gw.config.code;
    let (code, mut input, timeout, max_calls) = match parse(engine, args) {
        Ok(r) => r,
        Err(e) => return MetaResult::error(format!("execute_code: {e}")),
    };
    if cfg.pii {
        if let Err(e) = engine.pii.restore(session, &mut input) {
            return MetaResult::error(format!("execute_code: input: {e}"));
        }
    }
    let Some(_) = cfg.worker.as_deref() else {
        return MetaResult::error(
            "execute_code: this gateway has no sandbox worker (it was built without the code-mode feature)",
        );
    };
    let runs = &engine.gw.code_runs;
    let Some(_slot) = runs.take(&caller.limit_owner(), cfg.max_runs_per_key) else {
        return MetaResult::error(format!(
            "execute_code: refused: {} already has {} programs running, the limit (code.max_runs_per_key = {}). \
             Wait for one of them to finish, then call execute_code again; or do this step with execute.",
            caller.limit_owner_label(),
            cfg.max_runs_per_key,
            cfg.max_runs_per_key
        ));
    };
    // Owners are "key:..." or "session:...": the empty one counts every run.
    let Some(_worker) = runs.take("", cfg.max_workers) else {
        return MetaResult::error(format!(
            "execute_code: refused: the gateway is running {} programs already, its limit (code.max_workers); try again shortly",
            cfg.max_workers
        ));
    };
    let (entries, allowed) = crate::code::tools_where(&engine.gw.catalog(), |t| {
        let tier = engine.policy.facts(t).tier;
        caller
            .grant
            .missing_permission(&t.id.to_string(), tier)
            .is_none()
    });
    let kill_after = timeout + cfg.grace;
    let run = Run {
        code,
        input,
        tools: entries,
        limits: Limits {
            timeout_ms: timeout.as_millis() as u64,
            heap_bytes: cfg.heap_bytes,
            stack_bytes: STACK_BYTES,
            max_calls,
            max_log_bytes: cfg.output_bytes,
            max_result_bytes: MAX_RESULT_BYTES,
            max_args_bytes: cfg.max_tool_result_bytes,
            address_space_bytes: cfg.address_space_bytes,
            // Past the wall-clock kill: the CPU limit is for a worker the kill missed.
            cpu_secs: kill_after.as_secs() + 2,
        },
    };
    let gate = Gate {
        engine,
        session,
        caller,
        allowed,
        deadline: Instant::now() + timeout,
    };
    let settings = WorkerSettings {
        kill_after,
        max_calls,
        max_in_flight: cfg.max_in_flight,
        max_log_bytes: cfg.output_bytes,
    };
    let gate = &gate;
    // A warm worker from the pool when one is waiting; either way it serves this run only.
    let process = engine.gw.code_workers.take();
    let mut report = tokio::select! {
        r = worker::run(&settings, process, &run, move |c| async move {
            if c.server == STATE_SERVER {
                engine.code_state.request(session, &c.tool, &c.arguments)
            } else {
                gate.call(c).await
            }
        }) => r,
        _ = cancel.cancelled() => return MetaResult::error(
            "execute_code: cancelled; tool calls the program already made may have taken effect",
        ),
    };
    if cfg.pii {
        // Only what leaves for the model is tokenized; inside the run values stayed real.
        engine
            .pii
            .tokenize(session, &mut report.result, &cfg.pii_fields);
        for line in &mut report.logs {
            *line = engine.pii.tokenize_text(session, line);
        }
        if let Some(e) = &mut report.error {
            e.message = engine.pii.tokenize_text(session, &e.message);
        }
    }
    answer::render(report, cfg.output_bytes)
}

type Parsed = (String, Value, Duration, u32);

fn parse(engine: &Engine, args: &Map<String, Value>) -> Result<Parsed, String> {
    let cfg = &engine.gw.config.code;
    for key in args.keys() {
        if !["code", "input", "timeout_ms", "max_tool_calls"].contains(&key.as_str()) {
            return Err(format!(
                "unknown argument {key:?}: execute_code takes code, input, timeout_ms and max_tool_calls"
            ));
        }
    }
    let code = strip_fences(opt_str(args, "code")?.unwrap_or_default());
    if code.is_empty() {
        return Err("\"code\" is required: a JavaScript program (a body that may await and return, or an async function)".into());
    }
    if code.len() > cfg.max_source_bytes {
        return Err(format!(
            "the program is {} bytes; the limit is {}",
            code.len(),
            cfg.max_source_bytes
        ));
    }
    let input = args.get("input").cloned().unwrap_or(Value::Null);
    let timeout = opt_uint(args, "timeout_ms")?
        .map_or(cfg.timeout, |ms| Duration::from_millis(ms.max(50)))
        .min(cfg.timeout);
    let max_calls = opt_uint(args, "max_tool_calls")?.map_or(cfg.max_tool_calls, |n| {
        n.min(u64::from(cfg.max_tool_calls)) as u32
    });
    Ok((code.to_string(), input, timeout, max_calls))
}
