//! `auto` mode's one rule besides token cost: a client that declares the oldest protocol
//! revision (2024-11-05 or before) and no capabilities at all is an old, plain client that
//! may not follow meta-tools; it gets the direct surface, with a warning naming it.

use rmcp::model::{InitializeRequestParams, ProtocolVersion};

/// The client's name and version when it is such an old, capability-less client.
pub(crate) fn old_plain_client(request: &InitializeRequestParams) -> Option<String> {
    let old = request.protocol_version <= ProtocolVersion::V_2024_11_05;
    let bare = serde_json::to_value(&request.capabilities)
        .ok()
        .and_then(|v| v.as_object().map(|o| o.is_empty()))
        .unwrap_or(false);
    (old && bare).then(|| {
        format!(
            "{} {}",
            request.client_info.name, request.client_info.version
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(version: &str, capabilities: serde_json::Value) -> InitializeRequestParams {
        serde_json::from_value(
            json!({"protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "old-agent", "version": "0.9"}}),
        )
        .unwrap()
    }

    #[test]
    fn only_an_old_protocol_with_no_capabilities_counts() {
        assert_eq!(
            old_plain_client(&request("2024-11-05", json!({}))).as_deref(),
            Some("old-agent 0.9")
        );
        assert_eq!(
            old_plain_client(&request("2024-11-05", json!({"roots": {}}))),
            None
        );
        assert_eq!(old_plain_client(&request("2025-03-26", json!({}))), None);
        assert_eq!(old_plain_client(&request("2025-11-25", json!({}))), None);
    }
}
