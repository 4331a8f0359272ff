//! Prompts (named like tools, by `catalog::names`), completion routed to the owning
//! upstream, and `logging/setLevel` applied to every upstream in the caller's scope.
//!
//! Prompts follow the resources' policy (see `resources`): listed when the profile covers
//! the whole server, got and completed when the key's scopes do.
// Logging is deprecated by SEP-2577 but still what 2025-era servers and clients speak.
#![expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]

use super::relay::relay_for;
use super::resources::{list_all, page, permitted_owners, try_owner, typed, with_capability};
use crate::gateway::Gateway;
use crate::policy::Caller;
use crate::upstream::{mrtr, RequestOptions};
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, ListPromptsResult, PaginatedRequestParams, SetLevelRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use toolgate_core::catalog::{names, ToolId};

/// Every prompt, merged: (exposed name, upstream, upstream name, prompt object).
async fn merged(gw: &Gateway) -> Vec<(String, String, String, Value)> {
    let ups = with_capability(gw, "prompts").await;
    let lists =
        futures::future::join_all(ups.iter().map(|u| list_all(u, "prompts/list", "prompts"))).await;
    let mut found = Vec::new();
    for (up, list) in ups.iter().zip(lists) {
        for p in list {
            if let Some(name) = p.get("name").and_then(Value::as_str) {
                let over = up.config.rename.get(name).cloned();
                found.push((
                    ToolId::new(up.name(), name),
                    up.config.prefix.clone(),
                    over,
                    p,
                ));
            }
        }
    }
    let ids: Vec<_> = found
        .iter()
        .map(|(id, pre, over, _)| (id.clone(), pre.clone(), over.clone()))
        .collect();
    let exposed = names::assign(&ids);
    found
        .into_iter()
        .zip(exposed)
        .map(|((id, _, _, p), e)| (e, id.server, id.name, p))
        .collect()
}

pub(super) async fn list(
    gw: &Gateway,
    caller: &Caller,
    request: Option<PaginatedRequestParams>,
) -> Result<ListPromptsResult, McpError> {
    let items = merged(gw)
        .await
        .into_iter()
        .filter(|(_, up, ..)| caller.policy.shows_server(caller, up))
        .map(|(exposed, _, _, mut p)| {
            p["name"] = json!(exposed);
            p
        })
        .collect();
    typed(page(items, "prompts", request)?)
}

/// (upstream, upstream prompt name) behind an exposed prompt name, once the caller's key
/// may use that server's prompts for `method` (audited).
async fn owner(
    gw: &Gateway,
    caller: &Caller,
    method: &str,
    exposed: &str,
) -> Result<(String, String), McpError> {
    let all = merged(gw).await;
    match all.iter().find(|(e, ..)| e == exposed) {
        Some((_, up, name, _)) => {
            try_owner(caller, method, up, exposed)?;
            Ok((up.clone(), name.clone()))
        }
        None => {
            let known: Vec<&str> = all
                .iter()
                .filter(|(_, up, ..)| caller.policy.shows_server(caller, up))
                .map(|(e, ..)| e.as_str())
                .take(20)
                .collect();
            Err(McpError::invalid_params(
                format!(
                    "unknown prompt {exposed:?}; prompts/list shows: {}",
                    known.join(", ")
                ),
                None,
            ))
        }
    }
}

