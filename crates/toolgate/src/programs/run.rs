//! The `execute_code` meta-tool: run a program in a sandbox worker, its tool calls going
//! through the same gate as execute, and show the model only what it returns or logs.
//! `run_program` is also how a skill runs (`programs::skill`).

use crate::code::tree::ToolTree;
use crate::code::worker::{self, RunReport, WorkerSettings, MAX_RESULT_BYTES};
use crate::code::workspace::paths::{self, Tree};
use crate::code::{answer, strip_fences};
use crate::engine::Engine;
use crate::gate::program::Gate;
use crate::policy::Caller;
use crate::skills::{Skill, SKILLS_SERVER};
use serde_json::{Map, Value};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use toolgate_core::meta::args::ExecuteCodeArgs;
use toolgate_core::meta::MetaResult;
use toolgate_core::principal::Principal;
use toolgate_sandbox::protocol::{CallFailure, Limits, Run, STATE_SERVER};

/// QuickJS stack: deep recursion throws a RangeError well before the thread's 8 MiB.
const STACK_BYTES: usize = 1 << 20;

pub(crate) async fn run(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    cancel: CancellationToken,
    caller: &Caller,
) -> MetaResult {
    let cfg = engine.code_config();
    let (code, mut input, timeout, max_calls) = match parse(engine, args) {
        Ok(r) => r,
        Err(e) => return MetaResult::error(format!("execute_code: {e}")),
    };
    if cfg.pii {
        if let Err(e) = restore_input(engine, owner, &mut input) {
            let e = engine.refused(caller, "piiToken", &e.message.clone(), e);
            return MetaResult::error(format!("execute_code: input: {e}"));
        }
    }
    let program = Program {
        code,
        input,
        timeout,
        max_calls,
        skill: None,
        depth: 0,
        inherited: Vec::new(),
    };
    let (report, audit) = match audited(engine, owner, caller, &program, &cancel).await {
        Ok(ran) => ran,
        Err(e) => return e,
    };
    // Kept (with what it called) so the model can propose it as a skill.
    let mut servers: Vec<String> = report
        .calls
        .iter()
        .filter(|c| c.ok == Some(true) && c.server != SKILLS_SERVER)
        .map(|c| c.server.clone())
        .collect();
    servers.sort();
    servers.dedup();
    let run_id = engine.runs().record(
        owner,
        &caller.grant.name,
        &program.code,
        &report.status,
        servers,
    );
    audit.end(&report.status, report.calls.len(), Some(&run_id));
    let mut answer = show(engine, owner, report);
    if let Some(s) = answer.structured.as_mut() {
        s["runId"] = Value::String(run_id.clone());
    }
    if let Some(text) = answer.content.first_mut().and_then(|b| b.get_mut("text")) {
        if let Some(t) = text.as_str() {
            *text = Value::String(format!("{t}\nrunId: {run_id}"));
        }
    }
    answer
}

/// Restores the PII tokens in a program's (or a skill's) input, except those a
/// `[code.flows]` rule covers: they stay tokens inside the program and are restored (or
/// refused) by the gate at the call that sends them, where the destination is known.
pub(crate) fn restore_input(
    engine: &Engine,
    owner: &Principal,
    input: &mut Value,
) -> Result<(), toolgate_core::principal::Refused> {
    let rules = &engine.code_config().flows;
    let mut keep_covered = |_: &str, class: &str, origins: &std::collections::BTreeSet<String>| {
        let origins: Vec<String> = origins.iter().cloned().collect();
        if rules.iter().any(|r| r.covers(class, &origins)) {
            crate::code::pii::Decision::Keep
        } else {
            crate::code::pii::Decision::Restore
        }
    };
    engine
        .pii()
        .restore_with(owner, input, &mut keep_covered)
        .map_err(|e| match e {
            crate::code::pii::RestoreError::Token(r) => r,
            // Covered tokens are kept, never refused here: the gate decides at the call.
            crate::code::pii::RestoreError::Flow(m) => toolgate_core::principal::Refused::stale(m),
        })
}

/// One program to run: from execute_code, or a skill (from execute or a program).
pub(crate) struct Program<'a> {
    pub code: String,
    pub input: Value,
    pub timeout: Duration,
    pub max_calls: u32,
    /// A skill's program may call only the tools of the servers the skill names.
    pub skill: Option<&'a Skill>,
    /// 0 for a run the model started; a skill run by a program runs one level deeper.
    pub depth: u32,
    /// For a skill run by a program: the PII values of the parent's run its input holds,
    /// so the skill is held to the same `[code.flows]` rules.
    pub inherited: Vec<crate::code::flows::Carried>,
}

