//! The `propose_skill` meta-tool: save a finished run's program as a draft skill for an
//! operator to review. The gateway writes the draft from what it kept of the run (the
//! program as it ran); the model supplies only the name, description and input schema.
//! A draft is not served until `toolgate skill approve NAME`.

use super::{Engine, MetaResult};
use crate::policy::Caller;
use crate::skills::drafts::{self, Proposal};
use crate::skills::manifest::check_schema;
use crate::skills::MAX_DESCRIPTION;
use crate::skills::{is_skill_name, name_rule};
use serde_json::{json, Map, Value};
use toolgate_core::meta::args::ProposeArgs;
use toolgate_core::principal::Principal;

pub(crate) fn run(
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

// The error is the sentence the model is answered with (`MetaResult::error`): a string
// is the value, not a lost type.
fn propose(
    engine: &Engine,
    owner: &Principal,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Result<MetaResult, String> {
    let cfg = engine.code_config();
    let Some(dir) = engine.skills().dir() else {
        return Err("skills are not configured on this gateway".into());
    };
    let given: ProposeArgs = toolgate_core::meta::args::parse(args)?;
    let (run_id, name) = (given.run_id.as_str(), given.name.as_str());
    if !is_skill_name(name) {
        return Err(name_rule(name));
    }
    let description = Some(given.description.trim())
        .filter(|d| !d.is_empty() && d.len() <= MAX_DESCRIPTION)
        .ok_or_else(|| format!("\"description\" is required: 1 to {MAX_DESCRIPTION} characters saying what the skill does (route finds it by this)"))?;
    let input_schema = match given.input_schema {
        None => json!({"type": "object"}),
        Some(s) => {
            let s = Value::Object(s);
            check_schema(&s).map_err(|e| format!("\"input_schema\": {e}"))?;
            s
        }
    };
    let run = (engine.runs().get(owner, run_id))
        .map_err(|r| engine.refused(caller, "runId", run_id, r))?;
    if run.status != "ok" {
        return Err(format!(
            "run {run_id:?} ended with status {}: propose a run that succeeded",
            run.status
        ));
    }
    let servers = given.servers.unwrap_or_else(|| run.servers.clone());
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
    let folder = drafts::write(dir, &proposal, cfg.max_source_bytes).map_err(|e| e.to_string())?;
    tracing::info!(skill = name, key = %caller.grant.name, "skill draft proposed: {}", folder.display());
    Ok(MetaResult::text(
        format!(
            "Draft skill {name:?} saved for review (servers: {}). It is not usable until an operator approves it.",
            if servers.is_empty() { "none".into() } else { servers.join(", ") }
        ),
        Some(json!({"status": "draft", "name": name, "servers": servers})),
    ))
}
