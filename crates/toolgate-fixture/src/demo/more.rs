//! The demo's other servers (see [`crate::demo`]): docs (a wiki), calendar, mail and
//! files (the operations pair, metrics and deploy, is in `ops.rs`), and the seed data.

use chrono::{DateTime, Duration, Utc};
use rmcp::model::JsonObject;
use serde_json::{json, Value};

use super::{matches, opt, push, stamp, text, Answer, State};

fn limit(args: &JsonObject, default: u64) -> usize {
    args.get("limit")
        .or_else(|| args.get("max_results"))
        .and_then(Value::as_u64)
        .unwrap_or(default) as usize
}

pub(crate) fn docs(s: &mut State, tool: &str, args: &JsonObject, now: DateTime<Utc>) -> Answer {
    let at = stamp(now);
    let page = |s: &mut State, path: &str| {
        s.pages
            .get(path.trim_end_matches('/'))
            .cloned()
            .ok_or_else(|| {
                format!("no page {path}: search finds pages by words, list_spaces lists the spaces")
            })
    };
    match tool {
        "search" => {
            let q = text(args, "query")?;
            let space = opt(args, "space");
            let found: Vec<Value> = (s.pages.values())
                .filter(|p| space.is_none_or(|sp| p["path"].as_str().is_some_and(|x| x.starts_with(&format!("/{sp}")))))
                .filter(|p| matches(p, q))
                .map(|p| {
                    let content = p["content"].as_str().unwrap_or("");
                    json!({"path": p["path"], "title": p["title"], "snippet": content.chars().take(120).collect::<String>(), "score": 1.0})
                })
                .collect();
            let total = found.len();
            Ok(
                json!({"results": found.into_iter().take(limit(args, 10)).collect::<Vec<_>>(), "total": total}),
            )
        }
        "get_page" => page(s, text(args, "path")?),
        "create_page" => {
            let parent = text(args, "parent")?.trim_end_matches('/').to_string();
            let title = text(args, "title")?;
            let slug: String = title
                .to_lowercase()
                .chars()
                .map(|c| if c.is_alphanumeric() { c } else { '-' })
                .collect();
            let path = format!("{parent}/{}", slug.trim_matches('-'));
            let record = json!({"path": path, "title": title, "content": opt(args, "content").unwrap_or(""),
                "tags": args.get("tags").cloned().unwrap_or(json!([])), "revision": 1,
                "history": [{"revision": 1, "at": at, "summary": "created"}], "updated_at": at});
            s.pages.insert(path.clone(), record);
            Ok(json!({"path": path, "revision": 1}))
        }
        "update_page" => {
            let path = text(args, "path")?.trim_end_matches('/').to_string();
            let content = text(args, "content")?.to_string();
            let p = s
                .pages
                .get_mut(&path)
                .ok_or_else(|| format!("no page {path}"))?;
            let rev = p["revision"].as_u64().unwrap_or(1);
            if let Some(base) = args.get("base_revision").and_then(Value::as_u64) {
                if base != rev {
                    return Err(format!(
                        "{path} is at revision {rev}, not {base}: get_page it again and merge"
                    ));
                }
            }
            p["content"] = json!(content);
            p["revision"] = json!(rev + 1);
            p["updated_at"] = json!(at);
            push(
                &mut p["history"],
                json!({"revision": rev + 1, "at": at, "summary": opt(args, "summary").unwrap_or("edited")}),
            );
            Ok(json!({"path": path, "revision": rev + 1}))
        }
        "list_spaces" => {
            let mut spaces: Vec<String> = (s.pages.keys())
                .filter_map(|p| p.split('/').nth(1).map(str::to_string))
                .collect();
            spaces.dedup();
            Ok(json!({"spaces": spaces}))
        }
        "page_history" => {
            let p = page(s, text(args, "path")?)?;
            Ok(json!({"path": p["path"], "history": p["history"]}))
        }
        "moveDocument" => {
            let path = text(args, "path")?.trim_end_matches('/').to_string();
            let parent = text(args, "new_parent")?.trim_end_matches('/');
            let mut p = s
                .pages
                .remove(&path)
                .ok_or_else(|| format!("no page {path}"))?;
            let to = format!("{parent}/{}", path.rsplit('/').next().unwrap_or("page"));
            p["path"] = json!(to);
            s.pages.insert(to.clone(), p);
            Ok(json!({"from": path, "to": to}))
        }
        "delete_page" => {
            let path = text(args, "path")?.trim_end_matches('/').to_string();
            let gone: Vec<String> = (s.pages.keys())
                .filter(|p| {
                    **p == path
                        || (args.get("recursive") == Some(&json!(true))
                            && p.starts_with(&format!("{path}/")))
                })
                .cloned()
                .collect();
            if gone.is_empty() {
                return Err(format!("no page {path}"));
            }
            for p in &gone {
                s.pages.remove(p);
            }
            Ok(json!({"deleted": gone}))
        }
        "summarize-page" => {
            let p = page(s, text(args, "path")?)?;
            let max = args.get("max_bullets").and_then(Value::as_u64).unwrap_or(5) as usize;
            let bullets: Vec<&str> = (p["content"].as_str().unwrap_or("").split(['.', '\n']))
                .map(str::trim)
                .filter(|l| l.len() > 3)
                .take(max)
                .collect();
            Ok(json!({"path": p["path"], "title": p["title"], "bullets": bullets}))
        }
        _ => Err(format!("docs/{tool} is not a demo tool")),
    }
}

