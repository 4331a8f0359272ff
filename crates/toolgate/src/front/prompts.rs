//! Prompts (named like tools, by `catalog::names`), completion routed to the owning
//! upstream, and `logging/setLevel` applied to every upstream.
//!
//! Prompts follow the resources' policy (see `resources`): listed when the profile covers
//! the whole server, got and completed when the key's scopes do.
// Logging is deprecated by SEP-2577 but still what 2025-era servers and clients speak.
#![allow(deprecated)]

use super::relay::relay_for;
use super::resources::{list_all, page, permitted_owners, try_owner, typed, with_capability};
use crate::catalog::{names, ToolId};
use crate::gateway::Gateway;
use crate::policy::Caller;
use crate::upstream::RequestOptions;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult,
    ListPromptsResult, PaginatedRequestParams, SetLevelRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};

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

pub(super) async fn get(
    gw: &Gateway,
    caller: &Caller,
    request: GetPromptRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<GetPromptResult, McpError> {
    let (up, name) = owner(gw, caller, "prompts/get", &request.name).await?;
    let up = gw
        .upstream(&up)
        .ok_or_else(|| McpError::internal_error("upstream gone", None))?;
    let mut params = json!({"name": name});
    if let Some(args) = request.arguments {
        params["arguments"] = Value::Object(args);
    }
    let opts = RequestOptions {
        relay: Some(relay_for(context)),
        ..Default::default()
    };
    let v = up
        .request("prompts/get", params, opts)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    typed(v)
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
        .request("completion/complete", params, RequestOptions::default())
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    typed(v)
}

/// Applies the level to every upstream that logs; one refusing does not fail the rest.
pub(super) async fn set_level(
    gw: &Gateway,
    request: SetLevelRequestParams,
) -> Result<(), McpError> {
    let params = serde_json::to_value(&request)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let ups = with_capability(gw, "logging").await;
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
