//! The built-in demo (`toolgate serve` with no configuration) answers with a consistent
//! made-up world, through the gateway: a ticket created is read back, found and closed;
//! a file written is read; the clock tells the time in the zone asked; a mistake is a
//! tool error that says what to do.

mod common;

use common::*;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_keeps_what_it_is_given_and_tells_the_time() {
    let state = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(toolgate());
    cmd.args(["serve", "--stdio", "--demo", "--mode", "direct"])
        .env("XDG_STATE_HOME", state.path());
    let (handler, _notes) = test_client();
    let client = handler
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .expect("initialize over stdio");
    let names = tool_names(&client).await;
    assert!(
        names.contains(&"time_get_current_time".to_string()),
        "{names:?}"
    );

    let r = call(
        &client,
        "tickets_create_issue",
        json!({"project": "web", "title": "Login page is broken", "priority": "P1"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let key = structured(&r)["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("WEB-"), "{key}");
    let r = call(&client, "tickets_get_issue", json!({"key": key})).await;
    let issue = structured(&r);
    assert_eq!(
        (
            issue["title"].as_str(),
            issue["status"].as_str(),
            issue["priority"].as_str()
        ),
        (Some("Login page is broken"), Some("open"), Some("P1")),
        "{issue}"
    );
    let r = call(
        &client,
        "tickets_search_issues",
        json!({"query": "login broken"}),
    )
    .await;
    assert!(
        structured(&r)["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["key"] == key.as_str()),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "tickets_transition_issue",
        json!({"key": key, "to": "closed"}),
    )
    .await;
    assert_eq!(
        r.is_error,
        Some(true),
        "closing without a resolution is refused"
    );
    assert!(text(&r).contains("resolution"), "{}", text(&r));
    call(
        &client,
        "tickets_transition_issue",
        json!({"key": key, "to": "closed", "resolution": "fixed"}),
    )
    .await;
    let r = call(&client, "tickets_get_issue", json!({"key": key})).await;
    assert_eq!(structured(&r)["status"], "closed");

    call(
        &client,
        "files_write_file",
        json!({"path": "/home/demo/todo.txt", "content": "buy milk\ncall Kim\n"}),
    )
    .await;
    let r = call(
        &client,
        "files_read_file",
        json!({"path": "/home/demo/todo.txt", "start_line": 2}),
    )
    .await;
    assert_eq!(structured(&r)["content"], "call Kim", "{}", text(&r));

    let before = chrono_now_secs();
    let r = call(
        &client,
        "time_get_current_time",
        json!({"timezone": "Asia/Tokyo"}),
    )
    .await;
    let t = structured(&r);
    let datetime = t["datetime"].as_str().unwrap();
    assert!(
        datetime.ends_with("+09:00") && t["timezone"] == "Asia/Tokyo",
        "{t}"
    );
    let told = parse_rfc3339_secs(datetime);
    assert!(
        told + 1 >= before && told <= chrono_now_secs() + 1,
        "{datetime} is not now"
    );
    let r = call(
        &client,
        "time_get_current_time",
        json!({"timezone": "Mars/Olympus"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("IANA"), "{}", text(&r));
    client.cancel().await.unwrap();
}

fn chrono_now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS±HH:MM`.
fn parse_rfc3339_secs(s: &str) -> i64 {
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().unwrap();
    let (y, mo, d, h, mi, se) = (n(0, 4), n(5, 7), n(8, 10), n(11, 13), n(14, 16), n(17, 19));
    let sign = if &s[19..20] == "-" { -1 } else { 1 };
    let off = sign * (n(20, 22) * 3600 + n(23, 25) * 60);
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y2, m2) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    days * 86400 + h * 3600 + mi * 60 + se - off
}
