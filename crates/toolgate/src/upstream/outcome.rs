//! What an upstream's answer to a call means: a tool result, or the `CallError` that says
//! what went wrong (shared by plain calls, `mrtr` rounds and both eras' tasks).

use crate::config::UpstreamConfig;
use rmcp::service::ServiceError;
use serde_json::Value;
use std::time::Duration;
use toolgate_core::call::{CallError, CallOutcome};

pub(super) fn map_err(
    e: ServiceError,
    config: &UpstreamConfig,
    tool: &str,
    timeout: Duration,
) -> CallError {
    let server = config.name.as_str();
    match e {
        ServiceError::Timeout { .. } => CallError::Timeout {
            server: server.into(),
            tool: tool.into(),
            secs: timeout.as_secs_f64(),
        },
        // An answer over `max_message_bytes` is named exactly where it is found (an HTTP
        // answer: `oversize`, before this; stdio: `child.rs`): a closed connection is
        // not blamed on it.
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => CallError::Closed {
            server: server.into(),
            also: String::new(),
        },
        ServiceError::McpError(e) => CallError::Rejected {
            server: server.into(),
            code: e.code.0,
            message: e.message.to_string(),
        },
        ServiceError::Cancelled { .. } => CallError::Cancelled,
        other => CallError::Other {
            server: server.into(),
            message: other.to_string(),
        },
    }
}

pub(super) fn outcome_from(
    result: rmcp::model::ServerResult,
    server: &str,
) -> Result<CallOutcome, CallError> {
    use rmcp::model::ServerResult;
    let r = match result {
        ServerResult::CallToolResult(r) => r,
        other => {
            return Err(CallError::Other {
                server: server.into(),
                message: format!(
                    "answered tools/call with an unexpected result: {}",
                    kind_of(&other)
                ),
            })
        }
    };
    let content = r
        .content
        .iter()
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .collect();
    Ok(CallOutcome {
        content,
        structured_content: r.structured_content,
        is_error: r.is_error.unwrap_or(false),
        meta: r.meta.and_then(|m| serde_json::to_value(m).ok()),
    })
}

fn kind_of(r: &rmcp::model::ServerResult) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(","))
        })
        .unwrap_or_default()
}
