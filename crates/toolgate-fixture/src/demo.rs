//! The built-in demo's answers (`--demo --stateful`, what `toolgate serve` with no
//! configuration runs): each demo server keeps a small world in memory, seeded with a few
//! records, so answers are plausible and consistent: a ticket created can be read back,
//! searched, commented and closed; a page written can be read; an event booked is listed;
//! a file written can be read; the clock tells the time. The state lives as long as the
//! server's process. Tests and benchmarks keep the echo (`--demo` alone, `--catalog`).
//!
//! Each answer is one JSON object: the tool's `structuredContent` (valid against its
//! `outputSchema` where it declares one) and, as text, the same JSON.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use rmcp::model::JsonObject;
use serde_json::{json, Value};

mod more;
mod ops;
mod time;

/// What a demo tool answers: its result, or a message for the model (`isError`).
/// (`Err` is the tool's error text, the value the fixture answers with.)
pub type Answer = Result<Value, String>;

/// One demo server's world.
#[derive(Debug)]
pub struct DemoWorld {
    /// The records, behind one lock: calls are small and a demo is not a benchmark.
    state: Mutex<State>,
}

/// Records by kind, each a JSON object as the tools answer it.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub issues: BTreeMap<String, Value>,
    pub pages: BTreeMap<String, Value>,
    pub events: BTreeMap<String, Value>,
    pub messages: BTreeMap<String, Value>,
    pub files: BTreeMap<String, Value>,
    pub deployments: BTreeMap<String, Value>,
    pub services: BTreeMap<String, Value>,
    /// The last number given per kind or project (`WEB` -> 104).
    pub counters: BTreeMap<String, u64>,
}

impl State {
    /// The next number of `kind`, starting above `base`.
    pub(crate) fn next(&mut self, kind: &str, base: u64) -> u64 {
        let n = self.counters.entry(kind.to_string()).or_insert(base);
        *n += 1;
        *n
    }
}

impl Default for DemoWorld {
    fn default() -> Self {
        Self::new()
    }
}

impl DemoWorld {
    /// A world seeded with a few records of every kind, dated around now.
    pub fn new() -> Self {
        let mut state = State::default();
        seed(&mut state, Utc::now());
        Self {
            state: Mutex::new(state),
        }
    }

    /// The answer of `server`'s `tool` to `args` (knobs already stripped).
    pub fn call(&self, server: &str, tool: &str, args: &JsonObject) -> Answer {
        let now = Utc::now();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut *state;
        match (server, tool) {
            ("time", "get_current_time") => time::current_time(text(args, "timezone")?, now),
            ("time", "convert_time") => time::convert(
                text(args, "source_timezone")?,
                text(args, "time")?,
                text(args, "target_timezone")?,
                now,
            ),
            ("tickets", _) => tickets(s, tool, args, now),
            ("docs", _) => more::docs(s, tool, args, now),
            ("calendar", _) => more::calendar(s, tool, args, now),
            ("mail", _) => more::mail(s, tool, args, now),
            ("files", _) => more::files(s, tool, args, now),
            ("metrics" | "deploy", _) => ops::ops(s, server, tool, args, now),
            _ => Err(format!("{server}/{tool} is not a demo tool")),
        }
    }
}

/// A required string argument.
pub(crate) fn text<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing argument {key:?} (a string)"))
}

/// An optional string argument.
pub(crate) fn opt<'a>(args: &'a JsonObject, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// An RFC 3339 timestamp to the second.
pub(crate) fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Whether `record`'s text fields contain every word of `query` (case-insensitive);
/// an empty query matches everything. Query words like `AND`, `=` are ignored.
pub(crate) fn matches(record: &Value, query: &str) -> bool {
    let hay = record.to_string().to_lowercase();
    query
        .split(|c: char| !c.is_alphanumeric() && c != '-' && c != '_' && c != '@' && c != '.')
        .filter(|w| w.len() > 1 && !matches!(*w, "and" | "or" | "AND" | "OR" | "in" | "me"))
        .all(|w| hay.contains(&w.to_lowercase()))
}

fn issue<'a>(s: &'a mut State, args: &JsonObject) -> Result<&'a mut Value, String> {
    let key = text(args, "key")?.to_uppercase();
    if !s.issues.contains_key(&key) {
        let known: Vec<&String> = s.issues.keys().take(8).collect();
        return Err(format!(
            "no issue {key}: search_issues finds keys (some are {known:?})"
        ));
    }
    Ok(s.issues.get_mut(&key).expect("just checked"))
}