/// What leaves a run for the model: PII tokenized (when configured), within the budget.
pub(crate) fn show(engine: &Engine, owner: &Principal, mut report: RunReport) -> MetaResult {
    let cfg = engine.code_config();
    if cfg.pii {
        // Only what leaves for the model is tokenized; inside the run values stayed real.
        // Each token remembers which servers' results held its value (for flow rules).
        let (pii, from) = (engine.pii(), &report.origins);
        pii.tokenize_from(owner, &mut report.result, &cfg.pii_fields, from);
        // Console lines too, `pii_fields` included where a line is JSON.
        for line in &mut report.logs {
            *line = tokenize_log(pii, owner, line, &cfg.pii_fields, from);
        }
        if let Some(e) = &mut report.error {
            e.message = pii.tokenize_text_from(owner, &e.message, from);
        }
    }
    answer::render(report, cfg.output_bytes)
}

/// One console line (`level: text`, or plain text) with its PII tokenized.
fn tokenize_log(
    pii: &crate::code::pii::Vault,
    owner: &Principal,
    line: &str,
    fields: &[String],
    from: &crate::code::pii::Origins,
) -> String {
    let level = ["log: ", "info: ", "warn: ", "error: ", "debug: "]
        .iter()
        .find(|p| line.starts_with(**p));
    match level {
        Some(p) => format!(
            "{p}{}",
            crate::gate::tokenize_line(pii, owner, &line[p.len()..], fields, from)
        ),
        None => crate::gate::tokenize_line(pii, owner, line, fields, from),
    }
}

/// Runs `program` as one audited run (`execute_code`, or the skill it carries): its start
/// record first (a run whose start cannot be written does not run), its calls made as the
/// run (linked by its id). The error is the answer to give, prefixed by the meta-tool's name;
/// the caller writes the end record of a run that finished.
pub(crate) async fn audited(
    engine: &Engine,
    owner: &Principal,
    caller: &Caller,
    program: &Program<'_>,
    cancel: &CancellationToken,
) -> Result<(RunReport, crate::gate::RunAudit), MetaResult> {
    let (tool, kind, what) = match program.skill {
        Some(_) => ("execute", "skill", "skill"),
        None => ("execute_code", "execute_code", "program"),
    };
    let name = program.skill.map(|s| s.name.as_str());
    let (audit, caller) = crate::gate::start_run(caller, kind, name)
        .map_err(|refusal| MetaResult::error(format!("{tool}: {refusal}")))?;
    tokio::select! {
        r = run_program(engine, owner, &caller, program) => match r {
            Ok(report) => Ok((report, audit)),
            Err(e) => {
                audit.end("refused", 0, None);
                Err(MetaResult::error(format!("{tool}: {e}")))
            }
        },
        _ = cancel.cancelled() => Err(MetaResult::error(format!(
            "{tool}: cancelled; tool calls the {what} already made may have taken effect"
        ))),
    }
}

/// Why a program did not start; the message is the model's (`execute_code: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RunRefused {
    /// No worker command: built without code mode.
    #[error("this gateway has no sandbox worker (it was built without the code-mode feature)")]
    NoWorker,
    /// The caller already runs as many programs as `code.max_runs_per_key` allows.
    #[error("refused: {owner} already has {limit} programs running, the limit (code.max_runs_per_key = {limit}). Wait for one of them to finish, then try again; or do this step with execute.")]
    PerKey {
        /// The caller, as its limit names it (`Caller::limit_owner_label`).
        owner: String,
        /// `code.max_runs_per_key`.
        limit: usize,
    },
    /// The gateway already runs `code.max_workers` programs.
    #[error("refused: the gateway is running {limit} programs already, its limit (code.max_workers); try again shortly")]
    Busy {
        /// `code.max_workers`.
        limit: usize,
    },
}

impl RunRefused {
    /// Whether the same run may start later: a slot frees when a run ends.
    #[expect(
        dead_code,
        reason = "the kind a caller or metric reads (as StoreFault::retryable); none reads it yet"
    )]
    pub(crate) fn retryable(&self) -> bool {
        !matches!(self, Self::NoWorker)
    }
}

