//! Listing an upstream's tools: every page, each tool checked on its own, so one bad entry
//! costs that entry and not the upstream.

use rmcp::model::{ClientRequest, CustomRequest, CustomResult, ServerResult};
use rmcp::service::RoleClient;
use rmcp::Peer;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Every tool, following `nextCursor` to the end (bounded, against a looping server).
/// Also returns how long the list may be kept, when the server says (`ttlMs`, 2026-07-28).
///
/// `tools/list` is sent as a raw request, so one malformed tool (an `inputSchema` that is
/// a string, a missing name) cannot fail the whole list: rmcp's typed result would reject
/// the page ("Unexpected response type") and take the upstream offline. Each tool is
/// checked on its own (`usable_tools`); a bad one is skipped with a warning naming it.
pub(crate) async fn list_tools(
    upstream: &str,
    peer: &Peer<RoleClient>,
    raw: &super::RawTools,
) -> Result<(Vec<Map<String, Value>>, Option<std::time::Duration>), ListError> {
    raw.lock().expect("raw tools").clear();
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    let mut ttl = None;
    for _ in 0..1000 {
        let params = cursor.take().map(|c| serde_json::json!({ "cursor": c }));
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
        let page = match peer.send_request(request).await {
            Ok(ServerResult::CustomResult(CustomResult(v))) => v,
            Ok(ServerResult::ListToolsResult(r)) => {
                serde_json::to_value(&r).map_err(ListError::Unreadable)?
            }
            Ok(other) => serde_json::to_value(&other).unwrap_or_default(),
            Err(e) => return Err(ListError::Failed(e)),
        };
        let Some(tools) = page.get("tools").and_then(Value::as_array) else {
            return Err(ListError::NoTools(clip(&page.to_string()).to_string()));
        };
        ttl = ttl.or(page
            .get("ttlMs")
            .and_then(Value::as_u64)
            .map(std::time::Duration::from_millis));
        // Prefer the object as the server wrote it (stdio upstreams keep every key).
        let mut kept = raw.lock().expect("raw tools");
        for t in tools {
            let written = (t.get("name").and_then(Value::as_str)).and_then(|n| kept.remove(n));
            listed.push(written.map_or_else(|| t.clone(), Value::Object));
        }
        drop(kept);
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok((usable_tools(upstream, listed), ttl)),
        }
    }
    Err(ListError::TooManyPages)
}

/// Why an upstream's tools could not be listed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    /// The request failed (no answer, an error answer, the connection lost).
    #[error("tools/list failed: {0}")]
    Failed(#[source] rmcp::ServiceError),
    /// The answer could not be read as JSON.
    #[error("tools/list failed: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// The answer has no `tools` list (its text, clipped).
    #[error("tools/list failed: the answer has no `tools` list: {0}")]
    NoTools(String),
    /// The server kept paging past the gateway's bound.
    #[error("tools/list returned more than 1000 pages; giving up")]
    TooManyPages,
    /// A refresh gave no answer within the upstream's call timeout.
    #[error("no answer to tools/list within {secs:.1} s (call_timeout_secs)")]
    TimedOut {
        /// The timeout, in seconds.
        secs: f64,
    },
    /// A refresh was given up at shutdown.
    #[error("the gateway is shutting down")]
    ShuttingDown,
}

/// The tools an upstream listed that can be served: each must be a valid MCP `Tool` with
/// a non-empty name, and a name may appear once. Every tool left out is warned about,
/// naming it and the upstream, so one bad entry costs that entry, not the upstream.
pub(crate) fn usable_tools(upstream: &str, listed: Vec<Value>) -> Vec<Map<String, Value>> {
    let mut out: Vec<Map<String, Value>> = Vec::with_capacity(listed.len());
    let mut seen = std::collections::HashSet::new();
    for (i, t) in listed.into_iter().enumerate() {
        let name = t.get("name").and_then(Value::as_str).unwrap_or("");
        let label = match name {
            "" => format!("tool #{} (no name)", i + 1),
            n => format!("tool {n:?}"),
        };
        let why = if let Err(e) = serde_json::from_value::<rmcp::model::Tool>(t.clone()) {
            Some(format!("it is not a valid MCP tool ({e})"))
        } else if name.trim().is_empty() {
            Some("its name is empty".to_string())
        } else if !seen.insert(name.to_string()) {
            Some("the upstream listed this name more than once; the first is served".to_string())
        } else {
            None
        };
        match (why, t) {
            (None, Value::Object(o)) => out.push(o),
            (Some(why), _) => {
                tracing::warn!(
                    upstream,
                    "skipped {label} from upstream {upstream:?}: {why}"
                )
            }
            (None, _) => tracing::warn!(upstream, "skipped {label}: not a JSON object"),
        }
    }
    out
}

fn clip(s: &str) -> &str {
    let mut end = s.len().min(300);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Keeps the tool objects of a `tools/list` result exactly as the server wrote them: rmcp's
/// `Tool` type drops keys it does not know (`execution`, custom annotations), and the
/// catalog promises the upstream's object whole. Only the answer to `list`, the last
/// `tools/list` request sent, is kept: a late answer to a refresh that timed out must not
/// fill the cache the next refresh reads (the first object of a name is the one kept).
pub(super) fn capture_tools(
    line: &str,
    list: Option<&rmcp::model::RequestId>,
    raw: &super::RawTools,
) {
    let Some(list) = list else {
        return;
    };
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return;
    };
    let Some(tools) = v.pointer("/result/tools").and_then(|t| t.as_array()) else {
        return;
    };
    let id = v
        .get("id")
        .and_then(|id| rmcp::model::RequestId::deserialize(id).ok());
    if id.as_ref() != Some(list) {
        return;
    }
    let mut raw = raw.lock().expect("raw tools");
    for t in tools {
        if let (Some(name), Some(obj)) = (t.get("name").and_then(|n| n.as_str()), t.as_object()) {
            // The first of two tools with one name is the one served (`usable_tools`).
            raw.entry(name.to_string()).or_insert_with(|| obj.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::usable_tools;
    use serde_json::json;

    #[test]
    fn bad_empty_and_repeated_tools_are_skipped_and_the_rest_served() {
        let listed = vec![
            json!({"name": "good", "inputSchema": {"type": "object"}}),
            json!({"name": "bad_schema", "inputSchema": "a string"}),
            json!({"name": "", "inputSchema": {"type": "object"}}),
            json!({"name": "good", "inputSchema": {"type": "object"}, "description": "again"}),
            json!({"inputSchema": {"type": "object"}}),
            json!({"name": "other", "inputSchema": {"type": "object"}, "x-custom": 1}),
        ];
        let names: Vec<_> = usable_tools("up", listed)
            .into_iter()
            .map(|o| {
                (
                    o["name"].as_str().unwrap().to_string(),
                    o.get("description").cloned(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![("good".to_string(), None), ("other".to_string(), None)]
        );
    }
}
