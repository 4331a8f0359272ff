//! Property tests over what the outside world hands toolgate: configuration text, an
//! `mcpServers` file, tool schemas (validation, the slim and local rewriters), results to
//! page, and values the PII tokenizer sees. Every case is bounded (`PROPTEST_CASES`
//! overrides the count) and runs inside `cargo test`; a failure prints its minimal input.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::path::Path;
use toolgate::Config;
use toolgate_core::catalog::{ToolId, ToolRecord};

fn cases(n: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n);
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Any JSON value, nested a few levels, with keys that schemas and configs use.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("type".to_string()),
        Just("properties".to_string()),
        Just("required".to_string()),
        Just("items".to_string()),
        Just("$ref".to_string()),
        Just("enum".to_string()),
        Just("anyOf".to_string()),
        Just("oneOf".to_string()),
        Just("allOf".to_string()),
        Just("$defs".to_string()),
        Just("description".to_string()),
        Just("default".to_string()),
        "[a-z_]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop_oneof![
            Just("object".to_string()),
            Just("string".to_string()),
            Just("#/$defs/a".to_string()),
            Just("#".to_string()),
            ".{0,24}",
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn tool(schema: Value) -> ToolRecord {
    let mut t = Map::new();
    t.insert("name".into(), json!("t"));
    t.insert("inputSchema".into(), schema);
    ToolRecord {
        id: ToolId::new("s", "t"),
        exposed: "s_t".into(),
        tool: t,
    }
}

