//! Profiles and keys over resources and prompts, with two `fixture --conformance` upstreams
//! (`a`, `b`) over HTTP. A profile lists the resources, templates and prompts of the
//! servers it covers whole; a key reads, subscribes, gets and completes only on the servers
//! its scopes cover whole; neither substitutes for the other, and every access is audited.

mod common;
mod policy_support;
use common::*;
use policy_support::*;
use serde_json::{json, Value};

const ALL: &str = "tg_all_servers_key_for_tests";
const A_ONLY: &str = "tg_a_only_key_for_tests";
const A_TOOL: &str = "tg_one_tool_of_a_key_for_tests";

/// The URI under which `b` shows the resource both servers list (`a` keeps it unchanged).
const B_SHARED: &str = "toolgate://b/test%3A%2F%2Fstatic-text";

fn config(dir: &TestDir) -> std::path::PathBuf {
    let policy = format!(
        r#"[policy]
contact = "the platform team"
[policy.audit]
path = {audit:?}
[policy.profiles.a_view]
tools = ["a/*"]
[policy.keys.all]
hash = "{all}"
scopes = ["*"]
[policy.keys.a_only]
hash = "{a_only}"
scopes = ["a/*", "!a/test_error_handling"]
[policy.keys.a_tool]
hash = "{a_tool}"
scopes = ["a/test_simple_text"]
"#,
        audit = dir.path("audit.jsonl").display().to_string(),
        all = hash(ALL),
        a_only = hash(A_ONLY),
        a_tool = hash(A_TOOL),
    );
    dir.config(
        "mode = \"direct\"",
        &[
            policy,
            dir.conformance_upstream("a"),
            dir.conformance_upstream("b"),
        ],
    )
}

async fn req(client: &KeyedClient<TestClient>, method: &str, params: Value) -> Value {
    request(client, method, params).await
}

/// The `key` field of every list item.
fn field<'v>(v: &'v Value, list: &str, key: &str) -> Vec<&'v str> {
    v[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {v}"))
        .iter()
        .filter_map(|r| r[key].as_str())
        .collect()
}

fn refused(v: &Value, scope: &str) -> bool {
    v["error"].as_str().is_some_and(|e| {
        e.contains(&format!("the missing permission is scope \"{scope}\""))
            && e.contains("the platform team")
    })
}

#[tokio::test]
async fn profiles_list_and_keys_read_resources_and_prompts_of_whole_servers() {
    let dir = TestDir::new();
    let gw = HttpGateway::start(&config(&dir), &[]);
    let url = gw.url.clone();
    let profiled = format!("{}/mcp/p/a_view", gw.base());

    // A key for every server, no profile: both servers' items are listed.
    let all = connect_as(&url, ALL).await;
    let uris = req(&all, "resources/list", json!({})).await;
    assert_eq!(field(&uris, "resources", "uri").len(), 6, "{uris}");
    assert!(field(&uris, "resources", "uri").contains(&B_SHARED));
    let prompts = req(&all, "prompts/list", json!({})).await;
    assert!(field(&prompts, "prompts", "name").contains(&"b_test_simple_prompt"));

    // The same key through a profile covering only `a`: only a's items are listed, under
    // the same URIs and names as without the profile...
    let viewer = connect_as(&profiled, ALL).await;
    let uris = req(&viewer, "resources/list", json!({})).await;
    let shown = field(&uris, "resources", "uri");
    assert_eq!(shown.len(), 3, "{uris}");
    assert!(shown.contains(&"test://static-text") && !shown.contains(&B_SHARED));
    let prompts = req(&viewer, "prompts/list", json!({})).await;
    let names = field(&prompts, "prompts", "name");
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("a_")),
        "{names:?}"
    );
    let tpl = req(&viewer, "resources/templates/list", json!({})).await;
    assert_eq!(field(&tpl, "resourceTemplates", "uriTemplate").len(), 1);
    // ...and a profile is a menu, not a lock: what it hides stays readable by the key.
    let read = req(&viewer, "resources/read", json!({"uri": B_SHARED})).await;
    assert!(read["contents"][0]["text"].is_string(), "{read}");

    // A key scoped to server `a` (less one tool): a's resources and prompts, not b's.
    let a_only = connect_as(&url, A_ONLY).await;
    let read = req(
        &a_only,
        "resources/read",
        json!({"uri": "test://static-text"}),
    )
    .await;
    assert!(read["contents"][0]["text"].is_string(), "{read}");
    let read = req(&a_only, "resources/read", json!({"uri": B_SHARED})).await;
    assert!(refused(&read, "b/*"), "{read}");
    let sub = req(&a_only, "resources/subscribe", json!({"uri": B_SHARED})).await;
    assert!(refused(&sub, "b/*"), "{sub}");
    let got = req(
        &a_only,
        "prompts/get",
        json!({"name": "b_test_simple_prompt"}),
    )
    .await;
    assert!(refused(&got, "b/*"), "{got}");
    let got = req(
        &a_only,
        "prompts/get",
        json!({"name": "a_test_simple_prompt"}),
    )
    .await;
    assert!(got["messages"].is_array(), "{got}");
    let done = req(
        &a_only,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "b_test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "par"}}),
    )
    .await;
    assert!(refused(&done, "b/*"), "{done}");
    // A template instance both servers could serve goes to the one the key may use.
    let inst = req(
        &a_only,
        "resources/read",
        json!({"uri": "test://template/7/data"}),
    )
    .await;
    assert!(inst["contents"][0]["text"].is_string(), "{inst}");

    // A key for one tool of `a` does not reach a's resources: they belong to the server.
    let a_tool = connect_as(&url, A_TOOL).await;
    let read = req(
        &a_tool,
        "resources/read",
        json!({"uri": "test://static-text"}),
    )
    .await;
    assert!(refused(&read, "a/*"), "{read}");

    // Every access is audited, allowed or refused, under the key's name.
    let access: Vec<Value> = audit(&dir)
        .into_iter()
        .filter(|r| r["type"] == "access")
        .collect();
    let has = |key: &str, method: &str, server: &str, decision: &str| {
        access.iter().any(|r| {
            r["key"] == key
                && r["method"] == method
                && r["server"] == server
                && r["decision"] == decision
        })
    };
    assert!(has("all", "resources/read", "b", "allowed"), "{access:?}");
    assert!(has("a_only", "resources/read", "a", "allowed"));
    assert!(has("a_only", "resources/read", "b", "refused"));
    assert!(has("a_only", "resources/subscribe", "b", "refused"));
    assert!(has("a_only", "prompts/get", "b", "refused"));
    assert!(has("a_only", "completion/complete", "b", "refused"));
    assert!(has("a_tool", "resources/read", "a", "refused"));
    assert!(
        !has("a_only", "resources/read", "b", "allowed"),
        "the template instance was read from a alone"
    );
    for c in [all, viewer, a_only, a_tool] {
        let _ = c.cancel().await;
    }
}