pub(crate) fn calendar(s: &mut State, tool: &str, args: &JsonObject, now: DateTime<Utc>) -> Answer {
    let event = |s: &mut State, args: &JsonObject| -> Result<String, String> {
        let id = text(args, "event_id")?.to_string();
        s.events
            .contains_key(&id)
            .then_some(id.clone())
            .ok_or_else(|| format!("no event {id}: list_events finds ids"))
    };
    match tool {
        "list_events" => {
            let (from, to) = (
                opt(args, "start").unwrap_or(""),
                opt(args, "end").unwrap_or("~"),
            );
            let q = opt(args, "query").unwrap_or("");
            let events: Vec<Value> = (s.events.values())
                .filter(|e| e["status"] != "cancelled")
                .filter(|e| e["end"].as_str().is_some_and(|x| x >= from) && e["start"].as_str().is_some_and(|x| x <= to))
                .filter(|e| matches(e, q))
                .map(|e| json!({"id": e["id"], "title": e["title"], "start": e["start"], "end": e["end"], "attendees": e["attendees"], "location": e["location"]}))
                .collect();
            Ok(json!({"events": events}))
        }
        "create_event" => {
            let n = s.next("event", 100);
            let id = format!("evt-{n}");
            let record = json!({"id": id, "title": text(args, "title")?, "start": text(args, "start")?, "end": text(args, "end")?,
                "attendees": args.get("attendees").cloned().unwrap_or(json!([])),
                "location": opt(args, "location").unwrap_or(""), "status": "confirmed"});
            s.events.insert(id.clone(), record);
            Ok(json!({"id": id, "html_link": format!("https://calendar.example.com/event/{id}")}))
        }
        "update_event" => {
            let id = event(s, args)?;
            let e = s.events.get_mut(&id).expect("checked");
            for (k, v) in args
                .get("changes")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                e[k.as_str()] = v.clone();
            }
            Ok(e.clone())
        }
        "cancel_event" => {
            let id = event(s, args)?;
            s.events.get_mut(&id).expect("checked")["status"] = json!("cancelled");
            Ok(json!({"id": id, "status": "cancelled"}))
        }
        "respondToInvite" => {
            let id = event(s, args)?;
            let response = text(args, "response")?;
            s.events.get_mut(&id).expect("checked")["my_response"] = json!(response);
            Ok(json!({"id": id, "response": response}))
        }
        "find_free_slots" => {
            let minutes = args
                .get("duration_minutes")
                .and_then(Value::as_i64)
                .unwrap_or(30)
                .clamp(5, 480);
            let day = (now + Duration::days(1)).date_naive();
            let slots: Vec<Value> = [(9, 0), (11, 30), (14, 0), (16, 0)]
                .iter()
                .filter_map(|(h, m)| day.and_hms_opt(*h, *m, 0))
                .map(|t| t.and_utc())
                .map(|t| json!({"start": stamp(t), "end": stamp(t + Duration::minutes(minutes))}))
                .collect();
            Ok(json!({"slots": slots}))
        }
        "list_calendars" => Ok(json!({"calendars": [
            {"id": "primary", "name": "My calendar", "kind": "personal"},
            {"id": "team-eng", "name": "Engineering", "kind": "team"},
            {"id": "rooms", "name": "Meeting rooms", "kind": "resource"}]})),
        "book-room" => {
            let id = event(s, args)?;
            let room = format!(
                "Room {}",
                200 + args
                    .get("min_capacity")
                    .and_then(Value::as_u64)
                    .unwrap_or(4)
            );
            s.events.get_mut(&id).expect("checked")["location"] = json!(room);
            Ok(json!({"event_id": id, "room": room}))
        }
        "set_out_of_office" => Ok(
            json!({"out_of_office": {"start": text(args, "start")?, "end": text(args, "end")?,
            "message": opt(args, "message").unwrap_or("")}, "declined": 0}),
        ),
        _ => Err(format!("calendar/{tool} is not a demo tool")),
    }
}

