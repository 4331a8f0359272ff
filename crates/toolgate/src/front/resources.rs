//! Resources through the gateway: one merged, paginated list, templates, read, and
//! subscriptions.
//!
//! # Shared URIs
//!
//! A URI listed by one upstream is shown unchanged. When several upstreams list the same
//! URI, the upstream whose name sorts first keeps it unchanged and each other one shows it
//! as `toolgate://{upstream}/{uri percent-encoded}`; reading, subscribing to or completing
//! such a URI decodes it back, so it round-trips. A URI nobody listed (a template
//! instance, say) goes to the first upstream (by name) with a matching template, else to
//! each upstream with resources in name order until one answers.
//!
//! # Policy
//!
//! Resources belong to their server as a whole. The lists show a server's items when the
//! session's profile covers the whole server (`server/*`); reading and subscribing need a
//! key whose scopes cover it, whatever the profile shows (see `Policy::access`), and are
//! audited. Exposed URIs are assigned over every upstream, so a URI names the same resource
//! for every caller.

use super::relay::{relay_for, Subscriptions};
use crate::gateway::Gateway;
use crate::policy::Caller;
use crate::upstream::{RequestOptions, Upstream};
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ReadResourceResult,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// Items per page of the merged lists.
pub(super) const PAGE: usize = 100;
/// The scheme of rewritten (shared) URIs.
const SCHEME: &str = "toolgate://";
/// Upstream pages followed per list, against a looping cursor.
const MAX_PAGES: usize = 100;

/// Every upstream that declared `capability`, in name order, once startup has settled
/// (as for tools/list: a first request shows what is up without waiting long).
pub(super) async fn with_capability<'a>(
    gw: &'a Gateway,
    capability: &str,
) -> Vec<&'a Arc<Upstream>> {
    gw.wait_settled(gw.startup_wait()).await;
    gw.upstreams()
        .filter(|u| u.has_capability(capability))
        .collect()
}

/// All items of a paginated list on one upstream (`key` is the array's field).
pub(super) async fn list_all(up: &Upstream, method: &str, key: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let Ok(page) = up.request(method, params, RequestOptions::default()).await else {
            break;
        };
        if let Some(items) = page.get(key).and_then(Value::as_array) {
            out.extend(items.iter().cloned());
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => break,
        }
    }
    out
}

/// One page of `items` starting at the client's cursor, as JSON with `key` and `nextCursor`.
pub(super) fn page(
    items: Vec<Value>,
    key: &str,
    request: Option<PaginatedRequestParams>,
) -> Result<Value, McpError> {
    let start = match request.and_then(|r| r.cursor) {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= items.len())
            .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {c:?}"), None))?,
    };
    let end = (start + PAGE).min(items.len());
    let mut out = json!({key: items[start..end].to_vec()});
    if end < items.len() {
        out["nextCursor"] = json!(end.to_string());
    }
    Ok(out)
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The rewritten form of `uri` on `upstream`.
pub(super) fn shared_uri(upstream: &str, uri: &str) -> String {
    format!("{SCHEME}{upstream}/{}", encode(uri))
}

/// `(upstream, uri)` from a rewritten URI.
pub(super) fn parse_shared(exposed: &str) -> Option<(String, String)> {
    let rest = exposed.strip_prefix(SCHEME)?;
    let (up, uri) = rest.split_once('/')?;
    Some((up.to_string(), decode(uri)?))
}

/// Every resource, merged: (exposed URI, upstream, upstream URI, resource object).
async fn merged(gw: &Gateway) -> Vec<(String, String, String, Value)> {
    let ups = with_capability(gw, "resources").await;
    let lists = futures::future::join_all(
        ups.iter()
            .map(|u| list_all(u, "resources/list", "resources")),
    )
    .await;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (up, list) in ups.iter().zip(lists) {
        for r in list {
            let Some(uri) = r.get("uri").and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            let exposed = if seen.insert(uri.clone()) {
                uri.clone()
            } else {
                shared_uri(up.name(), &uri)
            };
            out.push((exposed, up.name().to_string(), uri, r));
        }
    }
    out
}

