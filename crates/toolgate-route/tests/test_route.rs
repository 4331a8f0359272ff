//! Route behaviour on small real catalogs written here: exact names in every spelling,
//! clarification on an ambiguous catalog, per-server re-indexing, and eval metrics
//! computed from real catalog and query files.

mod support;

use std::sync::Arc;
use toolgate_core::catalog::parse_catalog;
use toolgate_core::catalog::{load_catalog_file, load_queries_file, Catalog};
use toolgate_route::eval::{evaluate, summarize, sweep_row};
use toolgate_route::{route, RouteDecision, RouteIndex, RouteOptions};

fn catalog(json: &str) -> Catalog {
    Catalog::from_entries(parse_catalog(json).unwrap())
}

const TOOLS: &str = r#"[
  {"server": "github", "tool": {"name": "create_issue", "description": "Create a new issue in a GitHub repository",
    "inputSchema": {"type": "object", "properties": {"owner": {"type": "string", "description": "Repository owner"},
      "labels": {"type": "array", "items": {"type": "string"}, "description": "Labels to apply"}}}}},
  {"server": "github", "tool": {"name": "list_pull_requests", "description": "List pull requests in a repository"}},
  {"server": "kubernetes", "tool": {"name": "kubectl_scale", "description": "Scale a Kubernetes deployment to a number of replicas"}},
  {"server": "git", "tool": {"name": "git_status", "description": "Show the working tree status"}},
  {"server": "time", "tool": {"name": "get_current_time", "title": "Current time", "description": "Get the current time in a timezone"}},
  {"server": "clock", "tool": {"name": "get_current_time", "description": "Returns what time it is now"}},
  {"server": "MCP Server Chart", "tool": {"name": "generate_bar_chart", "description": "Generate a bar chart"}}
]"#;

fn name_of(d: &RouteDecision) -> Option<String> {
    d.selected().map(|t| t.id.to_string())
}

#[test]
fn exact_names_win_in_every_spelling() {
    let c = catalog(TOOLS);
    let index = RouteIndex::build(&c);
    let opts = RouteOptions::default();
    for spelling in [
        "github_create_issue",
        "github/create_issue",
        "create_issue",
        "CREATE_ISSUE",
        "`create_issue`",
        "\"GitHub/Create_Issue\"",
        " 'github_create_issue' ",
    ] {
        let d = route(&index, spelling, &opts);
        assert_eq!(
            name_of(&d).as_deref(),
            Some("github/create_issue"),
            "{spelling}"
        );
        assert_eq!(d.confidence(), 1.0);
    }
    let d = route(&index, "mcp server chart/Generate_Bar_Chart", &opts);
    assert_eq!(
        name_of(&d).as_deref(),
        Some("MCP Server Chart/generate_bar_chart")
    );
    // A bare name two servers share is a question between them, unless a server is given.
    let d = route(&index, "get_current_time", &opts);
    let RouteDecision::Clarify {
        candidates,
        question,
        ..
    } = &d
    else {
        panic!("expected a question, got {d:?}");
    };
    assert_eq!(candidates.len(), 2);
    assert!(
        question.contains("clock_get_current_time") && question.contains("time_get_current_time")
    );
    let only_time = RouteOptions {
        server: Some("time"),
        ..opts
    };
    let d = route(&index, "get_current_time", &only_time);
    assert_eq!(name_of(&d).as_deref(), Some("time/get_current_time"));
}

#[test]
fn prose_finds_the_tool_through_every_field() {
    let c = catalog(TOOLS);
    let index = RouteIndex::build(&c);
    let top = |q: &str| index.rank(q, None, 3)[0].0.id.to_string();
    assert_eq!(
        top("scale the web deployment to 5 replicas"),
        "kubernetes/kubectl_scale"
    );
    assert_eq!(top("open issues with labels"), "github/create_issue");
    assert_eq!(top("pullRequests"), "github/list_pull_requests");
    // The server filter keeps other servers out, and unknown words rank nothing.
    assert!(index.rank("replicas", Some("github"), 5).is_empty());
    assert!(index.rank("zzzz qqqq", None, 5).is_empty());
}

