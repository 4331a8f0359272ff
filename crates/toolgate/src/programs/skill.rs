//! Running a skill: from execute (a selection route made, or `tool: "skills/<name>"`),
//! whose answer is the run's, like execute_code's; and from a program
//! (`await skills.run(name, input)`), as a nested run whose returned value the program
//! receives. Either way the input is validated against the skill's `input_schema`, the
//! program runs in its own worker with the caller's authorization (every tool call through
//! the same gate as execute), and it can call only tools of the servers the skill names.
//!
//! A skill is offered to a caller only when every server it names is connected and shown
//! by the caller's profile.

use super::run::{audited, run_program, show, Program};
use crate::code::worker::ToolCall;
use crate::engine::Engine;
use crate::policy::Caller;
use crate::skills::{Skill, SKILLS_SERVER};
use serde_json::{json, Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use toolgate_core::catalog::{Catalog, ToolId, ToolRecord};
use toolgate_core::exec::ValidationReport;
use toolgate_core::meta::args::ExecuteArgs;
use toolgate_core::meta::MetaResult;
use toolgate_core::principal::Principal;
use toolgate_sandbox::protocol::CallFailure;

/// How deep skills may run skills (a program the model wrote is depth 0).
pub(crate) const MAX_DEPTH: u32 = 2;

/// The skills this caller is offered: those whose servers are all connected and shown.
pub(crate) fn offered(engine: &Engine, caller: &Caller, catalog: &Catalog) -> Vec<Arc<Skill>> {
    let set = engine.skills().current();
    if set.skills.is_empty() || !engine.code_for(caller) {
        return Vec::new();
    }
    let servers = caller.policy.servers(caller, catalog);
    set.skills
        .values()
        .filter(|s| s.servers.iter().all(|x| servers.contains(&x.as_str())))
        .cloned()
        .collect()
}

/// Why a caller cannot run the skill it named.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SkillRefused {
    /// Code mode is off for the caller's key or profile.
    #[error("skills are programs, and code mode is not enabled for this key or profile: ask the operator (code.profiles / code.keys), or use route and execute")]
    CodeOff,
    /// No such skill, or one the caller's profile does not show.
    #[error("no skill named {name:?} is available: call route with the task to find one")]
    Unknown { name: String },
    /// A server the skill needs is down (a retry later can help).
    #[error("skill {name:?} needs {} which {} not connected now; try again later", .down.join(", "), if .down.len() == 1 { "is" } else { "are" })]
    ServersDown { name: String, down: Vec<String> },
}

/// The skill `name`, if this caller is offered it; else what to do.
pub(crate) fn find(
    engine: &Engine,
    caller: &Caller,
    name: &str,
) -> Result<Arc<Skill>, SkillRefused> {
    let set = engine.skills().current();
    if !engine.code_for(caller) {
        return Err(SkillRefused::CodeOff);
    }
    let unknown = || SkillRefused::Unknown {
        name: name.to_string(),
    };
    let skill = set.get(name).ok_or_else(unknown)?;
    let catalog = engine.gw.catalog();
    let connected = catalog.servers();
    let shown = caller.policy.servers(caller, &catalog);
    let down: Vec<&str> = skill
        .servers
        .iter()
        .map(String::as_str)
        .filter(|s| !connected.contains(s))
        .collect();
    if !down.is_empty() {
        return Err(SkillRefused::ServersDown {
            name: name.to_string(),
            down: down.iter().map(|s| s.to_string()).collect(),
        });
    }
    // A server the caller's profile hides is not named.
    if skill.servers.iter().any(|s| !shown.contains(&s.as_str())) {
        return Err(unknown());
    }
    Ok(skill.clone())
}

/// The skill an execute call names, if it names one.
pub(crate) fn target(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
) -> Option<String> {
    if !engine.skills().configured() {
        return None;
    }
    if let Some(Value::String(sel)) = args.get("selectionId") {
        return engine
            .recall(owner, sel)
            .ok()
            .filter(|id| id.server == SKILLS_SERVER)
            .map(|id| id.name);
    }
    match args.get("tool") {
        Some(Value::String(t)) => ToolId::parse(t)
            .filter(|id| id.server == SKILLS_SERVER)
            .map(|id| id.name),
        _ => None,
    }
}