/// TOML-like lines: known tables and keys with values of every type, and noise.
fn config_text() -> impl Strategy<Value = String> {
    let table = prop_oneof![
        Just("[gateway]"),
        Just("[gateway.limits]"),
        Just("[guided]"),
        Just("[direct]"),
        Just("[code]"),
        Just("[upstreams.a]"),
        Just("[policy]"),
        Just("[policy.audit]"),
    ];
    let key = prop_oneof![
        Just("listen".to_string()),
        Just("mode".to_string()),
        Just("max_connections".to_string()),
        Just("header_timeout_secs".to_string()),
        Just("max_sessions".to_string()),
        Just("command".to_string()),
        Just("url".to_string()),
        Just("args".to_string()),
        Just("max_message_bytes".to_string()),
        Just("budget_tokens".to_string()),
        Just("enabled".to_string()),
        Just("profile".to_string()),
        "[a-z_]{1,10}",
    ];
    let value = prop_oneof![
        Just("\"x\"".to_string()),
        Just("\"127.0.0.1:0\"".to_string()),
        Just("\"http://127.0.0.1:1/mcp\"".to_string()),
        Just("\"${NO_SUCH_VAR_TG}\"".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        Just("[\"a\", 1]".to_string()),
        Just("{ a = 1 }".to_string()),
        ".{0,12}",
    ];
    let line = prop_oneof![
        table.prop_map(str::to_string),
        (key, value).prop_map(|(k, v)| format!("{k} = {v}")),
        ".{0,30}",
    ];
    prop::collection::vec(line, 0..12).prop_map(|l| l.join("\n"))
}

proptest! {
    #![proptest_config(cases(256))]

    /// The configuration parser never panics; an error names the file.
    #[test]
    fn config_text_is_parsed_or_refused_naming_the_file(text in config_text()) {
        if let Err(e) = Config::from_toml_str(&text, Path::new("prop.toml")) {
            let msg = format!("{e:#}");
            prop_assert!(msg.contains("prop.toml"), "{msg}");
        }
    }

    /// Every `[gateway.limits]` value in range is accepted and read back as written.
    #[test]
    fn limits_in_range_are_read_back(conns in 1u64..100_000, header in 1u32..3600, per in 1u64..1000) {
        let text = format!(
            "[gateway.limits]\nmax_connections = {conns}\nheader_timeout_secs = {header}\nmax_sessions = 1000\nmax_sessions_per_principal = {per}\n"
        );
        let c = Config::from_toml_str(&text, Path::new("prop.toml")).unwrap();
        prop_assert_eq!(c.gateway.limits.max_connections as u64, conns);
        prop_assert_eq!(c.gateway.limits.header_timeout.as_secs(), header as u64);
        prop_assert_eq!(c.gateway.limits.max_sessions_per_principal as u64, per);
    }

    /// An `mcpServers` file of any shape is imported or refused, never a panic.
    #[test]
    fn mcp_servers_json_is_imported_or_refused(servers in prop::collection::vec(("[a-z]{1,6}", json_value()), 0..4), wrap in any::<bool>()) {
        let servers: Map<String, Value> = servers.into_iter().collect();
        let doc = if wrap { json!({"mcpServers": servers}) } else { json!({"servers": servers}) };
        match toolgate::mcp_json::parse(&doc.to_string(), Path::new("prop.json")) {
            // A refusal names the file, so the user knows which one to fix.
            Err(e) => {
                let msg = format!("{e:#}");
                prop_assert!(msg.contains("prop.json"), "{msg}");
            }
            // What is imported comes from the file's servers, nothing else.
            Ok(config) => {
                for name in config.upstreams.keys() {
                    prop_assert!(servers.contains_key(name), "{name} is not among {:?}", servers.keys());
                }
            }
        }
    }

    /// Validation of any arguments against any schema answers (valid, a report, or
    /// skipped), and a second validation with the cached validator agrees with the first.
    #[test]
    fn validation_answers_and_agrees_with_itself(schema in json_value(), args in json_value()) {
        let v = toolgate_core::exec::Validators::new();
        let t = tool(schema);
        let first = format!("{:?}", v.validate(&t, &args));
        let second = format!("{:?}", v.validate(&t, &args));
        prop_assert_eq!(first, second);
    }

    /// The slim and local rewriters take any schema. Slimming keeps the top-level type (it
    /// restricts) and is done in one pass (slimming a slimmed schema changes nothing); the
    /// local one is idempotent in shape (rewritten again, it keeps its top-level type).
    #[test]
    fn schema_rewriters_take_any_schema(schema in json_value()) {
        let slim = toolgate_route::shape::slim_schema(&schema, &Default::default(), &Default::default());
        prop_assert_eq!(slim.get("type"), schema.get("type"));
        let slimmer = toolgate_route::shape::slim_schema(&slim, &Default::default(), &Default::default());
        prop_assert_eq!(&slimmer, &slim);
        let local = toolgate_route::shape::rewrite_schema(&schema, &Default::default());
        let again = toolgate_route::shape::rewrite_schema(&local, &Default::default());
        prop_assert_eq!(local.get("type"), again.get("type"));
    }

    /// Pages hold the whole text in order, each within its budget unless one character
    /// alone is over it.
    #[test]
    fn pages_hold_the_whole_text_within_budget(text in "(.{0,40}\n?){0,40}", budget in 1usize..50) {
        let count = |s: &str| s.chars().count();
        let pages = toolgate_core::exec::split_pages(&text, budget, &count);
        prop_assert_eq!(pages.concat(), text.clone());
        for p in &pages {
            prop_assert!(count(p) <= budget || p.chars().count() == 1, "{} > {budget}: {p:?}", count(p));
        }
    }

    /// Whatever the tokenizer replaces, restoring gives back the value exactly, and no
    /// email address is left in the tokenized text.
    #[test]
    fn pii_tokens_restore_exactly(user in "[a-z]{1,8}", domain in "[a-z]{2,8}", noise in ".{0,40}") {
        let vault = toolgate::pii::Vault::default();
        let owner = toolgate_core::principal::Principal::key("k");
        let email = format!("{user}@{domain}.com");
        let original = json!({"note": format!("{noise} write to {email} today"), "n": [email.clone(), 1]});
        let mut v = original.clone();
        vault.tokenize(&owner, &mut v, &[]);
        prop_assert!(!v.to_string().contains(&email), "{v}");
        vault.restore(&owner, &mut v).unwrap();
        prop_assert_eq!(v, original);
    }
}