pub(crate) fn mail(s: &mut State, tool: &str, args: &JsonObject, now: DateTime<Utc>) -> Answer {
    let summary = |m: &Value| json!({"id": m["id"], "from": m["from"], "subject": m["subject"], "date": m["date"], "unread": m["unread"]});
    match tool {
        "search" | "list_inbox" => {
            let q = opt(args, "query").unwrap_or("");
            let folder = opt(args, "folder").unwrap_or("inbox");
            let unread = args.get("unread_only") == Some(&json!(true));
            let mut found: Vec<&Value> = (s.messages.values())
                .filter(|m| tool == "search" || m["folder"] == folder)
                .filter(|m| !unread || m["unread"] == true)
                .filter(|m| matches(m, q))
                .collect();
            found.sort_by(|a, b| b["date"].as_str().cmp(&a["date"].as_str()));
            Ok(
                json!({"messages": found.into_iter().take(limit(args, 20)).map(summary).collect::<Vec<_>>()}),
            )
        }
        "read_message" => {
            let id = text(args, "id")?;
            let m = s
                .messages
                .get_mut(id)
                .ok_or_else(|| format!("no message {id}: search finds ids"))?;
            if args.get("mark_read") != Some(&json!(false)) {
                m["unread"] = json!(false);
            }
            Ok(m.clone())
        }
        "send_email" | "create_draft" => {
            let n = s.next("message", 100);
            let id = format!("msg-{n}");
            let folder = if tool == "send_email" {
                "sent"
            } else {
                "drafts"
            };
            let record = json!({"id": id, "from": "you@example.com", "to": args.get("to").cloned().unwrap_or(json!([])),
                "subject": text(args, "subject")?, "body": opt(args, "body").unwrap_or(""), "date": stamp(now),
                "unread": false, "folder": folder});
            s.messages.insert(id.clone(), record);
            Ok(match tool {
                "send_email" => json!({"message_id": id, "sent_at": stamp(now)}),
                _ => json!({"draft_id": id}),
            })
        }
        "archiveThread" | "delete_message" => {
            let id = opt(args, "id")
                .or(opt(args, "thread_id"))
                .unwrap_or_default();
            let m = s
                .messages
                .get_mut(id)
                .ok_or_else(|| format!("no message {id}"))?;
            m["folder"] = json!(if tool == "archiveThread" {
                "archive"
            } else {
                "trash"
            });
            Ok(json!({"id": id, "folder": m["folder"]}))
        }
        "label_message" => {
            let ids: Vec<String> = (args
                .get("ids")
                .and_then(Value::as_array)
                .into_iter()
                .flatten())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
            for id in &ids {
                let m = s
                    .messages
                    .get_mut(id)
                    .ok_or_else(|| format!("no message {id}"))?;
                for l in args
                    .get("add")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    push(&mut m["labels"], l.clone());
                }
            }
            Ok(json!({"labelled": ids}))
        }
        "get-attachment" => {
            let id = text(args, "message_id")?;
            let m = s
                .messages
                .get(id)
                .ok_or_else(|| format!("no message {id}"))?;
            Ok(
                json!({"message_id": id, "attachment_id": text(args, "attachment_id")?, "name": "report.pdf",
                "size": 48213, "subject": m["subject"]}),
            )
        }
        _ => Err(format!("mail/{tool} is not a demo tool")),
    }
}