/// Runs a program in a new worker, its tool calls through `caller`'s gate. `Err` says why
/// it could not start (no worker, too many runs).
pub(crate) async fn run_program(
    engine: &Engine,
    owner: &Principal,
    caller: &Caller,
    program: &Program<'_>,
) -> Result<RunReport, RunRefused> {
    let cfg = engine.code_config();
    let Some(_) = cfg.worker.as_deref() else {
        return Err(RunRefused::NoWorker);
    };
    // Slots are the gateway's, per caller (its API key, else its session). A skill run by
    // a program shares its parent's slot: with one run allowed, taking another would
    // always be refused.
    let runs = &engine.gw.code_runs;
    let _slot = match program.depth {
        0 => Some(
            runs.take(&caller.limit_owner(), cfg.max_runs_per_key)
                .ok_or_else(|| RunRefused::PerKey {
                    owner: caller.limit_owner_label(),
                    limit: cfg.max_runs_per_key,
                })?,
        ),
        _ => None,
    };
    // Owners are "key:..." or "session:...": the empty one counts every run.
    let Some(_worker) = runs.take("", cfg.max_workers) else {
        return Err(RunRefused::Busy {
            limit: cfg.max_workers,
        });
    };
    let (entries, allowed) = crate::code::tools_where(&engine.gw.catalog(), |t| {
        program
            .skill
            .is_none_or(|s| s.servers.contains(&t.id.server))
            && crate::gate::permitted(caller, t)
    });
    // The tool tree shows what the run may call and the caller's profile shows.
    let tree = ToolTree::new(
        entries.iter().filter_map(|e| {
            allowed
                .get(&(e.server.clone(), e.tool.clone()))
                .map(|r| (e, r))
        }),
        |t| crate::gate::describable(caller, t),
    );
    let (timeout, max_calls) = (program.timeout, program.max_calls);
    let kill_after = timeout + cfg.grace;
    let run = Run {
        code: program.code.clone(),
        input: program.input.clone(),
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
        owner,
        caller,
        allowed,
        deadline: Instant::now() + timeout,
        flows: Default::default(),
    };
    gate.flows.adopt(program.inherited.clone());
    // Files and state carry a run's values to the next only when rules exist to hold them.
    let flows = (!cfg.flows.is_empty()).then_some(&gate.flows);
    let settings = WorkerSettings {
        kill_after,
        max_calls,
        max_in_flight: cfg.max_in_flight,
        max_log_bytes: cfg.output_bytes,
    };
    let (gate, depth, tree) = (&gate, program.depth, &tree);
    // A warm worker from the pool when one is waiting; either way it serves this run only.
    let process = engine.gw.code_workers.take();
    let mut report = worker::run(&settings, process, &run, move |c| async move {
        if c.server == STATE_SERVER {
            match c.tool.strip_prefix("fs.") {
                Some(op) => files(engine, tree, owner.as_str(), op, &c.arguments, flows),
                None => state(engine, owner, &c.tool, c.arguments, flows),
            }
        } else if c.server == SKILLS_SERVER && engine.skills().configured() {
            let parent = &gate.flows;
            super::skill::nested(engine, owner, caller, c, gate.deadline, depth + 1, parent).await
        } else {
            gate.call(c).await
        }
    })
    .await;
    report.origins = gate.flows.origins();
    report.carried = gate.flows.all();
    Ok(report)
}

/// A program's `state.get`/`state.set`: with `flows`, a value set keeps beside it the PII
/// values of the run it holds (and where they came from), and a value got gives them to
/// the run getting it.
fn state(
    engine: &Engine,
    owner: &Principal,
    op: &str,
    mut args: Value,
    flows: Option<&crate::code::flows::RunFlows>,
) -> Result<Value, CallFailure> {
    use crate::code::flows::{unwrap_state, wrap_state};
    let Some(flows) = flows else {
        return engine
            .code_state()
            .request(owner, op, &args)
            .map(|v| unwrap_state(v).0);
    };
    if op == "set" {
        if let Some(value) = args.get_mut("value") {
            let carried = flows.carried(value);
            *value = wrap_state(value.take(), &carried);
        }
    }
    let (value, carried) = unwrap_state(engine.code_state().request(owner, op, &args)?);
    flows.adopt(carried);
    Ok(value)
}

/// A program's `fs` call: `./workspace` is the principal's files, `./servers` the tree.
fn files(
    engine: &Engine,
    tree: &ToolTree,
    owner: &str,
    op: &str,
    args: &Value,
    flows: Option<&crate::code::flows::RunFlows>,
) -> Result<Value, CallFailure> {
    let Some(path) = args.get("path").and_then(Value::as_str) else {
        return Err(CallFailure {
            code: "invalid_arguments".into(),
            message: format!(
                "fs.{op} takes a path as its first argument, e.g. \"./workspace/notes.txt\""
            ),
        });
    };
    let checked = paths::check(path).map_err(|e| CallFailure {
        code: "invalid_arguments".into(),
        message: e.to_string(),
    })?;
    match checked.tree {
        Tree::Workspace => engine.workspace().request(owner, op, &checked, args, flows),
        Tree::Servers => tree.request(op, &checked),
    }
}

type Parsed = (String, Value, Duration, u32);

// The error is the sentence the model is answered with (`MetaResult::error`): a string
// is the value, not a lost type.
fn parse(engine: &Engine, args: &Map<String, Value>) -> Result<Parsed, String> {
    let cfg = engine.code_config();
    let given: ExecuteCodeArgs = toolgate_core::meta::args::parse(args)?;
    let code = strip_fences(&given.code);
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
    let timeout = (given.timeout_ms)
        .map_or(cfg.timeout, |ms| Duration::from_millis(ms.max(50)))
        .min(cfg.timeout);
    let max_calls = (given.max_tool_calls).map_or(cfg.max_tool_calls, |n| {
        n.min(u64::from(cfg.max_tool_calls)) as u32
    });
    Ok((code.to_string(), given.input, timeout, max_calls))
}