pub(super) async fn list(
    gw: &Gateway,
    caller: &Caller,
    request: Option<PaginatedRequestParams>,
) -> Result<ListResourcesResult, McpError> {
    let items = merged(gw)
        .await
        .into_iter()
        .filter(|(_, up, ..)| caller.policy.shows_server(caller, up))
        .map(|(exposed, _, _, mut r)| {
            r["uri"] = json!(exposed);
            r
        })
        .collect();
    typed(page(items, "resources", request)?)
}

/// Every resource template of the upstreams `keep` lets through: (upstream, template).
async fn templates(gw: &Gateway, keep: impl Fn(&str) -> bool) -> Vec<(String, Value)> {
    let mut ups = with_capability(gw, "resources").await;
    ups.retain(|u| keep(u.name()));
    let lists = futures::future::join_all(
        ups.iter()
            .map(|u| list_all(u, "resources/templates/list", "resourceTemplates")),
    )
    .await;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (up, list) in ups.iter().zip(lists) {
        for t in list {
            // A template two upstreams share is listed once: reads route to the first.
            let key = t
                .get("uriTemplate")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if seen.insert(key) {
                out.push((up.name().to_string(), t));
            }
        }
    }
    out
}

pub(super) async fn list_templates(
    gw: &Gateway,
    caller: &Caller,
    request: Option<PaginatedRequestParams>,
) -> Result<ListResourceTemplatesResult, McpError> {
    let shown = |up: &str| caller.policy.shows_server(caller, up);
    let items = templates(gw, shown)
        .await
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    typed(page(items, "resourceTemplates", request)?)
}

/// True when `uri` could be an instance of RFC 6570 `template` (variables match any run).
fn matches_template(template: &str, uri: &str) -> bool {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        parts.push(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        rest = &rest[open + close + 1..];
    }
    parts.push(rest);
    let mut at = 0;
    for (i, lit) in parts.iter().enumerate() {
        if i == 0 {
            if !uri.starts_with(lit) {
                return false;
            }
            at = lit.len();
        } else if i == parts.len() - 1 {
            return uri.len() >= at + lit.len() && uri.ends_with(lit);
        } else {
            match uri[at..].find(lit) {
                Some(p) => at += p + lit.len(),
                None => return false,
            }
        }
    }
    at == uri.len()
}

/// The upstreams that may own `exposed`, most likely first, with the URI to send them.
async fn owners(gw: &Gateway, exposed: &str) -> Vec<(Arc<Upstream>, String)> {
    if let Some((up, uri)) = parse_shared(exposed) {
        return gw
            .upstream(&up)
            .map(|u| vec![(u.clone(), uri)])
            .unwrap_or_default();
    }
    let by_name = |n: &str| gw.upstream(n).cloned();
    if let Some((_, up, uri, _)) = merged(gw).await.into_iter().find(|(e, ..)| e == exposed) {
        return by_name(&up).map(|u| vec![(u, uri)]).unwrap_or_default();
    }
    let mut out: Vec<(Arc<Upstream>, String)> = Vec::new();
    for (up, t) in templates(gw, |_| true).await {
        let tpl = t
            .get("uriTemplate")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if matches_template(tpl, exposed) {
            out.extend(by_name(&up).map(|u| (u, exposed.to_string())));
        }
    }
    for up in with_capability(gw, "resources").await {
        if !out.iter().any(|(u, _)| u.name() == up.name()) {
            out.push((up.clone(), exposed.to_string()));
        }
    }
    out
}

/// The owners of `exposed` (see [`owners`]) whose server the caller's key may use. When
/// some exist and the key may use none, the refusal for the likeliest (audited) is the
/// error. Each caller audits the owner it then asks, with [`try_owner`].
pub(super) async fn permitted_owners(
    gw: &Gateway,
    caller: &Caller,
    method: &str,
    exposed: &str,
) -> Result<Vec<(Arc<Upstream>, String)>, McpError> {
    let all = owners(gw, exposed).await;
    let Some((first, _)) = all.first() else {
        return Ok(all);
    };
    let first = first.name().to_string();
    let allowed: Vec<_> = (all.into_iter())
        .filter(|(u, _)| caller.grant.missing_server(u.name()).is_none())
        .collect();
    if allowed.is_empty() {
        try_owner(caller, method, &first, exposed)?;
    }
    Ok(allowed)
}

/// Judges and audits one request to `server` (see `Policy::access`).
pub(super) fn try_owner(
    caller: &Caller,
    method: &str,
    server: &str,
    target: &str,
) -> Result<(), McpError> {
    (caller.policy.access(caller, method, server, target))
        .map_err(|why| refused(why.to_string(), target))
}