pub(crate) fn files(s: &mut State, tool: &str, args: &JsonObject, now: DateTime<Utc>) -> Answer {
    let norm = |p: &str| format!("/{}", p.trim_matches('/'));
    let entry = |name: &str, f: &Value| json!({"name": name, "kind": f["kind"], "size": f["size"], "modified": f["modified"]});
    match tool {
        "list_directory" => {
            let dir = norm(text(args, "path")?);
            let prefix = if dir == "/" {
                "/".to_string()
            } else {
                format!("{dir}/")
            };
            let recursive = args.get("recursive") == Some(&json!(true));
            let entries: Vec<Value> = (s.files.iter())
                .filter_map(|(p, f)| p.strip_prefix(&prefix).map(|rest| (rest, f)))
                .filter(|(rest, _)| !rest.is_empty() && (recursive || !rest.contains('/')))
                .map(|(rest, f)| entry(rest, f))
                .collect();
            if entries.is_empty() && !s.files.contains_key(&dir) && dir != "/" {
                return Err(format!("no folder {dir}"));
            }
            Ok(json!({"entries": entries}))
        }
        "read_file" | "file_info" => {
            let path = norm(text(args, "path")?);
            let f = s
                .files
                .get(&path)
                .ok_or_else(|| format!("no file {path}: list_directory shows what is there"))?;
            if tool == "file_info" {
                return Ok(
                    json!({"path": path, "kind": f["kind"], "size": f["size"], "modified": f["modified"]}),
                );
            }
            let content = f["content"]
                .as_str()
                .ok_or_else(|| format!("{path} is a folder"))?;
            let lines: Vec<&str> = content.lines().collect();
            let start = args
                .get("start_line")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1) as usize;
            let end = args
                .get("end_line")
                .and_then(Value::as_u64)
                .map_or(lines.len(), |e| e as usize)
                .min(lines.len());
            Ok(
                json!({"path": path, "content": lines.get(start - 1..end).unwrap_or_default().join("\n")}),
            )
        }
        "write_file" => {
            let path = norm(text(args, "path")?);
            let content = text(args, "content")?;
            if s.files.contains_key(&path) && args.get("overwrite") == Some(&json!(false)) {
                return Err(format!("{path} exists: pass overwrite: true to replace it"));
            }
            s.files.insert(path.clone(), json!({"kind": "file", "size": content.len(), "modified": stamp(now), "content": content}));
            Ok(json!({"path": path, "bytes": content.len()}))
        }
        "create-folder" => {
            let path = norm(text(args, "path")?);
            s.files.insert(
                path.clone(),
                json!({"kind": "directory", "size": 0, "modified": stamp(now)}),
            );
            Ok(json!({"path": path, "created": true}))
        }
        "move_file" | "delete_file" => {
            let from = norm(opt(args, "from").or(opt(args, "path")).unwrap_or_default());
            let f = s
                .files
                .remove(&from)
                .ok_or_else(|| format!("no file {from}"))?;
            if tool == "delete_file" {
                return Ok(json!({"path": from, "deleted": true}));
            }
            let to = norm(text(args, "to")?);
            s.files.insert(to.clone(), f);
            Ok(json!({"from": from, "to": to}))
        }
        "searchFiles" => {
            let root = norm(opt(args, "root").unwrap_or("/"));
            let glob = opt(args, "name_glob")
                .unwrap_or("*")
                .trim_start_matches('*')
                .to_string();
            let contains = opt(args, "contains").unwrap_or("");
            let found: Vec<&String> = (s.files.iter())
                .filter(|(p, f)| {
                    p.starts_with(&root)
                        && p.ends_with(&glob)
                        && f["content"].as_str().is_some_and(|c| c.contains(contains))
                })
                .map(|(p, _)| p)
                .take(limit(args, 50))
                .collect();
            Ok(json!({"matches": found}))
        }
        "share_file" => {
            let path = norm(text(args, "path")?);
            if !s.files.contains_key(&path) {
                return Err(format!("no file {path}"));
            }
            let with = args
                .get("with")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            Ok(json!({"link": format!("https://files.example.com/s{}", path), "shared_with": with}))
        }
        _ => Err(format!("files/{tool} is not a demo tool")),
    }
}

