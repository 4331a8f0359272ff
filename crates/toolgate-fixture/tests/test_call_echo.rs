//! `tools/call` echoes the call deterministically; `structuredContent` validates against
//! the tool's `outputSchema`; an unknown tool is an invalid-params error naming it.
mod common;

use common::{connect, demo, refs, temp_file, text_of, Transport, SMALL_CATALOG, TRANSPORTS};
use rmcp::ServiceError;
use serde_json::{json, Value};

#[tokio::test]
async fn echoes_server_tool_and_arguments() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("mail"))).await?;
        let arguments = json!({"query": "from:alice", "limit": 5, "nested": {"a": [1, 2]}});
        let result = session.call("read_message", arguments.clone()).await?;
        let expected = json!({"server": "mail", "tool": "read_message", "arguments": arguments});
        assert_eq!(serde_json::from_str::<Value>(&text_of(&result))?, expected);
        assert_eq!(result.structured_content, Some(expected));
        assert_ne!(result.is_error, Some(true));
        // Deterministic: the same call, the same answer.
        let again = session.call("read_message", arguments).await?;
        assert_eq!(again.content, result.content);
        session.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn structured_content_validates_against_every_demo_output_schema() -> anyhow::Result<()> {
    let catalog: Vec<Value> = serde_json::from_str(toolgate_fixture::DEMO_CATALOG)?;
    let servers: std::collections::BTreeSet<&str> = catalog
        .iter()
        .filter_map(|entry| entry["server"].as_str())
        .collect();
    let mut checked = 0;
    for server in servers {
        let session = connect(Transport::Stdio, &refs(&demo(server))).await?;
        for entry in catalog.iter().filter(|entry| entry["server"] == server) {
            let Some(schema) = entry["tool"].get("outputSchema") else {
                continue;
            };
            let name = entry["tool"]["name"].as_str().unwrap();
            let result = session.call(name, json!({})).await?;
            let structured = result.structured_content.expect("structured content");
            let validator = jsonschema::validator_for(schema)?;
            assert!(
                validator.is_valid(&structured),
                "{server}/{name}: {structured}"
            );
            checked += 1;
        }
        session.close().await;
    }
    assert!(checked >= 10, "only {checked} output schemas checked");
    Ok(())
}

#[tokio::test]
async fn output_schema_instance_respects_bounds() -> anyhow::Result<()> {
    let catalog = temp_file("catalog.json", SMALL_CATALOG);
    let session = connect(
        Transport::Http,
        &["--catalog", catalog.to_str().unwrap(), "--server", "alpha"],
    )
    .await?;
    let result = session.call("typed", json!({"x": 1})).await?;
    assert_eq!(
        result.structured_content,
        Some(json!({"n": 3, "tags": ["", ""]}))
    );
    let text: Value = serde_json::from_str(&text_of(&result))?;
    assert_eq!(text["arguments"], json!({"x": 1}));
    session.close().await;
    Ok(())
}

#[tokio::test]
async fn unknown_tool_is_invalid_params_naming_it() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("mail"))).await?;
        match session.call("no_such_tool", json!({})).await {
            Err(ServiceError::McpError(error)) => {
                assert_eq!(error.code.0, -32602);
                assert!(error.message.contains("no_such_tool"), "{}", error.message);
            }
            other => panic!("expected invalid params, got {other:?}"),
        }
        session.close().await;
    }
    Ok(())
}
