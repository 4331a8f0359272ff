//! The embedded demo catalog is well-formed and big enough to be a useful demo.
use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use toolgate_fixture::{Catalog, DEMO_CATALOG};

#[test]
fn demo_catalog_is_valid() {
    let entries: Vec<Value> = serde_json::from_str(DEMO_CATALOG).expect("JSON array");
    let name_ok = |name: &str| {
        (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let mut servers: BTreeMap<&str, usize> = BTreeMap::new();
    let mut pairs = HashSet::new();
    for entry in &entries {
        let server = entry["server"].as_str().expect("server name");
        let tool = &entry["tool"];
        let name = tool["name"].as_str().expect("tool name");
        assert!(name_ok(name), "bad name {name:?}");
        assert!(pairs.insert((server, name)), "duplicate {server}/{name}");
        let description = tool["description"].as_str().unwrap_or("");
        assert!(description.len() >= 30, "{name}: description too short");
        assert_eq!(
            tool["inputSchema"]["type"], "object",
            "{name}: input schema"
        );
        if let Some(output) = tool.get("outputSchema") {
            assert_eq!(output["type"], "object", "{name}: output schema");
        }
        for schema in [Some(&tool["inputSchema"]), tool.get("outputSchema")]
            .into_iter()
            .flatten()
        {
            jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        *servers.entry(server).or_default() += 1;
    }
    assert!(entries.len() >= 55, "{} tools", entries.len());
    assert!(servers.len() >= 6, "{servers:?}");
    let names: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["tool"]["name"].as_str())
        .collect();
    let shared = names
        .iter()
        .filter(|n| names.iter().filter(|m| m == n).count() > 1)
        .count();
    assert!(shared >= 2, "at least one name shared by two servers");
    let unannotated = entries
        .iter()
        .filter(|e| e["tool"].get("annotations").is_none())
        .count();
    assert!(
        (1..=5).contains(&unannotated),
        "a couple deliberately unannotated"
    );
    // Every server can be served on its own.
    let catalog = Catalog::parse(DEMO_CATALOG).expect("rmcp parses every tool");
    for server in servers.keys() {
        catalog.select(Some(server)).expect("servable");
    }
}