/// The demo's other starting records.
pub(crate) fn seed(s: &mut State, now: DateTime<Utc>) {
    let ago = |h: i64| stamp(now - Duration::hours(h));
    for (path, title, content) in [
        ("/eng/runbooks/database-failover", "Database failover", "Promote the replica with pg_ctl promote. Point the app at the new primary. Open an OPS ticket for the post-mortem."),
        ("/eng/onboarding", "Engineering onboarding", "Get access to the tracker and the wiki. Set up the dev environment. Pair with your buddy for the first week."),
        ("/product/roadmap-q1", "Roadmap Q1", "Checkout redesign. Dark mode. Faster search on the mobile app."),
    ] {
        s.pages.insert(path.into(), json!({"path": path, "title": title, "content": content, "tags": [], "revision": 3,
            "history": [{"revision": 3, "at": ago(48), "summary": "edited"}], "updated_at": ago(48)}));
    }
    let day = |d: i64, h: u32| {
        let t = (now + Duration::days(d))
            .date_naive()
            .and_hms_opt(h, 0, 0)
            .expect("an hour")
            .and_utc();
        stamp(t)
    };
    for (id, title, d, h, attendees) in [
        (
            "evt-1",
            "Team standup",
            0,
            9,
            vec!["dana@example.com", "lee@example.com"],
        ),
        (
            "evt-2",
            "Checkout incident review",
            1,
            14,
            vec!["sam@example.com"],
        ),
        ("evt-3", "1:1 with Kim", 1, 16, vec!["kim@example.com"]),
        (
            "evt-4",
            "Quarterly planning",
            3,
            10,
            vec!["team@example.com"],
        ),
    ] {
        s.events.insert(
            id.into(),
            json!({"id": id, "title": title, "start": day(d, h), "end": day(d, h + 1),
            "attendees": attendees, "location": "Room 204", "status": "confirmed"}),
        );
    }
    for (id, from, subject, h, unread) in [
        (
            "msg-1",
            "dana@example.com",
            "Safari checkout bug: repro steps",
            3,
            true,
        ),
        (
            "msg-2",
            "billing@vendor.example",
            "Invoice 2026-11 for your team plan",
            26,
            false,
        ),
        (
            "msg-3",
            "sam@example.com",
            "db-2 disk at 91%: cleaning up old WAL files",
            2,
            true,
        ),
    ] {
        s.messages.insert(id.into(), json!({"id": id, "from": from, "to": ["you@example.com"], "subject": subject,
            "body": format!("{subject}. Details inside."), "date": ago(h), "unread": unread, "folder": "inbox"}));
    }
    for (path, content) in [
        (
            "/home/demo/notes.md",
            "# Notes\n- follow up on WEB-102\n- book the incident review\n",
        ),
        (
            "/home/demo/reports/q3.csv",
            "month,revenue\n2026-07,41200\n2026-08,43950\n2026-09,45100\n",
        ),
    ] {
        s.files.insert(
            path.into(),
            json!({"kind": "file", "size": content.len(), "modified": ago(72), "content": content}),
        );
    }
    for dir in ["/home", "/home/demo", "/home/demo/reports"] {
        s.files.insert(
            dir.into(),
            json!({"kind": "directory", "size": 0, "modified": ago(72)}),
        );
    }
    for (name, prod, staging, replicas) in [
        ("api", "v2.14.1", "v2.15.0", 4),
        ("web", "v5.3.0", "v5.3.2", 3),
        ("worker", "v1.9.7", "v1.9.7", 2),
    ] {
        s.services.insert(
            name.into(),
            json!({"service": name, "production": prod, "staging": staging, "dev": staging,
            "previous": prod, "replicas": replicas}),
        );
    }
}
