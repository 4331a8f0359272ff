//! Route's meta-tool answers from one catalog snapshot (`guided::route::respond`): a question
//! whose candidates run at once, browsing by names and by server, and summaries that keep
//! their meaning or are the operator's own.

use serde_json::{json, Value};
use toolgate::surface::{respond, RouteContext};
use toolgate_core::catalog::parse_catalog;
use toolgate_core::catalog::Catalog;
use toolgate_route::shape::{SlimOptions, ToolOverride};
use toolgate_route::RouteIndex;

const TOOLS: &str = r#"[
  {"server": "tickets", "tool": {"name": "search_issues", "description": "Search issues with a query language (e.g. 'project = WEB AND status = open'). Returns keys.",
    "inputSchema": {"type": "object", "properties": {"jql": {"type": "string"}}, "required": ["jql"]}}},
  {"server": "tickets", "tool": {"name": "get_issue", "description": "Fetch one issue by key, e.g. WEB-12. Fields follow."}},
  {"server": "tickets", "tool": {"name": "delete_issue", "description": "Permanently delete an issue."}},
  {"server": "a", "tool": {"name": "search_files", "description": "Search files by name",
    "inputSchema": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}},
  {"server": "b", "tool": {"name": "search_files", "description": "Search files by name",
    "inputSchema": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}
]"#;

fn ask(cx: &RouteContext, args: Value) -> (Value, Vec<String>) {
    let mut made = Vec::new();
    let (r, _) = respond(cx, args.as_object().unwrap(), &mut |id| {
        made.push(id.to_string());
        format!("sel-{}", made.len())
    });
    assert!(!r.is_error, "{:?}", r.content);
    (r.structured.unwrap(), made)
}

#[test]
fn answers_run_at_once_list_what_is_shown_and_keep_summaries_whole() {
    let catalog = Catalog::from_entries(parse_catalog(TOOLS).unwrap());
    let index = RouteIndex::build(&catalog);
    let hide_delete = |t: &toolgate_core::catalog::ToolRecord| t.id.name != "delete_issue";
    let mut slim = SlimOptions::default();
    slim.tools.insert(
        "tickets/get_issue".into(),
        ToolOverride {
            name: None,
            description: Some("Read one ticket by its key.".into()),
        },
    );
    let cx = RouteContext {
        catalog: &catalog,
        retriever: &index,
        view: None,
        threshold: toolgate_route::DEFAULT_THRESHOLD,
        meta_prefix: "",
        servers: catalog.servers(),
        shows: Some(&hide_delete),
        summaries: Some(&slim),
        learned: None,
        steps: false,
    };

    // The same tool on two servers: a question naming them, each candidate runnable.
    let (s, made) = ask(&cx, json!({"task": "search files by name"}));
    assert_eq!(s["decision"], "clarify", "{s}");
    assert!(s["question"].as_str().unwrap().contains("a, b"), "{s}");
    let c = &s["candidates"][0];
    assert_eq!(c["signature"], "search_files(pattern: string)");
    assert_eq!(c["nextCall"]["tool"], "execute");
    assert_eq!(c["nextCall"]["arguments"]["selectionId"], c["selectionId"]);
    assert_eq!(
        c["nextCall"]["arguments"]["arguments"],
        json!({"pattern": "<string>"})
    );
    // One selection remembered per candidate, for the tool it names.
    assert_eq!(made.len(), s["candidates"].as_array().unwrap().len());
    assert_eq!(
        made[0],
        format!(
            "{}/{}",
            c["server"].as_str().unwrap(),
            c["name"].as_str().unwrap()
        )
    );

    // A server's tools a page at a time, without the hidden one; the override is the summary.
    let (p1, _) = ask(&cx, json!({"server": "tickets", "limit": 1}));
    assert_eq!(
        (p1["decision"].as_str(), p1["total"].as_u64()),
        (Some("list"), Some(2))
    );
    assert_eq!(p1["tools"][0]["name"], "get_issue");
    assert_eq!(p1["tools"][0]["summary"], "Read one ticket by its key.");
    let next = p1["nextCall"]["arguments"].clone();
    assert_eq!(p1["nextCall"]["tool"], "route");
    let (p2, _) = ask(&cx, next);
    assert_eq!(p2["tools"][0]["name"], "search_issues");
    assert_eq!(
        p2["tools"][0]["summary"],
        "Search issues with a query language (e.g. 'project = WEB AND status = open')."
    );
    assert!(p2.get("nextCall").is_none(), "{p2}");

    // Names only, nothing selected, nothing hidden.
    let (n, made) = ask(
        &cx,
        json!({"task": "issue", "detail": "names", "limit": 20}),
    );
    assert_eq!(n["decision"], "list");
    assert!(made.is_empty());
    let names: Vec<&str> = n["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"get_issue") && !names.contains(&"delete_issue"),
        "{names:?}"
    );

    // Bad arguments say what to fix.
    for (args, says) in [
        (json!({"task": "x", "limit": 21}), "1 to 20"),
        (json!({"task": "x", "cursor": "3"}), "no task"),
        (json!({"server": "tickets", "cursor": "p"}), "nextCursor"),
        (json!({}), "is required"),
    ] {
        let (r, _) = respond(&cx, args.as_object().unwrap(), &mut |_| "s".into());
        assert!(r.is_error, "{args}");
        let text = serde_json::to_string(&r.content).unwrap();
        assert!(text.contains(says), "{args}: {text}");
    }
}