/// A refused request for a resource: a JSON-RPC error whose message says what is missing.
fn refused(why: String, target: &str) -> McpError {
    McpError::invalid_request(why, Some(json!({"target": target})))
}

pub(super) async fn read(
    gw: &Gateway,
    caller: &Caller,
    exposed: &str,
    context: &RequestContext<RoleServer>,
) -> Result<ReadResourceResult, McpError> {
    let mut last = None;
    const METHOD: &str = "resources/read";
    for (up, uri) in permitted_owners(gw, caller, METHOD, exposed).await? {
        try_owner(caller, METHOD, up.name(), exposed)?;
        let opts = RequestOptions {
            relay: Some(relay_for(context, caller.principal())),
            on_behalf: Some(caller.on_behalf()),
            ..Default::default()
        };
        match up
            .request("resources/read", json!({"uri": uri}), opts)
            .await
        {
            Ok(mut v) => {
                // Contents name the URI the client asked for, so it can match them up.
                if let Some(contents) = v.get_mut("contents").and_then(Value::as_array_mut) {
                    for c in contents {
                        if c.get("uri").and_then(Value::as_str) == Some(uri.as_str()) {
                            c["uri"] = json!(exposed);
                        }
                    }
                }
                return typed(v);
            }
            Err(e) => last = Some(e.to_string()),
        }
    }
    Err(McpError::resource_not_found(
        last.unwrap_or_else(|| format!("no upstream serves resource {exposed:?}")),
        Some(json!({"uri": exposed})),
    ))
}

pub(super) async fn subscribe(
    gw: &Gateway,
    caller: &Caller,
    exposed: &str,
    subs: &Subscriptions,
) -> Result<(), McpError> {
    const METHOD: &str = "resources/subscribe";
    let owners = permitted_owners(gw, caller, METHOD, exposed).await?;
    let Some((up, uri)) = owners.into_iter().next() else {
        return Err(McpError::resource_not_found(
            format!("no upstream serves resource {exposed:?}"),
            None,
        ));
    };
    try_owner(caller, METHOD, up.name(), exposed)?;
    let key = (up.name().to_string(), uri.clone());
    if subs.0.lock().expect("subscriptions").contains_key(&key) {
        return Ok(());
    }
    up.subscribe(&uri)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    subs.0
        .lock()
        .expect("subscriptions")
        .insert(key, exposed.to_string());
    Ok(())
}

pub(super) async fn unsubscribe(
    gw: &Gateway,
    exposed: &str,
    subs: &Subscriptions,
) -> Result<(), McpError> {
    let found = {
        let mut s = subs.0.lock().expect("subscriptions");
        let key = s
            .iter()
            .find(|(_, e)| e.as_str() == exposed)
            .map(|(k, _)| k.clone());
        key.inspect(|k| {
            s.remove(k);
        })
    };
    if let Some((up, uri)) = found {
        if let Some(u) = gw.upstream(&up) {
            u.unsubscribe(&uri)
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        }
    }
    Ok(())
}

/// Drops every subscription of an ended session, upstream too.
pub(super) fn release(gw: Arc<Gateway>, subs: &Subscriptions) {
    let all: Vec<_> = subs
        .0
        .lock()
        .expect("subscriptions")
        .drain()
        .map(|(k, _)| k)
        .collect();
    if all.is_empty() {
        return;
    }
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            for (up, uri) in all {
                if let Some(u) = gw.upstream(&up) {
                    let _ = u.unsubscribe(&uri).await;
                }
            }
        });
    }
}

/// JSON to an rmcp result type; a mismatch is the upstream's fault.
pub(super) fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v)
        .map_err(|e| McpError::internal_error(format!("malformed upstream answer: {e}"), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_uris_round_trip() {
        let uri = "test://static-text?x=1&y=ä";
        let e = shared_uri("b-2", uri);
        assert!(e.starts_with("toolgate://b-2/"));
        assert_eq!(parse_shared(&e), Some(("b-2".into(), uri.into())));
    }

    #[test]
    fn templates_match_their_instances() {
        assert!(matches_template(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
        assert!(!matches_template(
            "test://template/{id}/data",
            "test://other/123/data"
        ));
        assert!(matches_template("file:///{path}", "file:///a/b"));
    }
}