#[test]
fn ambiguous_catalog_asks_with_at_most_limit_candidates() {
    let json = r#"[
      {"server": "a", "tool": {"name": "search_files", "description": "Search files by name"}},
      {"server": "b", "tool": {"name": "search_files", "description": "Search files by name"}},
      {"server": "c", "tool": {"name": "find_files", "description": "Search files by name"}},
      {"server": "d", "tool": {"name": "send_mail", "description": "Send an email message"}}
    ]"#;
    let index = RouteIndex::build(&catalog(json));
    let opts = RouteOptions {
        limit: 2,
        ..RouteOptions::default()
    };
    let d = route(&index, "search files", &opts);
    let RouteDecision::Clarify {
        question,
        candidates,
        ranked,
        ..
    } = &d
    else {
        panic!("expected a question, got {d:?}");
    };
    assert_eq!(candidates.len(), 2);
    assert_eq!(ranked.len(), 3);
    // The same tool on two servers: the question names the servers.
    assert!(
        question.contains("search_files is on 2 servers: a, b"),
        "{question}"
    );
    // A clear task on the same catalog selects.
    let d = route(&index, "send an email", &opts);
    assert_eq!(name_of(&d).as_deref(), Some("d/send_mail"));
}

#[test]
fn reindexing_one_server_changes_only_its_results() {
    let c = catalog(TOOLS);
    let mut index = RouteIndex::build(&c);
    let before_k8s = index.rank("scale deployment replicas", Some("kubernetes"), 5);
    let new = catalog(
        r#"[{"server": "github", "tool": {"name": "merge_pull_request", "description": "Merge a pull request"}}]"#,
    );
    index.replace_server("github", new.tools().to_vec());
    let gh: Vec<String> = index
        .rank("pull request", Some("github"), 5)
        .iter()
        .map(|(t, _)| t.id.name.clone())
        .collect();
    assert_eq!(gh, ["merge_pull_request"]);
    let gone = route(&index, "github/create_issue", &RouteOptions::default());
    assert!(gone
        .ranked()
        .iter()
        .all(|(t, _)| t.id.name != "create_issue"));
    let after_k8s = index.rank("scale deployment replicas", Some("kubernetes"), 5);
    let ids = |r: &[(Arc<toolgate_core::catalog::ToolRecord>, f32)]| {
        r.iter().map(|(t, _)| t.id.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&before_k8s), ids(&after_k8s));
    // Removing the server and adding it back restores the original statistics exactly.
    let mut fresh = RouteIndex::build(&c);
    let github: Vec<_> = c
        .tools()
        .iter()
        .filter(|t| t.id.server == "github")
        .cloned()
        .collect();
    fresh.replace_server("github", Vec::new());
    assert!(fresh.rank("pull request", Some("github"), 5).is_empty());
    fresh.replace_server("github", github);
    let original = RouteIndex::build(&c);
    assert_eq!(fresh.len(), original.len());
    for q in ["create issue", "current time", "status of the working tree"] {
        let (a, b) = (fresh.rank(q, None, 5), original.rank(q, None, 5));
        assert_eq!(ids(&a), ids(&b), "{q}");
        for ((_, x), (_, y)) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-5, "{q}: {x} vs {y}");
        }
    }
}