fn tickets(s: &mut State, tool: &str, args: &JsonObject, now: DateTime<Utc>) -> Answer {
    let at = stamp(now);
    match tool {
        "create_issue" => {
            let project = text(args, "project")?.to_uppercase();
            let n = s.next(&format!("issue-{project}"), 100);
            let key = format!("{project}-{n}");
            let record = json!({
                "key": key, "project": project, "title": text(args, "title")?,
                "body": opt(args, "body").unwrap_or(""),
                "type": opt(args, "type").unwrap_or("task"),
                "status": "open", "priority": opt(args, "priority").unwrap_or("P2"),
                "assignee": args.get("assignee").cloned().unwrap_or(Value::Null),
                "labels": args.get("labels").cloned().unwrap_or(json!([])),
                "comments": [], "links": [], "worklog_minutes": 0,
                "created_at": at, "updated_at": at,
            });
            s.issues.insert(key.clone(), record);
            Ok(
                json!({"key": key, "url": format!("https://tickets.example.com/browse/{key}"), "created_at": at}),
            )
        }
        "get_issue" => {
            let i = issue(s, args)?;
            let mut out = json!({
                "key": i["key"], "title": i["title"], "status": i["status"],
                "assignee": i["assignee"], "priority": i["priority"], "type": i["type"],
                "body": i["body"], "labels": i["labels"], "links": i["links"],
                "created_at": i["created_at"], "updated_at": i["updated_at"],
            });
            if args.get("include_comments") != Some(&json!(false)) {
                out["comments"] = i["comments"].clone();
            }
            Ok(out)
        }
        "update_issue" => {
            let i = issue(s, args)?;
            let fields = args
                .get("fields")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (k, v) in &fields {
                i[k.as_str()] = v.clone();
            }
            i["updated_at"] = json!(at);
            Ok(
                json!({"key": i["key"], "updated": fields.keys().collect::<Vec<_>>(), "updated_at": at}),
            )
        }
        "transition_issue" => {
            let to = text(args, "to")?.to_string();
            if to == "closed" && opt(args, "resolution").is_none() {
                return Err(
                    "closing needs a resolution: fixed, wont_fix, duplicate or cannot_reproduce"
                        .into(),
                );
            }
            let i = issue(s, args)?;
            let from = i["status"].clone();
            i["status"] = json!(to);
            if let Some(r) = opt(args, "resolution") {
                i["resolution"] = json!(r);
            }
            if let Some(c) = opt(args, "comment") {
                push(
                    &mut i["comments"],
                    json!({"author": "you", "body": c, "at": at}),
                );
            }
            i["updated_at"] = json!(at);
            Ok(json!({"key": i["key"], "from": from, "to": to}))
        }
        "search_issues" => {
            let query = text(args, "query")?;
            let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(20) as usize;
            let mut found: Vec<&Value> = s.issues.values().filter(|i| matches(i, query)).collect();
            found.sort_by(|a, b| b["updated_at"].as_str().cmp(&a["updated_at"].as_str()));
            let issues: Vec<Value> = (found.iter().take(limit))
                .map(|i| json!({"key": i["key"], "title": i["title"], "status": i["status"], "priority": i["priority"], "assignee": i["assignee"]}))
                .collect();
            Ok(json!({"issues": issues, "total": found.len(), "next_cursor": null}))
        }
        "add_comment" => {
            let body = text(args, "body")?.to_string();
            let i = issue(s, args)?;
            push(
                &mut i["comments"],
                json!({"author": "you", "body": body, "at": at}),
            );
            let count = i["comments"].as_array().map_or(0, Vec::len);
            Ok(json!({"key": i["key"], "comment_id": format!("c{count}"), "at": at}))
        }
        "assignIssue" => {
            let who = text(args, "assignee")?;
            let who = if who.is_empty() {
                Value::Null
            } else {
                json!(who)
            };
            let i = issue(s, args)?;
            i["assignee"] = who.clone();
            Ok(json!({"key": i["key"], "assignee": who}))
        }
        "link_issues" => {
            let (from, to, kind) = (
                text(args, "from")?.to_uppercase(),
                text(args, "to")?.to_uppercase(),
                text(args, "type")?,
            );
            if !s.issues.contains_key(&to) {
                return Err(format!("no issue {to}"));
            }
            let i = s
                .issues
                .get_mut(&from)
                .ok_or_else(|| format!("no issue {from}"))?;
            push(&mut i["links"], json!({"type": kind, "key": to}));
            Ok(json!({"from": from, "type": kind, "to": to}))
        }
        "delete_issue" => {
            let key = text(args, "key")?.to_uppercase();
            s.issues
                .remove(&key)
                .ok_or_else(|| format!("no issue {key}"))?;
            Ok(json!({"key": key, "deleted": true}))
        }
        "list_projects" => {
            let mut projects: BTreeMap<String, usize> = BTreeMap::new();
            for i in s.issues.values() {
                *projects
                    .entry(i["project"].as_str().unwrap_or("?").to_string())
                    .or_default() += 1;
            }
            let names = [
                ("WEB", "Website"),
                ("OPS", "Operations"),
                ("MOB", "Mobile app"),
            ];
            let list: Vec<Value> = projects
                .iter()
                .map(|(k, n)| {
                    let name = names
                        .iter()
                        .find(|(p, _)| p == k)
                        .map_or(k.as_str(), |(_, n)| n);
                    json!({"key": k, "name": name, "open_issues": n})
                })
                .collect();
            Ok(json!({"projects": list}))
        }
        "log-work" => {
            let minutes = args
                .get("minutes")
                .and_then(Value::as_u64)
                .ok_or("missing argument \"minutes\" (a whole number)")?;
            let i = issue(s, args)?;
            let total = i["worklog_minutes"].as_u64().unwrap_or(0) + minutes;
            i["worklog_minutes"] = json!(total);
            Ok(
                json!({"key": i["key"], "logged_minutes": minutes, "total_minutes": total, "date": opt(args, "date").map_or_else(|| now.date_naive().to_string(), str::to_string)}),
            )
        }
        _ => Err(format!("tickets/{tool} is not a demo tool")),
    }
}

