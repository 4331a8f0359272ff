//! Code mode's time, workspace and tool tree end to end: a real gateway over stdio, fixture
//! upstreams, real sandbox workers. Timers inside the deadline; files kept per principal
//! across runs and a gateway restart, with quotas and no path escape; the operator's
//! `toolgate workspace`; `./servers` and `describe_tools` showing only what the profile shows.

mod common;
use common::code::*;
use common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn timers_wait_inside_the_run_and_a_sleep_past_the_deadline_times_out() {
    let (_dir, config) = setup("");
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(
        &client,
        "let ticks = 0;
         const every = setInterval(() => { ticks++; }, 20);
         const order = [];
         setTimeout(() => order.push('second'), 40);
         setTimeout(() => order.push('first'), 10);
         await sleep(150);
         clearInterval(every);
         const r = await tools.alpha.echo({message: 'after the sleep'});
         return {order, ticked: ticks > 0, echoed: r.arguments.message}",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!({"order": ["first", "second"], "ticked": true, "echoed": "after the sleep"})
    );
    // A sleep that would end past the deadline ends the run at once, saying why.
    let (s, t) = run_with(&client, "await sleep(600000); return 'never'", 1500).await;
    assert_eq!(s["status"], "timeout", "{t}");
    assert!(
        s["error"]["message"].as_str().unwrap().contains("timer"),
        "{s}"
    );
}

/// Files in `ws/` beside the configuration, with small quotas.
const WORKSPACE: &str =
    "[code.workspace]\ndir = \"ws\"\nmax_files = 3\nmax_file_bytes = 2048\nmax_bytes = 4096\n";

const WRITE: &str =
    "const rows = [['name', 'email'], ['Ada', 'ada@example.org'], ['Bo', 'bo@example.org']];
     await fs.writeFile('./workspace/leads.csv', rows.map(r => r.join(',')).join('\\n'));
     await fs.writeFile('./workspace/progress.json', JSON.stringify({done: 1}));
     return await fs.readdir('./workspace')";

const RESUME: &str = "const csv = await fs.readFile('./workspace/leads.csv');
     const progress = JSON.parse(await fs.readFile('./workspace/progress.json'));
     const rest = csv.split('\\n').slice(1 + progress.done);
     return {resumeAt: progress.done, rest: rest.map(r => r.split(',')[0])}";