#[test]
fn eval_metrics_match_a_known_ranking() {
    let dir = std::env::temp_dir().join(format!("toolgate-route-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cat = dir.join("catalog.json");
    let qs = dir.join("queries.jsonl");
    std::fs::write(&cat, TOOLS).unwrap();
    // 1: exact name, selected and right. 2: prose, right at rank 1 with a second expected
    // tool nowhere. 3: expected tool that nothing ranks (all wrong).
    std::fs::write(
        &qs,
        concat!(
            r#"{"query": "git_status", "expected": ["git/git_status"], "exact": true}"#, "\n",
            r#"{"query": "scale the deployment replicas", "expected": ["kubernetes/kubectl_scale", "github/create_issue"]}"#, "\n",
            "\n",
            r#"{"query": "scale replicas", "expected": ["git/git_status"]}"#, "\n",
        ),
    )
    .unwrap();
    let c = Catalog::from_entries(load_catalog_file(&cat).unwrap());
    let queries = load_queries_file(&qs).unwrap();
    assert_eq!(queries.len(), 3);
    let index = RouteIndex::build(&c);
    let opts = RouteOptions::default();
    let outcomes = evaluate(&index, &queries, &opts);
    assert_eq!(outcomes[1].ranked[0].1, "kubectl_scale");
    assert_eq!(
        outcomes[1].ranked.len(),
        1,
        "only one tool matches those words"
    );
    let s = summarize(&outcomes, opts.threshold);
    assert_eq!(s.queries, 3);
    assert!((s.p_at_1 - 2.0 / 3.0).abs() < 1e-6, "{s:?}");
    // Recall: 1, 1/2, 0.
    assert!((s.r_at_5 - 0.5).abs() < 1e-6, "{s:?}");
    // nDCG: 1; 1 / (1 + 1/log2 3); 0.
    let second = 1.0 / (1.0 + 1.0 / 3f32.log2());
    assert!((s.ndcg_at_5 - (1.0 + second) / 3.0).abs() < 1e-6, "{s:?}");
    // Queries 2 and 3 each have one matching tool, so all three select: two right, one wrong.
    assert_eq!(s.clarify_rate, 0.0);
    assert!((s.selection_precision - 2.0 / 3.0).abs() < 1e-6);
    assert!((s.wrong_select_rate - 1.0 / 3.0).abs() < 1e-6);
    // Above every confidence nothing is selected: precision is vacuously 1.
    let none = sweep_row(&outcomes, 1.01);
    assert_eq!(
        (none.coverage, none.precision, none.wrong_select_rate),
        (0.0, 1.0, 0.0)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn example_tasks_rank_their_tool_and_survive_reindexing() {
    use toolgate_core::catalog::LabelledQuery;
    use toolgate_route::{Bm25fParams, RouteExamples};
    let c = catalog(TOOLS);
    let task = "bump the web pods to five";
    // No tool's own text has these words.
    assert!(RouteIndex::build(&c).rank(task, None, 5).is_empty());
    let labelled: Vec<LabelledQuery> = serde_json::from_str(
        r#"[{"query": "bump the api pods to three", "expected": ["kubernetes/kubectl_scale"]}]"#,
    )
    .unwrap();
    let examples = Arc::new(RouteExamples::from_queries(&labelled));
    let mut index = RouteIndex::with_examples(&c, Bm25fParams::default(), examples);
    let top = |i: &RouteIndex| i.rank(task, None, 5).first().map(|(t, _)| t.id.to_string());
    assert_eq!(top(&index).as_deref(), Some("kubernetes/kubectl_scale"));
    // A list_changed of that server re-indexes its tools with their examples.
    let k8s: Vec<_> = c
        .tools()
        .iter()
        .filter(|t| t.id.server == "kubernetes")
        .cloned()
        .collect();
    index.replace_server("kubernetes", Vec::new());
    assert_eq!(top(&index), None);
    index.replace_server("kubernetes", k8s);
    assert_eq!(top(&index).as_deref(), Some("kubernetes/kubectl_scale"));
}

#[test]
fn a_name_no_tool_has_never_selects_another_tool() {
    let index = RouteIndex::build(&catalog(TOOLS));
    let opts = RouteOptions::default();
    // Shaped like a name, close to real ones: offered as candidates, never selected.
    for name in ["github/create_issues", "kubectl_scale_up", "gitStatus"] {
        let d = route(&index, name, &opts);
        let RouteDecision::Clarify { question, .. } = &d else {
            panic!("{name} selected: {d:?}");
        };
        assert!(
            question.starts_with("No tool of that name is visible"),
            "{question}"
        );
    }
    // Prose still ranks and selects.
    let d = route(&index, "scale the web deployment to 5 replicas", &opts);
    assert_eq!(name_of(&d).as_deref(), Some("kubernetes/kubectl_scale"));
}

#[test]
fn chinese_tasks_find_livemcpbench_chinese_tools() {
    let Some(path) = support::dataset_or_skip("livemcpbench/catalog.json") else {
        return;
    };
    let index = RouteIndex::build(&Catalog::from_entries(load_catalog_file(&path).unwrap()));
    let top = |q: &str| index.rank(q, None, 3)[0].0.id.to_string();
    assert_eq!(
        top("根据分类查询菜谱"),
        "HowToCook-MCP Server/mcp_howtocook_getRecipesByCategory"
    );
    assert_eq!(
        top("查询游戏王卡牌的图片"),
        "Baige (ygocdb.com) MCP Server/get_card_image"
    );
    // Mixed scripts rank on both parts.
    assert_eq!(top("用 Bing 搜索关键词"), "Bing_CN_MCP/bing_search");
    let d = route(&index, "根据分类查询菜谱", &RouteOptions::default());
    assert!(d.selected().is_some(), "{d:?}");
}

/// Tasks a new user types at the real servers of realcat: the commit log for "the last
/// commits" (it was fourth, behind a blame tool that says "commit" more often), and
/// remembering is storing in the memory server's knowledge graph. That was behind a
/// form-filling tool whose description tells the model to "ALWAYS prefer" it and whose
/// example checks "Remember Me" (a description's notes now weigh less than what it says
/// the tool does), and behind two emulation tools whose parameters say "prefers-contrast"
/// (remembering now implies adding and creating, as the memory tools' names say).
#[test]
fn real_servers_everyday_tasks_find_their_servers_tools() {
    let Some(path) = support::dataset_or_skip("realcat/catalog.json") else {
        return;
    };
    let index = RouteIndex::build(&Catalog::from_entries(load_catalog_file(&path).unwrap()));
    let ranked = |q: &str| -> Vec<String> {
        (index.rank(q, None, 5).iter())
            .map(|(t, _)| t.id.to_string())
            .collect()
    };
    assert_eq!(ranked("show the last 3 commits")[0], "git/git_log");
    let remember = ranked("remember that Alice prefers tea");
    assert!(
        ["memory/add_observations", "memory/create_entities"].contains(&remember[0].as_str()),
        "{remember:?}"
    );
    assert!(
        !remember.contains(&"chrome-devtools/fill_form".to_string()),
        "{remember:?}"
    );
}

/// One weak shared word with the only tool that matches anything is not a selection: the
/// softmax is 1 when a single tool matches, and the decision must not read that as
/// certainty (MetaTool's "the prices of Ethereum" selected a petrol-price tool at 0.985
/// before the softmax feature was bounded).
#[test]
fn a_lone_weak_match_asks() {
    let c = catalog(
        r#"[
  {"server": "fuel", "tool": {"name": "AusPetrolPrices", "description": "Ask for the average daily petrol price for any state or capital city region in Australia!"}},
  {"server": "sales", "tool": {"name": "KalendarAI", "description": "KalendarAI sales agents generate revenue with potential customers from 200+ million companies globally."}},
  {"server": "places", "tool": {"name": "local", "description": "Discover and support restaurants, shops & services near you."}}
]"#,
    );
    let index = RouteIndex::build(&c);
    let opts = RouteOptions::default();
    for task in [
        "What are the prices of Ethereum?",
        "I'm looking for a coffee machine under $200.",
    ] {
        let d = route(&index, task, &opts);
        assert_eq!(d.ranked().len(), 1, "{task}: one tool matches");
        assert!(d.selected().is_none(), "{task}: {:?}", d.confidence());
    }
    // The same tool, meant: the task explains its name and description.
    let d = route(&index, "average petrol price in Australia", &opts);
    assert_eq!(name_of(&d).as_deref(), Some("fuel/AusPetrolPrices"));
}

#[test]
fn the_description_alone_can_put_another_tool_first() {
    // By name, "archive_messages" and "archive_notes" both match "archive"; only one says
    // in its description and parameters what the task asks for.
    let c = catalog(
        r#"[
      {"server": "mail", "tool": {"name": "archive_messages", "description": "Move old emails out of the inbox",
        "inputSchema": {"type": "object", "properties": {"folder": {"type": "string", "description": "Mailbox folder"}}}}},
      {"server": "notes", "tool": {"name": "archive_notes", "description": "Hide notebooks you no longer use"}},
      {"server": "files", "tool": {"name": "read_file", "description": "Read a file"}}
    ]"#,
    );
    let index = RouteIndex::build(&c);
    let described = |task: &str| -> Vec<(String, f32)> {
        let toolgate_route::Described {
            ranked,
            by_description,
            ceiling,
        } = index.rank_described(task, None, 5);
        assert_eq!(
            ranked,
            index.rank(task, None, 5),
            "{task}: the same ranking"
        );
        // The ceiling of the same analysis, to the last bit.
        assert_eq!(
            ceiling.map(f32::to_bits),
            Some(index.ceiling(task).to_bits()),
            "{task}"
        );
        assert_eq!(ranked.len(), by_description.len());
        let names = ranked.iter().map(|(t, _)| t.id.to_string());
        names.zip(by_description).collect()
    };
    let d = described("archive old emails in the inbox folder");
    assert_eq!(d[0].0, "mail/archive_messages", "{d:?}");
    assert!(
        d[0].1 > 0.0 && d[1..].iter().all(|(_, s)| *s == 0.0),
        "{d:?}"
    );
    let d = described("archive notebooks");
    let notes = d.iter().find(|(n, _)| n == "notes/archive_notes").unwrap();
    let mail = d
        .iter()
        .find(|(n, _)| n == "mail/archive_messages")
        .unwrap();
    assert!(notes.1 > 0.0 && mail.1 == 0.0, "{d:?}");
    // Name words alone ("archive") are in no description: the tools rank, none is described.
    let d = described("archive");
    assert!(d.len() >= 2 && d.iter().all(|(_, s)| *s == 0.0), "{d:?}");
    // A server filter keeps the scores paired with its tools.
    let d = index.rank_described("old emails folder", Some("mail"), 5);
    assert_eq!(d.ranked.len(), 1);
    assert!(d.by_description[0] > 0.0);
}

/// The static vectors find the tool a paraphrase means over every tool, only from the
/// server asked for, and have no opinion on a task mostly outside their vocabulary.
#[test]
fn the_closest_tool_by_meaning() {
    let index = RouteIndex::build(&catalog(TOOLS));
    let closest = |q: &str, server: Option<&str>| {
        index
            .closest(q, server, 3)
            .into_iter()
            .map(|(t, _)| t.id.to_string())
            .collect::<Vec<_>>()
    };
    let found = closest("resize the pods of my web app to five copies", None);
    assert_eq!(found[0], "kubernetes/kubectl_scale", "{found:?}");
    assert_eq!(found.len(), 3);
    let found = closest(
        "resize the pods of my web app to five copies",
        Some("github"),
    );
    assert!(found.iter().all(|t| t.starts_with("github/")), "{found:?}");
    assert!(closest("查询游戏王卡牌的图片", None).is_empty());
    // Several readings in one pass: each list is that reading's alone, in their order, and
    // a reading the vectors know too little of has an empty list in its place.
    let readings = [
        "resize the pods of my web app to five copies",
        "查询游戏王卡牌的图片",
        "open a pull request",
    ];
    let each = index.closest_each(&readings, None, 3);
    assert_eq!(each.len(), 3);
    for (reading, list) in readings.iter().zip(&each) {
        let alone = index.closest(reading, None, 3);
        let ids = |l: &[(Arc<toolgate_core::catalog::ToolRecord>, f32)]| {
            l.iter()
                .map(|(t, s)| (t.id.to_string(), *s))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(list), ids(&alone), "{reading}");
    }
    assert!(each[1].is_empty() && !each[0].is_empty() && !each[2].is_empty());
    // Two readings, the usual case (one pass for both), the first the second with more
    // words (tokenised only past the second): the same lists as each alone.
    for pair in [
        ["open a pull request create new", "open a pull request"],
        ["resize the pods to five copies", "查询游戏王卡牌的图片"],
    ] {
        let each = index.closest_each(&pair, None, 3);
        for (reading, list) in pair.iter().zip(&each) {
            let alone = index.closest(reading, None, 3);
            let same = list.len() == alone.len()
                && list
                    .iter()
                    .zip(&alone)
                    .all(|(a, b)| a.0.id == b.0.id && a.1 == b.1);
            assert!(same, "{reading}");
        }
    }
    // Twins have one text, so one cosine: the decision counts either as the closest.
    let twins = RouteIndex::build(&catalog(
        r#"[{"server": "a", "tool": {"name": "get_time", "description": "Current time"}},
            {"server": "b", "tool": {"name": "get_time", "description": "Current time"}},
            {"server": "c", "tool": {"name": "get_weather", "description": "Weather"}}]"#,
    ));
    let found = twins.closest("what time is it right now", None, 2);
    assert_eq!(found[0].1, found[1].1, "{found:?}");
    let without = RouteIndex::with_vectors(
        &catalog(TOOLS),
        Default::default(),
        Default::default(),
        None,
    );
    assert!(without.closest("what time is it", None, 3).is_empty());
}

/// Each posting's normalised frequency is kept once worked out (`index/score.rs`); a
/// re-indexed server changes the average lengths, and the scores after it are a fresh
/// index's to the last bit.
#[test]
fn scores_after_reindexing_are_a_fresh_indexs_to_the_last_bit() {
    let c = catalog(TOOLS);
    let queries = [
        "create issue",
        "current time",
        "status of the working tree",
        "scale deployment replicas",
    ];
    let mut used = RouteIndex::build(&c);
    for q in queries {
        used.rank(q, None, 5);
    }
    let new = catalog(
        r#"[{"server": "github", "tool": {"name": "create_issue", "description": "Create a new issue in a repository, with a title, a body, labels and assignees, and return the number of the issue it made"}}]"#,
    );
    used.replace_server("github", new.tools().to_vec());
    let mut fresh = RouteIndex::build(&c);
    fresh.replace_server("github", new.tools().to_vec());
    for q in queries {
        let scored = |index: &RouteIndex| {
            (index.rank(q, None, 5).iter())
                .map(|(t, s)| (t.id.to_string(), s.to_bits()))
                .collect::<Vec<_>>()
        };
        assert_eq!(scored(&used), scored(&fresh), "{q}");
    }
}
