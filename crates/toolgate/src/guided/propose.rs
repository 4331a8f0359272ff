//! The `propose_skill` meta-tool: save a finished run's program as a draft skill for an
//! operator to review. The gateway writes the draft from what it kept of the run (the
//! program as it ran); the model supplies only the name, description and input schema.
//! A draft is not served until `toolgate skill approve NAME`.

use super::{opt_str, Engine, MetaResult};
use crate::policy::Caller;
use crate::principal::Principal;
use crate::skills::drafts::{self, Proposal};
use crate::skills::manifest::{check_schema, MAX_DESCRIPTION};
use crate::skills::{is_skill_name, name_rule};
use serde_json::{json, Map, Value};

pub fn run(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> MetaResult {
    match propose(engine, owner, args, caller) {
        Ok(r) => r,
        Err(e) => MetaResult::error(format!("propose_skill: {e}")),
    }
}

fn propose(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Result<MetaResult, String> {
    let cfg = &engine.gw.config.code;
    let Some(dir) = engine.skills.dir() else {
        return Err("skills are not configured on this gateway".into());
    };
    for key in args.keys() {
        if !super::surface::declares(super::surface::PROPOSE_SKILL, key) {
            return Err(format!(
                "unknown argument {key:?}: propose_skill takes runId, name, description, input_schema and servers"
            ));
        }
    }
    let run_id = opt_str(args, "runId")?
        .ok_or("\"runId\" is required: the runId of a finished execute_code run of this session")?;
    let name = opt_str(args, "name")?.ok_or("\"name\" is required")?;
    if !is_skill_name(name) {
        return Err(name_rule(name));
    }
    let description = opt_str(args, "description")?
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.len() <= MAX_DESCRIPTION)
        .ok_or_else(|| format!("\"description\" is required: 1 to {MAX_DESCRIPTION} characters saying what the skill does (route finds it by this)"))?;
    let input_schema = match args.get("input_schema") {
        None | Some(Value::Null) => json!({"type": "object"}),
        Some(s) => {
            check_schema(s).map_err(|e| format!("\"input_schema\": {e}"))?;
            s.clone()
        }
    };
    let run =
        (engine.runs.get(owner, run_id)).map_err(|r| engine.refused(caller, "runId", run_id, r))?;
    if run.status != "ok" {
        return Err(format!(
            "run {run_id:?} ended with status {}: propose a run that succeeded",
            run.status
        ));
    }
    let servers = match args.get("servers") {
        None | Some(Value::Null) => run.servers.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("\"servers\" must be a list of server names")?,
        Some(_) => return Err("\"servers\" must be a list of server names".into()),
    };
    let proposal = Proposal {
        name,
        description,
        servers: servers.clone(),
        input_schema,
        code: &run.code,
        provenance: format!(
            "run {run_id}, key {:?}, {}",
            caller.grant.name,
            crate::policy::audit::now_rfc3339()
        ),
    };
    let folder = drafts::write(dir, &proposal, cfg.max_source_bytes)?;
    tracing::info!(skill = name, key = %caller.grant.name, "skill draft proposed: {}", folder.display());
    Ok(MetaResult::text(
        format!(
            "Draft skill {name:?} saved for review (servers: {}). It is not usable until an operator approves it.",
            if servers.is_empty() { "none".into() } else { servers.join(", ") }
        ),
        Some(json!({"status": "draft", "name": name, "servers": servers})),
    ))
}
