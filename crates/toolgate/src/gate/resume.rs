//! A call its upstream made a task of, followed again after the gateway restarted.
//!
//! When an upstream answers a call that runs as an operation (guided `execute` past its
//! wait, a client's task) with a task of its own, either era, the call keeps a
//! [`ResumeNote`] with the operation's record in the state store: the tool, the admitted
//! arguments, whom it was called as, and the upstream's task. If the gateway stops before
//! the task ends, the process asked after the operation next (`continue`, `tasks/get`,
//! `tasks/list`, on any replica once the one running it is gone) takes it over
//! ([`Resumer`]): the call passes the gate again as the same caller, with the key's and
//! the profile's current configuration (so a key revoked meanwhile gets nothing), and the
//! upstream's task is followed to its end instead of the tool being called again. Its
//! result leaves as the first process would have let it: PII tokenized, a direct call's
//! cut to the direct budget.
//!
//! Not kept, so lost with the process as any other call: an access token's call (the
//! token is not stored), and a call to an upstream that acts for each caller.

use super::{admit, bound, direct_budget, outbound, Admitted, Origin};
use crate::engine::Engine;
use crate::policy::Caller;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use toolgate_core::call::{CallOptions, CallOutcome, OnTask, UpstreamTask};
use toolgate_core::catalog::{ToolId, ToolRecord};
use toolgate_core::exec::{Resumable, Resume};
use toolgate_core::principal::Principal;

/// What a call keeps with its operation once its upstream made a task of it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ResumeNote {
    server: String,
    tool: String,
    arguments: Map<String, Value>,
    /// `direct` or `guided`: how the result is cut.
    surface: String,
    /// The grant's name: a configured key, or the local identity.
    key: String,
    profile: Option<String>,
    session: String,
    task: UpstreamTask,
}

/// What `call` (admitted for `caller`) gives its upstream so that a task made of it is
/// kept with the operation `resumable` belongs to; `None` for a call that could not be
/// followed again (see the module's last paragraph).
pub(crate) fn on_task(
    engine: &Engine,
    caller: &Caller,
    call: &Admitted,
    resumable: Resumable<CallOutcome>,
) -> Option<OnTask> {
    let tool = &call.tool;
    let upstream = engine.gw.upstream(&tool.id.server)?;
    if caller.grant.subject.is_some() || upstream.acts_for_callers() {
        return None;
    }
    engine.store.durable_backend()?;
    let (server, name) = (tool.id.server.clone(), tool.id.name.clone());
    let (arguments, surface) = (call.arguments.clone(), caller.surface.to_string());
    let (key, session) = (caller.grant.name.clone(), caller.session.clone());
    let profile = caller.profile_name().map(str::to_string);
    Some(OnTask(Arc::new(move |task: &UpstreamTask| {
        let note = ResumeNote {
            server: server.clone(),
            tool: name.clone(),
            arguments: arguments.clone(),
            surface: surface.clone(),
            key: key.clone(),
            profile: profile.clone(),
            session: session.clone(),
            task: task.clone(),
        };
        match serde_json::to_value(&note) {
            Ok(note) => resumable.keep(note),
            Err(e) => tracing::warn!("a call's upstream task was not noted: {e}"),
        }
    })))
}

/// Lets the engine's session store take over the operations a stopped gateway left
/// following an upstream's task.
pub(crate) fn install(engine: &Arc<Engine>) {
    let resumer = Resumer(Arc::downgrade(engine));
    engine.store.set_resumer(Arc::new(resumer));
}

/// Follows a [`ResumeNote`] through the gate again (see the module's documentation).
struct Resumer(Weak<Engine>);

impl Resume<CallOutcome> for Resumer {
    fn resume(
        &self,
        owner: &Principal,
        note: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<CallOutcome, String>> {
        let (engine, owner) = (self.0.clone(), owner.clone());
        Box::pin(async move {
            let engine = engine.upgrade().ok_or("the gateway is stopping")?;
            let note: ResumeNote = serde_json::from_value(note).map_err(|e| {
                format!("the gateway restarted while the call ran, and its note of how to follow it is damaged ({e}); call the tool again")
            })?;
            resumed(&engine, &owner, note, cancel).await.map_err(|why| {
                format!("the gateway restarted while the call ran, and it could not be followed again: {why}")
            })
        })
    }
}

async fn resumed(
    engine: &Engine,
    owner: &Principal,
    note: ResumeNote,
    cancel: CancellationToken,
) -> Result<CallOutcome, String> {
    let surface = if note.surface == "direct" {
        "direct"
    } else {
        "guided"
    };
    let policy = engine.policy.clone();
    let caller = Caller::resumed(
        policy,
        &note.key,
        note.profile.as_deref(),
        note.session,
        surface,
    )?;
    if caller.principal() != *owner {
        return Err("it was made by another caller".into());
    }
    let id = ToolId::new(&note.server, note.tool);
    let tool = listed(engine, &id).await?;
    let call = admit(
        engine,
        &caller,
        owner,
        &tool,
        note.arguments,
        Origin::Client,
    )
    .await
    .map_err(|refusal| refusal.message)?;
    let opts = CallOptions {
        cancel: Some(cancel),
        resume: Some(note.task),
        ..Default::default()
    };
    let mut outcome = call
        .run(opts)
        .await
        .map_err(|e| format!("{} failed: {e}", tool.exposed))?;
    let code = &engine.gw.config.code;
    if code.pii {
        outbound(
            engine.pii(),
            &code.pii_fields,
            owner,
            &id.server,
            &mut outcome,
        );
    }
    if surface == "direct" {
        outcome = bound(outcome, direct_budget(engine, &tool), &tool);
    }
    Ok(outcome)
}

/// The tool `id` once its upstream lists it again (a restarted gateway is still
/// connecting), waiting up to the upstream's `call_timeout_secs`.
async fn listed(engine: &Engine, id: &ToolId) -> Result<Arc<ToolRecord>, String> {
    let upstream = (engine.gw.upstream(&id.server))
        .ok_or_else(|| format!("its server {:?} is no longer configured", id.server))?;
    let deadline = tokio::time::Instant::now() + upstream.config.call_timeout;
    loop {
        let catalog = engine.gw.catalog();
        if let Some(tool) = catalog.by_id(id) {
            return Ok(tool.clone());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("{id} is not listed by its server"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
