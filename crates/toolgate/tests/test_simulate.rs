//! `tokens --simulate`: a tiny case checked by hand, and the livemcpbench totals.

mod support;

use serde_json::{json, Value};
use std::sync::Arc;
use toolgate::simulate::{selection_id, simulate, simulate_task, SimOptions};
use toolgate::surface::{code_tools, meta_tools, CODE_INSTRUCTIONS, INSTRUCTIONS};
use toolgate::surface::{respond, RouteContext};
use toolgate_core::catalog::{
    load_catalog_file, load_queries_file, Catalog, CatalogEntry, LabelledQuery,
};
use toolgate_fixture::instance::minimal_instance;
use toolgate_route::shape::Encoding;
use toolgate_route::RouteIndex;

fn count(s: &str) -> usize {
    Encoding::O200k.count(s)
}

fn tiny() -> Catalog {
    let entry = |v: Value| CatalogEntry {
        server: "wx".into(),
        tool: v.as_object().unwrap().clone(),
    };
    Catalog::from_entries(vec![
        entry(
            json!({"name": "forecast", "description": "Weather forecast for a city.",
            "title": "Forecast", "inputSchema": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}}),
        ),
        entry(
            json!({"name": "alerts", "description": "Storm alerts for a region.",
            "inputSchema": {"type": "object",
            "properties": {"region": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["region", "days"]}}),
        ),
    ])
}

/// Two tools, one task needing both: every request of both loops written out by hand.
#[test]
fn tiny_case_by_hand() {
    let catalog = Arc::new(tiny());
    let task = LabelledQuery {
        id: Some(json!("t1")),
        query: "storm alerts and forecast for Oslo".into(),
        expected: vec!["wx/alerts".into(), "wx/forecast".into()],
        ambiguous: false,
        exact: false,
        split: None,
    };
    let (row, loops) = simulate_task(
        catalog.clone(),
        &task,
        &SimOptions::default(),
        &minimal_instance,
    );

    // Direct: the two definitions in every request (OpenAI form, compact JSON).
    let defs = count(
        r#"{"type":"function","function":{"name":"wx_alerts","description":"Storm alerts for a region.","parameters":{"type":"object","properties":{"region":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["region","days"]}}}"#,
    ) + count(
        r#"{"type":"function","function":{"name":"wx_forecast","description":"Weather forecast for a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}"#,
    );
    let user = count(r#"{"role":"user","content":"storm alerts and forecast for Oslo"}"#);
    let call1 = count(
        r#"{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"wx_alerts","arguments":"{\"region\":\"\",\"days\":1}"}}]}"#,
    );
    let call2 = count(
        r#"{"role":"assistant","tool_calls":[{"id":"call_2","type":"function","function":{"name":"wx_forecast","arguments":"{\"city\":\"\"}"}}]}"#,
    );
    let direct_requests = vec![
        defs + user,
        defs + user + call1,
        defs + user + call1 + call2,
    ];
    assert_eq!(loops.direct_requests, direct_requests);
    assert_eq!(row.direct, direct_requests.iter().sum::<usize>());

    // Guided: the meta-tools (OpenAI form) and the instructions as a system message.
    let surface: usize = meta_tools("")
        .iter()
        .map(|t| {
            let f = json!({"type": "function", "function": {"name": t["name"],
                "description": t["description"], "parameters": t["inputSchema"]}});
            count(&f.to_string())
        })
        .sum::<usize>()
        + count(&json!({"role": "system", "content": INSTRUCTIONS}).to_string());
    // Route's real answers, from the same route code on the same index.
    let index = RouteIndex::build(&catalog);
    let cx = RouteContext {
        catalog: &catalog,
        retriever: &index,
        view: None,
        threshold: toolgate_route::DEFAULT_THRESHOLD,
        meta_prefix: "",
        servers: catalog.servers(),
        shows: None,
        summaries: None,
        learned: None,
        steps: false,
    };
    let mut step = 0;
    let mut route = |task: &str| {
        let args = json!({"task": task});
        let (r, selected) = respond(&cx, args.as_object().unwrap(), &mut |_| {
            step += 1;
            selection_id(0, step)
        });
        let mut m = serde_json::Map::new();
        m.insert("content".into(), Value::Array(r.content.clone()));
        m.insert("structuredContent".into(), r.structured.clone().unwrap());
        (
            Value::Object(m).to_string(),
            selected.map(|t| t.id.to_string()),
        )
    };
    let call = |id: &str, name: &str, args: Value| {
        count(
            &json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]})
            .to_string(),
        )
    };
    let answer = |id: &str, content: &str| {
        count(&json!({"role": "tool", "tool_call_id": id, "content": content}).to_string())
    };
    let q = "storm alerts and forecast for Oslo";
    // The task selects alerts (its words are in alerts' description and name); for the
    // second tool it selects alerts again, so the exact name follows.
    let (a1, s1) = route(q);
    assert_eq!(s1.as_deref(), Some("wx/alerts"), "{a1}");
    let (a2, s2) = route(q);
    assert_eq!(s2.as_deref(), Some("wx/alerts"), "{a2}");
    let (a3, s3) = route("wx/forecast");
    assert_eq!(s3.as_deref(), Some("wx/forecast"));
    let mut history = vec![user];
    let mut requests = Vec::new();
    let mut turn = |requests: &mut Vec<usize>, msgs: Vec<usize>| {
        requests.push(surface + history.iter().sum::<usize>());
        history.extend(msgs);
    };
    turn(
        &mut requests,
        vec![
            call("call_1", "route", json!({"task": q})),
            answer("call_1", &a1),
        ],
    );
    turn(
        &mut requests,
        vec![call(
            "call_2",
            "execute",
            json!({"selectionId": selection_id(0, 1), "arguments": {"region": "", "days": 1}}),
        )],
    );
    turn(
        &mut requests,
        vec![
            call("call_3", "route", json!({"task": q})),
            answer("call_3", &a2),
        ],
    );
    turn(
        &mut requests,
        vec![
            call("call_4", "route", json!({"task": "wx/forecast"})),
            answer("call_4", &a3),
        ],
    );
    turn(
        &mut requests,
        vec![call(
            "call_5",
            "execute",
            json!({"selectionId": selection_id(0, 3), "arguments": {"city": ""}}),
        )],
    );
    turn(&mut requests, vec![]);
    assert_eq!(loops.guided_requests, requests);
    assert_eq!(row.guided, requests.iter().sum::<usize>());
    assert_eq!(row.routes, 3);
    assert_eq!((row.direct_requests, row.guided_requests), (3, 6));
    // Two small tools cost less than the guided surface: the case `auto` mode serves directly.
    assert!(row.guided > row.direct, "{row:?}");

    // Code mode: every meta-tool (with execute_code and describe_tools) and the instructions
    // with the code-mode sentence; one describe_tools (its real answer), one execute_code
    // whose program makes both calls, the final answer.
    let definitions = |tools: Vec<Value>| -> usize {
        tools
            .iter()
            .map(|t| {
                let f = json!({"type": "function", "function": {"name": t["name"],
                    "description": t["description"], "parameters": t["inputSchema"]}});
                count(&f.to_string())
            })
            .sum()
    };
    let code_surface = definitions(meta_tools(""))
        + definitions(code_tools(""))
        + count(
            &json!({"role": "system", "content": format!("{INSTRUCTIONS}{CODE_INSTRUCTIONS}")})
                .to_string(),
        );
    let (entries, _) = toolgate::surface::tools_for(&catalog);
    let described = toolgate::surface::describe(
        &catalog,
        &entries,
        &["wx/alerts", "wx/forecast"],
        "typescript",
    );
    let ts = described.structured.clone().unwrap()["typescript"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ts.contains("function alerts(args: {"), "{ts}");
    let mut m = serde_json::Map::new();
    m.insert("content".into(), Value::Array(described.content.clone()));
    m.insert(
        "structuredContent".into(),
        described.structured.clone().unwrap(),
    );
    let describe_answer = Value::Object(m).to_string();
    let program = "const r1 = await tools.wx.alerts({\"region\":\"\",\"days\":1});\n\
                   const r2 = await tools.wx.forecast({\"city\":\"\"});\n\
                   return [r1, r2];";
    let d = call(
        "call_1",
        "describe_tools",
        json!({"tools": ["wx/alerts", "wx/forecast"]}),
    ) + answer("call_1", &describe_answer);
    let e = call("call_2", "execute_code", json!({ "code": program }));
    let code_requests = vec![
        code_surface + user,
        code_surface + user + d,
        code_surface + user + d + e,
    ];
    assert_eq!(loops.code_requests, code_requests);
    assert_eq!(row.code, code_requests.iter().sum::<usize>());
    assert_eq!(row.code_requests, 3);
    assert_eq!(
        loops.code[3]["tool_calls"][0]["function"]["arguments"],
        json!({"code": program}).to_string()
    );
}