/// Appends to a JSON array (making one if the value is not).
pub(crate) fn push(list: &mut Value, item: Value) {
    match list.as_array_mut() {
        Some(a) => a.push(item),
        None => *list = json!([item]),
    }
}

/// The records every demo starts with, dated relative to `now`.
fn seed(s: &mut State, now: DateTime<Utc>) {
    let ago = |h: i64| stamp(now - Duration::hours(h));
    for (key, title, status, priority, assignee, h) in [
        (
            "WEB-101",
            "Checkout button does nothing on Safari 17",
            "in_progress",
            "P1",
            Some("dana"),
            30,
        ),
        (
            "WEB-102",
            "Login page shows a blank screen after password reset",
            "open",
            "P0",
            None,
            5,
        ),
        (
            "WEB-103",
            "Add dark mode to the account settings page",
            "open",
            "P3",
            Some("lee"),
            200,
        ),
        (
            "OPS-101",
            "Disk usage alert on db-2 at 91%",
            "open",
            "P1",
            Some("sam"),
            2,
        ),
        (
            "OPS-102",
            "Rotate the staging TLS certificate before it expires",
            "done",
            "P2",
            Some("sam"),
            400,
        ),
        (
            "MOB-101",
            "Push notifications arrive twice on Android 15",
            "in_review",
            "P2",
            Some("kim"),
            50,
        ),
    ] {
        let project = &key[..3];
        s.issues.insert(key.into(), json!({
            "key": key, "project": project, "title": title, "body": "", "type": "bug",
            "status": status, "priority": priority, "assignee": assignee, "labels": [],
            "comments": [{"author": "alex", "body": "Seen again this morning.", "at": ago(h / 2)}],
            "links": [], "worklog_minutes": 0, "created_at": ago(h), "updated_at": ago(h / 2),
        }));
        let n = key[4..].parse::<u64>().unwrap_or(100);
        let c = s.counters.entry(format!("issue-{project}")).or_insert(0);
        *c = (*c).max(n);
    }
    more::seed(s, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap()
    }

    /// Every demo tool has an answer of its own (none falls through to "not a demo tool").
    #[test]
    fn every_demo_tool_is_answered() {
        let catalog: Vec<Value> = serde_json::from_str(crate::DEMO_CATALOG).unwrap();
        let world = DemoWorld::new();
        for entry in &catalog {
            let (server, tool) = (
                entry["server"].as_str().unwrap(),
                entry["tool"]["name"].as_str().unwrap(),
            );
            if let Err(e) = world.call(server, tool, &JsonObject::new()) {
                assert!(!e.contains("not a demo tool"), "{server}/{tool}: {e}");
            }
        }
    }

    /// Each tool with an `outputSchema` answers a valid instance of it.
    #[test]
    fn answers_match_the_declared_output_schemas() {
        let catalog: Vec<Value> = serde_json::from_str(crate::DEMO_CATALOG).unwrap();
        let world = DemoWorld::new();
        let calls = [
            (
                "tickets",
                "create_issue",
                json!({"project": "WEB", "title": "Broken login"}),
            ),
            ("tickets", "get_issue", json!({"key": "WEB-101"})),
            ("tickets", "search_issues", json!({"query": "checkout"})),
            ("docs", "search", json!({"query": "failover"})),
            (
                "docs",
                "create_page",
                json!({"parent": "/eng", "title": "On call", "content": "Who is on call."}),
            ),
            ("calendar", "list_events", json!({})),
            (
                "calendar",
                "create_event",
                json!({"title": "Review", "start": "2026-12-07T10:00:00Z", "end": "2026-12-07T11:00:00Z"}),
            ),
            (
                "calendar",
                "find_free_slots",
                json!({"attendees": ["kim@example.com"], "duration_minutes": 30}),
            ),
            ("mail", "search", json!({"query": "invoice"})),
            (
                "mail",
                "send_email",
                json!({"to": ["kim@example.com"], "subject": "Hi", "body": "Hello"}),
            ),
            ("files", "list_directory", json!({"path": "/home/demo"})),
            (
                "files",
                "share_file",
                json!({"path": "/home/demo/notes.md", "with": ["kim@example.com"]}),
            ),
            (
                "metrics",
                "query_metrics",
                json!({"query": "rate(http_requests_total[5m])"}),
            ),
            ("metrics", "service_slo", json!({"service": "api"})),
            (
                "deploy",
                "deploy_service",
                json!({"service": "api", "version": "v2.15.0", "environment": "staging"}),
            ),
            (
                "time",
                "get_current_time",
                json!({"timezone": "Europe/Paris"}),
            ),
            (
                "time",
                "convert_time",
                json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
            ),
        ];
        let with_schema = catalog
            .iter()
            .filter(|e| e["tool"].get("outputSchema").is_some())
            .count();
        assert_eq!(
            calls.len(),
            with_schema,
            "one call per tool with an outputSchema"
        );
        for (server, tool, a) in calls {
            let entry = catalog
                .iter()
                .find(|e| e["server"] == server && e["tool"]["name"] == tool)
                .unwrap();
            let schema = &entry["tool"]["outputSchema"];
            let answer = world
                .call(server, tool, &args(a))
                .unwrap_or_else(|e| panic!("{server}/{tool}: {e}"));
            let validator = jsonschema::validator_for(schema).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&answer)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "{server}/{tool}: {answer} does not match: {errors:?}"
            );
        }
    }

    /// What is created can be read back, changed, found and removed.
    #[test]
    fn a_ticket_lives_its_life() {
        let world = DemoWorld::new();
        let made = world
            .call(
                "tickets",
                "create_issue",
                &args(json!({"project": "ops", "title": "Rotate keys"})),
            )
            .unwrap();
        let key = made["key"].as_str().unwrap();
        assert_eq!(key, "OPS-103", "numbered after the seeded issues");
        world
            .call(
                "tickets",
                "add_comment",
                &args(json!({"key": key, "body": "Started."})),
            )
            .unwrap();
        world
            .call(
                "tickets",
                "assignIssue",
                &args(json!({"key": key, "assignee": "sam"})),
            )
            .unwrap();
        let got = world
            .call(
                "tickets",
                "get_issue",
                &args(json!({"key": key.to_lowercase()})),
            )
            .unwrap();
        assert_eq!(
            (
                got["assignee"].as_str(),
                got["comments"][0]["body"].as_str()
            ),
            (Some("sam"), Some("Started."))
        );
        let found = world
            .call(
                "tickets",
                "search_issues",
                &args(json!({"query": "rotate"})),
            )
            .unwrap();
        assert_eq!(found["issues"][0]["key"], key);
        world
            .call(
                "tickets",
                "delete_issue",
                &args(json!({"key": key, "confirm": true})),
            )
            .unwrap();
        let e = world
            .call("tickets", "get_issue", &args(json!({"key": key})))
            .unwrap_err();
        assert!(e.contains("no issue") && e.contains("search_issues"), "{e}");
    }
}