/// execute of a skill: `arguments` is its input.
pub(crate) async fn execute(
    engine: &Engine,
    owner: &Principal,
    name: &str,
    args: &Map<String, Value>,
    cancel: CancellationToken,
    caller: &Caller,
) -> MetaResult {
    let cfg = engine.code_config();
    // A skill takes execute's arguments, less the result shaping (its answer is a run's).
    let given = match toolgate_core::meta::args::parse::<ExecuteArgs>(args) {
        Ok(g) if g.fields.is_some() || g.max_tokens.is_some() => Err(format!(
            "unknown argument {:?} for a skill: it takes selectionId (or tool) and arguments (the skill's input)",
            if g.fields.is_some() { "fields" } else { "max_tokens" }
        )),
        other => other.map_err(String::from),
    };
    let given = match given {
        Ok(g) => g,
        Err(e) => return MetaResult::error(format!("execute: {e}")),
    };
    let skill = match find(engine, caller, name) {
        Ok(s) => s,
        Err(e) => return MetaResult::error(format!("execute: {e}")),
    };
    let mut input = Value::Object(given.arguments.unwrap_or_default());
    if cfg.pii {
        if let Err(e) = super::run::restore_input(engine, owner, &mut input) {
            let e = engine.refused(caller, "piiToken", &e.message.clone(), e);
            return MetaResult::error(format!("execute: {e}"));
        }
    }
    let id = skill.record.id.to_string();
    if let Err(report) = check_input(engine, &skill.record, &input) {
        return MetaResult {
            structured: Some(
                json!({"error": "invalid_arguments", "tool": id, "validation": report.structured()}),
            ),
            ..MetaResult::error(report.to_text(&id))
        };
    }
    let program = Program {
        code: skill.code.clone(),
        input,
        timeout: cfg.timeout,
        max_calls: cfg.max_tool_calls,
        skill: Some(&skill),
        depth: 0,
        inherited: Vec::new(),
    };
    let (report, audit) = match audited(engine, owner, caller, &program, &cancel).await {
        Ok(ran) => ran,
        Err(e) => return e,
    };
    audit.end(&report.status, report.calls.len(), None);
    let mut answer = show(engine, owner, report);
    if let Some(s) = answer.structured.as_mut() {
        s["skill"] = json!(name);
    }
    answer
}

/// `skills.run(name, input)` from a program: a nested run with what is left of the
/// parent's time; its value is the program's, its failure a ToolError.
pub(crate) fn nested<'a>(
    engine: &'a Engine,
    owner: &'a Principal,
    caller: &'a Caller,
    call: ToolCall,
    deadline: Instant,
    depth: u32,
    parent: &'a crate::code::flows::RunFlows,
) -> Pin<Box<dyn Future<Output = Result<Value, CallFailure>> + Send + 'a>> {
    Box::pin(async move {
        let fail = |code: &str, message: String| CallFailure {
            code: code.into(),
            message,
        };
        let name = call.tool;
        if depth > MAX_DEPTH {
            return Err(fail(
                "limit",
                format!("skills may run other skills only {MAX_DEPTH} levels deep"),
            ));
        }
        let skill = find(engine, caller, &name).map_err(|e| fail("denied", e.to_string()))?;
        let id = skill.record.id.to_string();
        check_input(engine, &skill.record, &call.arguments)
            .map_err(|r| fail("invalid_arguments", r.to_text(&id)))?;
        let cfg = engine.code_config();
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(50) {
            return Err(fail("timeout", format!("no time left to run {id}")));
        }
        // The parent's values in the skill's input stay held to the rules inside it.
        let inherited = parent.carried(&call.arguments);
        let program = Program {
            code: skill.code.clone(),
            input: call.arguments,
            timeout: left.min(cfg.timeout),
            max_calls: cfg.max_tool_calls,
            skill: Some(&skill),
            depth,
            inherited,
        };
        let (audit, caller) = crate::gate::start_run(caller, "skill", Some(&name))
            .map_err(|r| fail("denied", r.message))?;
        let report = run_program(engine, owner, &caller, &program).await;
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                audit.end("refused", 0, None);
                return Err(fail("limit", e.to_string()));
            }
        };
        audit.end(&report.status, report.calls.len(), None);
        // What the skill's results held comes back to the parent with its result.
        parent.adopt(report.carried.clone());
        if report.status == "ok" {
            return Ok(report.result);
        }
        // The skill's own calls are not in the parent's list: name them, so the model
        // knows which writes may have happened.
        let calls: Vec<String> = report
            .calls
            .iter()
            .map(|c| {
                let how = match c.ok {
                    Some(true) => "ok",
                    Some(false) => "failed",
                    None => "unfinished",
                };
                format!("{}/{} {how}", c.server, c.tool)
            })
            .collect();
        let (code, what) = match &report.error {
            Some(e) => (
                e.code
                    .clone()
                    .unwrap_or_else(|| match report.status.as_str() {
                        "timeout" => "timeout".into(),
                        _ => "upstream".into(),
                    }),
                format!("{}: {}", e.name, e.message),
            ),
            None => ("upstream".into(), report.status.clone()),
        };
        Err(fail(
            &code,
            format!(
                "{id} ended with {}: {what} (its tool calls: {})",
                report.status,
                if calls.is_empty() {
                    "none".into()
                } else {
                    calls.join(", ")
                }
            ),
        ))
    })
}

/// The input against the skill's input schema.
fn check_input(
    engine: &Engine,
    record: &ToolRecord,
    input: &Value,
) -> Result<(), ValidationReport> {
    engine.validators().validate(record, input).map(drop)
}

/// The TypeScript a program needs to run the skill (route's `detail: "typescript"`).
pub(crate) fn declare(record: &ToolRecord) -> String {
    let name = &record.id.name;
    let types = crate::code::typescript::input_type(name, record.input_schema());
    let args = types
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("type "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or("Record<string, unknown>")
        .to_string();
    let doc = crate::code::clip(record.description(), 400).replace("*/", "*\\/");
    format!(
        "{types}declare namespace skills {{\n  /** {doc} */\n  function run(name: {name:?}, input: {args}): Promise<unknown>;\n}}\n"
    )
}
