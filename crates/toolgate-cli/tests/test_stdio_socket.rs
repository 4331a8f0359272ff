//! `toolgate serve --stdio` when its stdin and stdout are a Unix socket, as Node clients'
//! `child_process` gives them: the front reads and writes the socket through the IO
//! reactor (`front::frames::stdio`), and a session works as over pipes.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn a_session_over_a_socket_pair_initializes_lists_and_calls() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--stdio", "--demo", "--mode", "direct"])
        .env("XDG_STATE_HOME", state.path())
        .stdin(Stdio::from(OwnedFd::from(theirs.try_clone().unwrap())))
        .stdout(Stdio::from(OwnedFd::from(theirs)))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ours.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut reader = BufReader::new(ours.try_clone().unwrap());
    let mut writer = ours;
    let mut ask = move |message: serde_json::Value| -> Option<serde_json::Value> {
        writeln!(writer, "{message}").unwrap();
        message.get("id")?;
        loop {
            let mut line = String::new();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "the gateway closed the socket"
            );
            let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
            if answer.get("id") == message.get("id") {
                return Some(answer);
            }
        }
    };
    let init = ask(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "socket", "version": "1"}}}))
    .unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "toolgate", "{init}");
    ask(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = ask(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).unwrap();
    let tools = list["result"]["tools"].as_array().expect("tools");
    let tool = tools
        .iter()
        .filter_map(|t| t["name"].as_str())
        .find(|n| *n == "calendar_list_calendars")
        .expect("the demo's calendar tool");
    let call = ask(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}}),
    )
    .unwrap();
    assert_eq!(call["result"]["isError"], false, "{call}");
    // Closing our end is the end of the session: the gateway exits on its own.
    drop(ask);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the gateway did not exit at EOF"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
