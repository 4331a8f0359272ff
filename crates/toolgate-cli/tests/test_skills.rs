//! Skills end to end: a real gateway over stdio with real fixture upstreams and real
//! sandbox workers; skills written as folders, found by route, run by execute and by
//! `skills.run`, under the caller's authorization; drafts proposed from runs and approved
//! with the real `toolgate skill` command while the gateway keeps serving.

mod common;
use common::code::*;
use common::skills::*;
use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// A skill that calls `server/tool` and names `servers`.
fn calling_skill(dir: &TestDir, name: &str, servers: &str, body: &str) {
    let md = format!("---\nname: {name}\ndescription: Test skill {name} that calls tools.\nservers: {servers}\n---\n");
    write_skill(dir, name, &md, body);
}

fn skill_cli(config: &Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(toolgate())
        .arg("skill")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Routes `task` until the answer selects `name` (the gateway re-reads the folder on its
/// own schedule); the last answer either way.
async fn route_until_selected(client: &Client, task: &str, name: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        last = structured(&call(client, "route", json!({"task": task})).await);
        if last["decision"] == "select" && last["name"] == name {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

#[tokio::test]
async fn a_skill_is_found_by_route_and_run_by_execute() {
    let (_dir, config) = skills_setup("", "");
    let (client, _) = connect_stdio(&config, &[]).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"propose_skill".to_string()), "{names:?}");
    let info = client.peer_info().unwrap();
    assert!(info
        .instructions
        .as_deref()
        .unwrap_or("")
        .contains("skills.run"));

    // By its description: ranked among the tools (selected or offered as a candidate).
    let r = call(&client, "route", json!({"task": "greet a person by name"})).await;
    let s = structured(&r);
    let found = (s["decision"] == "select" && s["server"] == "skills" && s["name"] == "greet")
        || s["candidates"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["server"] == "skills" && c["name"] == "greet")
        });
    assert!(found, "{}", text(&r));

    // By its exact name, then run with the selection.
    let r = call(&client, "route", json!({"task": "skills/greet"})).await;
    let s = structured(&r);
    assert_eq!(
        (s["decision"].as_str(), s["kind"].as_str()),
        (Some("select"), Some("skill")),
        "{}",
        text(&r)
    );
    assert_eq!(
        s["inputSchema"]["parameters"].as_array().map(Vec::len),
        Some(1),
        "{s}"
    );
    let r = call(
        &client,
        "execute",
        json!({"selectionId": s["selectionId"], "arguments": {"who": "Ada"}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(
        (s["status"].as_str(), s["skill"].as_str()),
        (Some("ok"), Some("greet"))
    );
    assert_eq!(s["result"], json!({"said": "hi Ada"}));
    assert_eq!(s["calls"][0]["server"], "alpha");
    assert_eq!(s["calls"][0]["tool"], "echo");

    // The input is validated against the skill's input_schema before anything runs.
    let r = call(
        &client,
        "execute",
        json!({"tool": "skills/greet", "arguments": {"who": 7}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(structured(&r)["error"], "invalid_arguments", "{}", text(&r));
    assert!(text(&r).contains("who"), "{}", text(&r));

    // A declaration for programs.
    let r = call(
        &client,
        "route",
        json!({"task": "skills/greet", "detail": "typescript"}),
    )
    .await;
    let ts = structured(&r)["inputSchema"]["typescript"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        ts.contains("declare namespace skills") && ts.contains("function run(name: \"greet\""),
        "{ts}"
    );
    assert!(ts.contains("who: string;"), "{ts}");
}

#[tokio::test]
async fn programs_run_skills_with_skills_run() {
    let (dir, config) = skills_setup("", "");
    calling_skill(
        &dir,
        "outer",
        "[alpha]",
        "const g = await skills.run('greet', {who: input.name}); return g.said + '!';",
    );
    calling_skill(
        &dir,
        "forever",
        "[]",
        "return await skills.run('forever', {});",
    );
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = expect(
        &client,
        "return await skills.run('greet', {who: 'Bob'})",
        "ok",
    )
    .await;
    assert_eq!(s["result"], json!({"said": "hi Bob"}));
    assert_eq!(
        s["calls"],
        json!([{"server": "skills", "tool": "greet", "ok": true, "ms": s["calls"][0]["ms"]}])
    );
    // Skills can run skills.
    let s = expect(
        &client,
        "return await skills.run('outer', {name: 'Cy'})",
        "ok",
    )
    .await;
    assert_eq!(s["result"], "hi Cy!");
    // But not without end: a skill that runs itself stops at the depth limit.
    let s = expect(
        &client,
        "try { await skills.run('forever', {}); } catch (e) { return [e.code, e.message]; }",
        "ok",
    )
    .await;
    assert_eq!(s["result"][0], "limit", "{s}");
    assert!(
        s["result"][1].as_str().unwrap().contains("levels deep"),
        "{s}"
    );
    // Failures are ToolErrors the program can catch.
    let s = expect(
        &client,
        "const out = [];
for (const [n, i] of [['greet', {}], ['greet', 'text'], ['nope', {}]]) {
  try { await skills.run(n, i); out.push('ran'); } catch (e) { out.push([e.name, e.code]); }
}
return out;",
        "ok",
    )
    .await;
    assert_eq!(
        s["result"],
        json!([
            ["ToolError", "invalid_arguments"],
            ["ToolError", "invalid_arguments"],
            ["ToolError", "denied"]
        ])
    );
}

#[tokio::test]
async fn a_skill_whose_servers_are_missing_is_not_offered() {
    let (dir, config) = skills_setup("", "");
    calling_skill(&dir, "needs-delta", "[alpha, delta]", "return 1");
    let (client, _) = connect_stdio(&config, &[]).await;
    // Control: a skill whose servers are up is offered.
    assert_eq!(
        route_until_selected(&client, "skills/greet", "greet").await["name"],
        "greet"
    );
    let r = call(&client, "route", json!({"task": "skills/needs-delta"})).await;
    let s = structured(&r);
    assert!(
        s["decision"] != "select" || s["name"] != "needs-delta",
        "{}",
        text(&r)
    );
    assert!(!text(&r).contains("needs-delta"), "{}", text(&r));
    let r = call(
        &client,
        "execute",
        json!({"tool": "skills/needs-delta", "arguments": {}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).contains("delta") && text(&r).contains("not connected"),
        "{}",
        text(&r)
    );
    let s = expect(
        &client,
        "try { await skills.run('needs-delta', {}); return 'ran'; } catch (e) { return e.code; }",
        "ok",
    )
    .await;
    assert_eq!(s["result"], "denied");
}

#[tokio::test]
async fn a_skill_whose_servers_the_profile_hides_is_not_offered() {
    let (dir, config) = skills_setup(
        "",
        "[policy.profiles.nobeta]\ntools = [\"alpha/*\", \"gamma/*\"]\n",
    );
    calling_skill(
        &dir,
        "beta-report",
        "[beta]",
        "return await tools.beta.status({});",
    );
    // Without the profile it is offered.
    let (open, _) = connect_stdio(&config, &[]).await;
    let s = route_until_selected(&open, "skills/beta-report", "beta-report").await;
    assert_eq!(s["name"], "beta-report", "{s}");
    let (narrow, _) = connect_stdio(&config, &["--profile", "nobeta"]).await;
    assert_eq!(
        route_until_selected(&narrow, "skills/greet", "greet").await["name"],
        "greet"
    );
    let r = call(&narrow, "route", json!({"task": "skills/beta-report"})).await;
    assert!(!text(&r).contains("beta-report"), "{}", text(&r));
    let r = call(
        &narrow,
        "execute",
        json!({"tool": "skills/beta-report", "arguments": {}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    // Refused as unknown: the hidden server is not named.
    assert!(text(&r).contains("no skill named"), "{}", text(&r));
}

fn key_hash(key: &str) -> String {
    let h = toolgate::hash_key(key);
    format!(
        "sha256:{}",
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[tokio::test]
async fn a_skill_runs_with_the_callers_authorization() {
    // `echo-only` may call alpha/echo and nothing else.
    let policy = format!(
        "[policy.keys.echo-only]\nhash = \"{}\"\nscopes = [\"alpha/echo\"]\ntier = \"write\"\n",
        key_hash("tg_echo_only_key_for_tests")
    );
    let (dir, config) = skills_setup("", &policy);
    // `tools.call`, since `tools.alpha.add_numbers` does not even exist for a key that may not call it.
    calling_skill(
        &dir,
        "sum",
        "[alpha]",
        "return await tools.call('alpha', 'add_numbers', {a: 1, b: 2});",
    );
    calling_skill(
        &dir,
        "sneaky",
        "[alpha]",
        "return await tools.call('beta', 'status', {});",
    );

    let (limited, _) = connect_stdio(&config, &["--key", "echo-only"]).await;
    // A skill using only what the key allows runs.
    let r = call(
        &limited,
        "execute",
        json!({"tool": "skills/greet", "arguments": {"who": "Di"}}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "ok", "{}", text(&r));
    // One whose call the key does not allow fails with `denied`, from execute and from a program.
    let r = call(
        &limited,
        "execute",
        json!({"tool": "skills/sum", "arguments": {}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        (s["status"].as_str(), s["error"]["code"].as_str()),
        (Some("error"), Some("denied")),
        "{}",
        text(&r)
    );
    let s = expect(
        &limited,
        "try { await skills.run('sum', {}); return 'ran'; } catch (e) { return [e.code, e.message.includes('alpha/add_numbers')]; }",
        "ok",
    )
    .await;
    assert_eq!(s["result"], json!(["denied", true]), "{s}");

    // The same skill under a key that allows the call runs: it is the caller's authority.
    let (full, _) = connect_stdio(&config, &[]).await;
    let r = call(
        &full,
        "execute",
        json!({"tool": "skills/sum", "arguments": {}}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "ok", "{}", text(&r));
    // And even then a skill reaches only the servers it names.
    let r = call(
        &full,
        "execute",
        json!({"tool": "skills/sneaky", "arguments": {}}),
    )
    .await;
    assert_eq!(structured(&r)["error"]["code"], "denied", "{}", text(&r));
}

#[tokio::test]
async fn a_proposed_skill_is_a_draft_until_an_operator_approves_it() {
    let (dir, config) = skills_setup("", "");
    let (client, _) = connect_stdio(&config, &[]).await;
    let code = "const r = await tools.alpha.echo({message: input.text.toUpperCase()}); return r.arguments.message;";
    let r = call(
        &client,
        "execute_code",
        json!({"code": code, "input": {"text": "hey"}}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["result"], "HEY", "{}", text(&r));
    let run_id = s["runId"].as_str().expect("a runId").to_string();
    assert!(text(&r).contains(&run_id));

    let propose = |name: &str, id: &str| {
        json!({"runId": id, "name": name, "description": "Shout a text back in capitals through echo.",
               "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}})
    };
    // Names that could leave the folder, failed runs and unknown runs are refused.
    for (args, expect) in [
        (propose("../evil", &run_id), "not a skill name"),
        (propose(".drafts", &run_id), "not a skill name"),
        (propose("greet", &run_id), "already approved"),
        (propose("shout", "run-0000"), "no run"),
    ] {
        let r = call(&client, "propose_skill", args).await;
        assert_eq!(r.is_error, Some(true), "{}", text(&r));
        assert!(text(&r).contains(expect), "{}", text(&r));
    }
    let failed = structured(
        &call(
            &client,
            "execute_code",
            json!({"code": "throw new Error('no')"}),
        )
        .await,
    );
    let r = call(
        &client,
        "propose_skill",
        propose("shout", failed["runId"].as_str().unwrap()),
    )
    .await;
    assert!(text(&r).contains("succeeded"), "{}", text(&r));

    let r = call(&client, "propose_skill", propose("shout", &run_id)).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(structured(&r)["servers"], json!(["alpha"]));
    let draft = dir.path("skills").join(".drafts").join("shout");
    assert_eq!(
        std::fs::read_to_string(draft.join("skill.js")).unwrap(),
        code
    );
    assert!(!dir.path("evil").exists() && !dir.path("skills/evil").exists());

    // A draft is not served.
    let r = call(
        &client,
        "execute",
        json!({"tool": "skills/shout", "arguments": {"text": "a"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let (ok, out) = skill_cli(&config, &["list"]);
    assert!(
        ok && out.contains("shout") && out.contains("draft") && out.contains("greet"),
        "{out}"
    );
    let (ok, out) = skill_cli(&config, &["show", "shout"]);
    assert!(
        ok && out.contains("toUpperCase") && out.contains("description:"),
        "{out}"
    );

    // Approved: the running gateway serves it without a restart.
    let (ok, out) = skill_cli(&config, &["approve", "shout"]);
    assert!(ok, "{out}");
    assert!(!draft.exists() && dir.path("skills/shout/SKILL.md").exists());
    let s = route_until_selected(&client, "skills/shout", "shout").await;
    assert_eq!(s["name"], "shout", "{s}");
    let r = call(
        &client,
        "execute",
        json!({"selectionId": s["selectionId"], "arguments": {"text": "quiet"}}),
    )
    .await;
    assert_eq!(structured(&r)["result"], "QUIET", "{}", text(&r));

    // An approved skill is never overwritten: not by a proposal, not by approving a draft.
    let r = call(&client, "propose_skill", propose("shout", &run_id)).await;
    assert!(text(&r).contains("already approved"), "{}", text(&r));
    let (ok, out) = skill_cli(&config, &["approve", "../greet"]);
    assert!(!ok && out.contains("not a skill name"), "{out}");
    let (ok, out) = skill_cli(&config, &["reject", "nothing"]);
    assert!(!ok && out.contains("no draft"), "{out}");
}

#[tokio::test]
async fn the_sandbox_cannot_write_a_skill() {
    let (dir, config) = skills_setup("", "");
    let (client, _) = connect_stdio(&config, &[]).await;
    let before = std::fs::read_dir(dir.path("skills")).unwrap().count();
    let s = expect(
        &client,
        "const out = {
  skills: Object.getOwnPropertyNames(skills),
  frozen: Object.isFrozen(skills),
  servers: Object.keys(tools),
  globals: [typeof require, typeof std, typeof os, typeof fetch, typeof propose_skill],
};
try { skills.write = () => 1; } catch (e) { out.assign = e.name; }
for (const name of ['propose_skill', 'propose', 'approve']) {
  try { await tools.call('skills', name, {runId: 'x', name: 'evil', description: 'x'}); out[name] = 'ran'; }
  catch (e) { out[name] = e.code; }
}
return out;",
        "ok",
    )
    .await;
    let r = &s["result"];
    assert_eq!(r["skills"], json!(["run"]), "{s}");
    assert_eq!(r["frozen"], true);
    assert_eq!(r["servers"], json!(["alpha", "beta", "gamma"]));
    assert_eq!(
        r["globals"],
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ])
    );
    assert_eq!(r["assign"], "TypeError");
    for name in ["propose_skill", "propose", "approve"] {
        assert_eq!(r[name], "denied", "{s}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path("skills")).unwrap().count(),
        before
    );
    assert!(!dir.path("skills/.drafts").exists());
}

#[tokio::test]
async fn a_bad_skill_is_reported_and_the_rest_keep_working() {
    let (dir, config) = skills_setup("", "");
    write_skill(
        &dir,
        "broken",
        "name: broken\n(no front matter)\n",
        "return 1",
    );
    let (client, _) = connect_stdio(&config, &[]).await;
    let s = route_until_selected(&client, "skills/greet", "greet").await;
    let r = call(
        &client,
        "execute",
        json!({"selectionId": s["selectionId"], "arguments": {"who": "Ed"}}),
    )
    .await;
    assert_eq!(
        structured(&r)["result"],
        json!({"said": "hi Ed"}),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "execute",
        json!({"tool": "skills/broken", "arguments": {}}),
    )
    .await;
    assert!(
        text(&r).contains("no skill named \"broken\""),
        "{}",
        text(&r)
    );

    let out = std::process::Command::new(toolgate())
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("1 ready, 1 skipped"), "{stdout}");
    let md = dir.path("skills").join("broken").join("SKILL.md");
    assert!(
        stdout.contains(&format!("{}: no front matter", md.display())),
        "{stdout}"
    );
    let (ok, out) = skill_cli(&config, &["list"]);
    assert!(
        !ok && out.contains("no front matter") && out.contains("greet"),
        "{out}"
    );
}

#[tokio::test]
async fn the_skills_name_is_reserved_and_skills_need_code_mode() {
    let dir = TestDir::new();
    let config = dir.config(
        "mode = \"guided\"",
        &[
            "[code]\nenabled = true\nskills_dir = \"skills\"\n".into(),
            dir.stdio_upstream("skills", "alpha", &[]),
        ],
    );
    let out = std::process::Command::new(toolgate())
        .args(["tools", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("upstreams.skills") && err.contains("reserved"),
        "{err}"
    );

    // Without code mode there is nothing to run a skill with: no propose_skill, no skills.
    let (dir, config) = skills_setup("", "");
    let text_ = std::fs::read_to_string(&config)
        .unwrap()
        .replace("enabled = true", "enabled = false");
    std::fs::write(&config, text_).unwrap();
    let (client, _) = connect_stdio(&config, &[]).await;
    assert!(!tool_names(&client)
        .await
        .contains(&"propose_skill".to_string()));
    let r = call(&client, "route", json!({"task": "skills/greet"})).await;
    assert_ne!(structured(&r)["name"], "greet", "{}", text(&r));
    drop(dir);
}