/// `prompts/get` on the prompt's upstream. An upstream that answers `input_required`
/// (MRTR) gets it back to a 2026-07-28 client under a gateway handle, whose retry is
/// passed on with the client's `inputResponses`; an older client is asked each request and
/// the upstream retried (`upstream::mrtr`).
pub(super) async fn get(
    gw: &Gateway,
    caller: &Caller,
    request: GetPromptRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<GetPromptResponse, McpError> {
    let (up, name) = owner(gw, caller, "prompts/get", &request.name).await?;
    let up = gw
        .upstream(&up)
        .ok_or_else(|| McpError::internal_error("upstream gone", None))?;
    let mut params = json!({"name": name});
    if let Some(args) = request.arguments {
        params["arguments"] = Value::Object(args);
    }
    // What a resumed call is recorded under (the tool, for a tool call).
    let what = format!("prompts/get {name}");
    let modern = super::request::modern(context);
    if modern {
        if let Some(state) = request.request_state.as_deref() {
            let resumed = super::inputs::resume(gw, caller, state)?;
            if resumed.server != up.name() || resumed.tool != what {
                let why = "the requestState was issued for another request: call again without it";
                return Err(McpError::invalid_params(why, None));
            }
            params["requestState"] = json!(resumed.state);
        }
        if let Some(responses) = &request.input_responses {
            params["inputResponses"] = json!(responses);
        }
    }
    // A 2026-07-28 client cannot be sent requests: an older upstream that asks during
    // prompts/get is refused at once (its answer names what it wanted), rather than waiting
    // for a client that will never answer.
    let relay: std::sync::Arc<dyn toolgate_core::call::ClientRelay> = match modern {
        true => super::relay::SessionRelay::modern(
            context,
            caller.principal(),
            Default::default(),
            None,
        ),
        false => relay_for(context, caller.principal()),
    };
    for _ in 0..mrtr::MAX_ROUNDS {
        let opts = RequestOptions {
            relay: Some(relay.clone()),
            on_behalf: Some(caller.on_behalf()),
            ..Default::default()
        };
        let v = up
            .request("prompts/get", params.clone(), opts)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        if v.get("resultType").and_then(Value::as_str) != Some("input_required") {
            let mut r: GetPromptResult = typed(v)?;
            r.result_type = Some(rmcp::model::ResultType::COMPLETE);
            return Ok(r.into());
        }
        if modern {
            let asked = (up.name().to_string(), what, v);
            return super::inputs::answer(gw, caller, asked).map(Into::into);
        }
        let requests = v.get("inputRequests").and_then(Value::as_object);
        let answers = mrtr::fulfil(&relay, requests.unwrap_or(&serde_json::Map::new()))
            .await
            .map_err(|e| McpError::internal_error(format!("{}: {e}", up.name()), None))?;
        params["inputResponses"] = json!(answers);
        params["requestState"] = v.get("requestState").cloned().unwrap_or(Value::Null);
    }
    let why = format!(
        "{} still asked for input after {} rounds",
        up.name(),
        mrtr::MAX_ROUNDS
    );
    Err(McpError::internal_error(why, None))
}

/// `completion/complete` for a prompt argument or a resource template, on its upstream.
pub(super) async fn complete(
    gw: &Gateway,
    caller: &Caller,
    request: CompleteRequestParams,
) -> Result<CompleteResult, McpError> {
    const METHOD: &str = "completion/complete";
    let mut params = serde_json::to_value(&request)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let up = match params.pointer("/ref/type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let exposed = params
                .pointer("/ref/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (up, name) = owner(gw, caller, METHOD, exposed).await?;
            params["ref"]["name"] = json!(name);
            gw.upstream(&up).cloned()
        }
        Some("ref/resource") => {
            let exposed = params
                .pointer("/ref/uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let (up, uri) = permitted_owners(gw, caller, METHOD, &exposed)
                .await?
                .into_iter()
                .find(|(u, _)| u.has_capability("completions"))
                .ok_or_else(|| {
                    McpError::invalid_params(format!("no upstream completes {exposed:?}"), None)
                })?;
            try_owner(caller, METHOD, up.name(), &exposed)?;
            params["ref"]["uri"] = json!(uri);
            Some(up)
        }
        _ => None,
    };
    let Some(up) = up.filter(|u| u.has_capability("completions")) else {
        // Nothing to complete with is an empty completion, not an error.
        return Ok(CompleteResult::default());
    };
    let v = up
        .request(
            "completion/complete",
            params,
            RequestOptions {
                on_behalf: Some(caller.on_behalf()),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    typed(v)
}

/// Applies the level to every upstream that logs; one refusing does not fail the rest.
/// `logging/setLevel`, passed to the upstreams in the caller's scope only: a level is the
/// whole server's, so the key must cover `server/*` (as for its resources and logs); one
/// key never changes what another key's upstreams log.
pub(super) async fn set_level(
    gw: &Gateway,
    caller: &Caller,
    request: SetLevelRequestParams,
) -> Result<(), McpError> {
    let params = serde_json::to_value(&request)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let mut ups = with_capability(gw, "logging").await;
    ups.retain(|u| {
        let mine = caller.grant.missing_server(u.name()).is_none();
        if !mine {
            tracing::debug!(upstream = u.name(), key = %caller.grant.name, "logging/setLevel not passed on: the key's scopes do not cover the server");
        }
        mine
    });
    let results = futures::future::join_all(ups.iter().map(|u| {
        u.request(
            "logging/setLevel",
            params.clone(),
            RequestOptions::default(),
        )
    }))
    .await;
    for (u, r) in ups.iter().zip(results) {
        if let Err(e) = r {
            tracing::warn!(upstream = u.name(), "logging/setLevel failed: {e}");
        }
    }
    Ok(())
}