/// On livemcpbench: the totals are the sums of the rows, guided is at most 10% of direct,
/// and guided costs less than direct on every task.
#[test]
fn livemcpbench_totals() {
    let Some(dir) = support::dataset_or_skip("livemcpbench") else {
        return;
    };
    let catalog = Arc::new(Catalog::from_entries(
        load_catalog_file(&dir.join("catalog.json")).unwrap(),
    ));
    let tasks = load_queries_file(&dir.join("queries.jsonl")).unwrap();
    let r = simulate(catalog, &tasks, &SimOptions::default(), &minimal_instance);
    assert_eq!(r.tasks.len(), tasks.len());
    assert_eq!(
        r.totals.direct,
        r.tasks.iter().map(|t| t.direct).sum::<usize>()
    );
    assert_eq!(
        r.totals.guided,
        r.tasks.iter().map(|t| t.guided).sum::<usize>()
    );
    assert_eq!(r.totals.code, r.tasks.iter().map(|t| t.code).sum::<usize>());
    assert!(r.totals.ratio <= 0.10, "{:?}", r.totals);
    assert_eq!(r.stats.guided_not_cheaper, 0);
    // Code mode needs three requests whatever the tool count, and no route answers.
    assert!(r.tasks.iter().all(|t| t.code_requests == 3));
    assert!(r.totals.code < r.totals.guided, "{:?}", r.totals);
    assert_eq!(r.stats.code_not_cheaper, 0);
    assert!(r
        .tasks
        .iter()
        .all(|t| t.missing.is_empty() && t.unrouted.is_empty()));
}
