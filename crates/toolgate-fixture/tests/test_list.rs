//! `tools/list` answers the selected server's tools, in catalog order, over both transports.
mod common;

use common::{connect, demo, refs, temp_file, SMALL_CATALOG, TRANSPORTS};
use serde_json::Value;

fn demo_names(server: &str) -> Vec<String> {
    let catalog: Vec<Value> = serde_json::from_str(toolgate_fixture::DEMO_CATALOG).unwrap();
    catalog
        .iter()
        .filter(|entry| entry["server"] == server)
        .map(|entry| entry["tool"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn lists_one_demo_server_in_catalog_order() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let session = connect(transport, &refs(&demo("tickets"))).await?;
        let info = session.client.peer_info().expect("initialized");
        assert_eq!(
            info.server_info.as_ref().map(|i| i.name.as_str()),
            Some("tickets")
        );
        assert!(
            info.capabilities
                .tools
                .as_ref()
                .and_then(|t| t.list_changed)
                == Some(true)
        );
        let tools = session.client.list_all_tools().await?;
        let names: Vec<String> = tools.iter().map(|tool| tool.name.to_string()).collect();
        assert_eq!(names, demo_names("tickets"), "{transport:?}");
        session.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn serves_every_server_of_a_catalog_without_server() -> anyhow::Result<()> {
    let catalog = temp_file("catalog.json", SMALL_CATALOG);
    for transport in TRANSPORTS {
        let session = connect(transport, &["--catalog", catalog.to_str().unwrap()]).await?;
        let tools = session.client.list_all_tools().await?;
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(
            names,
            ["echo_me", "typed", "third", "other"],
            "{transport:?}"
        );
        session.close().await;
    }
    Ok(())
}