#[tokio::test]
async fn workspace_files_outlive_the_run_and_the_gateway() {
    let (dir, config) = setup(WORKSPACE);
    {
        let (client, _) = connect_stdio(&config, &[]).await;
        let s = expect(&client, WRITE, "ok").await;
        assert_eq!(s["result"], json!(["leads.csv", "progress.json"]));
        let s = expect(&client, RESUME, "ok").await;
        assert_eq!(s["result"], json!({"resumeAt": 1, "rest": ["Bo"]}));
        client.cancel().await.unwrap();
    }
    // A new gateway process over the same folder: the next run resumes from the files.
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(&client, RESUME, "ok").await;
    assert_eq!(s["result"], json!({"resumeAt": 1, "rest": ["Bo"]}));

    // Quotas refuse with `limit`, missing files with `not_found`; the run goes on.
    let s = expect(
        &client,
        "const codes = [];
         const tryIt = async (f) => { try { await f(); codes.push('ok') } catch (e) { codes.push(e.code) } };
         await tryIt(() => fs.writeFile('./workspace/big.txt', 'x'.repeat(3000)));
         await tryIt(() => fs.writeFile('./workspace/third.txt', 'x'));
         await tryIt(() => fs.writeFile('./workspace/fourth.txt', 'x'));
         await tryIt(() => fs.readFile('./workspace/none.txt'));
         await tryIt(() => fs.writeFile('./workspace/n.txt', {not: 'a string'}));
         return codes",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!(["limit", "ok", "limit", "not_found", "invalid_arguments"])
    );

    // No path leaves the workspace, and ./servers cannot be written.
    let s = expect(
        &client,
        "const out = [];
         for (const p of ['./workspace/../toolgate.toml', '../toolgate.toml', '/etc/passwd', './workspace/a\\\\..\\\\b']) {
           try { await fs.readFile(p); out.push('read') } catch (e) { out.push(e.code) }
         }
         try { await fs.writeFile('./servers/alpha/echo.d.ts', 'x') } catch (e) { out.push(e.code) }
         return out",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!([
            "invalid_arguments",
            "invalid_arguments",
            "invalid_arguments",
            "invalid_arguments",
            "denied"
        ])
    );
    assert!(!dir.path("toolgate.toml.d.ts").exists() && !dir.path("ws/toolgate.toml").exists());
    client.cancel().await.unwrap();

    // The operator sees and removes the same files, under the principal's name.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(toolgate())
            .arg("workspace")
            .args(args)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = cli(&["ls"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("local") && out.contains("leads.csv") && out.contains("progress.json"),
        "{out}"
    );
    let (code, out, _) = cli(&["cat", "local", "leads.csv"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("name,email\nAda,"), "{out}");
    let (code, _, err) = cli(&["cat", "local", "../toolgate.toml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`..`"), "{err}");
    let (code, out, _) = cli(&["rm", "local", "leads.csv"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("removed 1"), "{out}");
    let (_, out, _) = cli(&["ls", "local", "--json"]);
    let files: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["progress.json", "third.txt"], "{out}");
}

#[tokio::test]
async fn the_tree_and_describe_tools_show_only_what_the_profile_shows() {
    let (dir, _) = setup("");
    let base = std::fs::read_to_string(dir.path("toolgate.toml")).unwrap();
    let config = dir.write(
        "toolgate.toml",
        &format!("{base}\n[policy]\ndefault_profile = \"alpha-only\"\n[policy.profiles.alpha-only]\ntools = [\"alpha/*\"]\n"),
    );
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(
        &client,
        "const servers = await fs.readdir('./servers');
         const files = await fs.readdir('./servers/alpha');
         const ts = await fs.readFile('./servers/alpha/add_numbers.d.ts');
         let hidden; try { await fs.readdir('./servers/beta') } catch (e) { hidden = e.code }
         let hiddenFile; try { await fs.readFile('./servers/beta/status.d.ts') } catch (e) { hiddenFile = e.code }
         return {servers, files, ts, hidden, hiddenFile}",
        "ok",
    )
    .await;
    let r = &s["result"];
    assert_eq!(r["servers"], json!(["alpha"]));
    assert_eq!(
        r["files"],
        json!(["add_numbers.d.ts", "echo.d.ts", "status.d.ts"])
    );
    let ts = r["ts"].as_str().unwrap();
    assert!(
        ts.starts_with("declare namespace tools.alpha {") && ts.contains("function add_numbers("),
        "{ts}"
    );
    assert_eq!(
        (r["hidden"].as_str(), r["hiddenFile"].as_str()),
        (Some("not_found"), Some("not_found"))
    );

    // The same view before writing a program.
    let r = call(&client, "describe_tools", json!({})).await;
    assert_eq!(
        structured(&r)["servers"],
        json!([{"server": "alpha", "tools": 3}]),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "describe_tools",
        json!({"server": "alpha", "detail": "names"}),
    )
    .await;
    assert_eq!(text(&r), "alpha/add_numbers\nalpha/echo\nalpha/status\n");
    let r = call(&client, "describe_tools", json!({"server": "beta"})).await;
    assert!(r.is_error == Some(true), "{}", text(&r));
    let r = call(
        &client,
        "describe_tools",
        json!({"search": "status report"}),
    )
    .await;
    let found: Vec<String> = structured(&r)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}/{}",
                t["server"].as_str().unwrap(),
                t["tool"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(found, ["alpha/status"], "{}", text(&r));
    assert!(
        text(&r).contains("alpha/status: Report alpha status."),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "describe_tools",
        json!({"search": "add two integers", "detail": "typescript", "limit": 1}),
    )
    .await;
    assert!(text(&r).contains("function add_numbers("), "{}", text(&r));
    // Named tools the profile hides are unknown here, as in the tree.
    let r = call(
        &client,
        "describe_tools",
        json!({"tools": ["beta/get.report"]}),
    )
    .await;
    assert!(r.is_error == Some(true), "{}", text(&r));
    let r = call(&client, "describe_tools", json!({"detail": "full"})).await;
    assert!(
        text(&r).contains("use names, summary or typescript"),
        "{}",
        text(&r)
    );
}

/// Runs `code` in a real worker process whose CPU limit is one second, with a deadline of
/// `timeout_ms`; returns the `Done` line, or `None` when the process died without one.
fn worker_with_one_cpu_second(code: &str, timeout_ms: u64) -> Option<Value> {
    use std::io::{BufRead, Write};
    let mut child = std::process::Command::new(toolgate())
        .arg("sandbox-worker")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let run = json!({"code": code, "input": null, "tools": [], "limits": {
        "timeout_ms": timeout_ms, "heap_bytes": 32 << 20, "stack_bytes": 1 << 20, "max_calls": 0,
        "max_log_bytes": 1000, "max_result_bytes": 1000, "max_args_bytes": 1000,
        "address_space_bytes": 512u64 << 20, "cpu_secs": 1}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{run}").unwrap();
    let done = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .find(|m| m["type"] == "done");
    drop(stdin);
    child.wait().unwrap();
    done
}

#[test]
fn sleeping_costs_no_cpu_time() {
    // Two and a half seconds asleep under a one-second CPU limit: the run finishes.
    let done = worker_with_one_cpu_second("await sleep(2500); return 'slept'", 60_000)
        .expect("a sleeping worker is not killed by RLIMIT_CPU");
    assert_eq!(
        (done["status"].as_str(), done["result"].as_str()),
        (Some("ok"), Some("slept")),
        "{done}"
    );
    // Work that needs far more than a CPU second is stopped by the limit (the kernel kills
    // the worker) long before its deadline, however loaded the machine is.
    let busy = worker_with_one_cpu_second(
        "let x = 0; for (let i = 0; i < 1e10; i++) { x += i } return x",
        60_000,
    );
    assert!(
        busy.is_none(),
        "a busy worker outlived its CPU limit: {busy:?}"
    );
}

#[tokio::test]
async fn workspace_files_are_private_and_a_link_out_of_the_workspace_is_never_followed() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, config) = setup(WORKSPACE);
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(
        &client,
        "await fs.writeFile('./workspace/notes/a.txt', 'private'); return 'ok'",
        "ok",
    )
    .await;
    assert_eq!(s["result"], "ok");
    let mode = |p: &str| std::fs::metadata(dir.path(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode("ws/local/notes/a.txt"),
        0o600,
        "files are the gateway user's only"
    );
    assert_eq!(mode("ws/local/notes"), 0o700);

    // Someone with access to the folder puts links in the principal's folder.
    std::fs::create_dir(dir.path("outside")).unwrap();
    std::fs::write(dir.path("outside/secret.txt"), "not yours").unwrap();
    std::os::unix::fs::symlink(dir.path("outside"), dir.path("ws/local/out")).unwrap();
    std::os::unix::fs::symlink(
        dir.path("outside/secret.txt"),
        dir.path("ws/local/notes/link.txt"),
    )
    .unwrap();
    let s = expect(
        &client,
        "const out = [];
         const tryIt = async (f) => { try { out.push(await f()) } catch (e) { out.push(e.code + ': ' + e.message) } };
         await tryIt(() => fs.writeFile('./workspace/out/planted.txt', 'x'));
         await tryIt(() => fs.readFile('./workspace/out/secret.txt'));
         await tryIt(() => fs.readFile('./workspace/notes/link.txt'));
         await tryIt(() => fs.writeFile('./workspace/notes/link.txt', 'x'));
         await tryIt(() => fs.rm('./workspace/out/secret.txt'));
         return out",
        "ok",
    )
    .await;
    let out: Vec<String> = s["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        out[0].starts_with("denied") && out[0].contains("symbolic link"),
        "a write through a link is refused, saying why: {out:?}"
    );
    assert!(
        !out[1].contains("not yours") && !out[2].contains("not yours"),
        "{out:?}"
    );
    assert!(out[3].starts_with("denied"), "{out:?}");
    assert!(
        !dir.path("outside/planted.txt").exists(),
        "nothing written outside"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path("outside/secret.txt")).unwrap(),
        "not yours",
        "nothing outside changed or removed"
    );
    client.cancel().await.unwrap();
}
