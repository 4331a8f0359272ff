"""Code mode's design, end to end with the official Python SDK in front of real servers
(filesystem, memory) and the toolgate fixture: the seed's own programs, run as written.

- A deployment poll that sleeps 5 s between tries (at a small scale: two or three tries).
- A sheet exported to ./workspace/leads.csv, worked through in batches across two runs
  and a gateway restart: the second run resumes from the workspace alone.
- A skill that imports nothing and calls tools, run with execute and from a program.
- A flow rule: an e-mail read from the CRM (memory) reaches the mail server (fixture) and
  is refused, naming the rule, on its way to the filesystem; the refusal is audited.
"""

from __future__ import annotations

import json
import subprocess
import time

import anyio
import pytest

from gateway import TEST_GATEWAY, Workspace, session, stdio_upstreams, text, write_config

pytestmark = pytest.mark.anyio


def config(work: Workspace, peers, servers: tuple[str, ...], code: str, extra_upstreams: dict | None = None):
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k in servers}
    ups.update(extra_upstreams or {})
    cfg = write_config(work.path("toolgate.toml"), ups, {**TEST_GATEWAY, "mode": "guided"})
    with open(cfg, "a") as f:
        f.write("\n[code]\nenabled = true\ntimeout_ms = 60000\n" + code)
    return cfg


def answer(r) -> dict:
    seen = text(r) + json.dumps(r.structured_content)
    assert not r.is_error, seen
    assert r.structured_content["status"] == "ok", seen
    return r.structured_content


POLL = """
for (let attempt = 1; attempt <= input.tries; attempt++) {
  try {
    const log = await tools.filesystem.read_text_file({path: input.log});
    if (log.content.includes("deployment finished")) return {deployed: true, attempt};
  } catch (e) {
    if (!(e instanceof ToolError)) throw e;
  }
  // A heartbeat in the workspace (the test waits for it), then five seconds to the next try.
  await fs.writeFile("./workspace/heartbeat", String(attempt));
  await sleep(5000);
}
return {deployed: false};
"""


async def test_a_poll_sleeps_five_seconds_between_tries_until_the_deployment_message_appears(toolgate_bin, peers, work):
    files = work.path("files")
    files.mkdir(exist_ok=True)
    log, heartbeat = files / "deploy.log", work.path("ws") / "local" / "heartbeat"
    cfg = config(work, peers, ("filesystem",), '\n[code.workspace]\ndir = "ws"\n')
    async with session("stdio", toolgate_bin, cfg, work, mode="guided") as client:
        result = {}

        async def run():
            result["r"] = await client.call_tool(
                "execute_code", {"code": POLL, "input": {"log": str(log), "tries": 4}})

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            # The first try found nothing and the program is asleep: the deployment finishes.
            with anyio.fail_after(60):
                while not heartbeat.exists() and "r" not in result:
                    await anyio.sleep(0.05)
            log.write_text("step 1\nstep 2\ndeployment finished\n")
        s = answer(result["r"])
        assert s["result"]["deployed"] is True, s
        # Found on a later try, after at least one sleep; the calls did not burn the limit.
        assert s["result"]["attempt"] >= 2, s
        assert len(s["calls"]) <= 2 * s["result"]["attempt"], s


SHEET_TO_CSV = """
let csv;
try {
  csv = await fs.readFile("./workspace/leads.csv");
} catch (e) {
  if (e.code !== "not_found") throw e;
  const sheet = await tools.filesystem.read_text_file({path: input.sheet});
  csv = sheet.content.trim().split("\\n").map(line => line.split("\\t").join(",")).join("\\n");
  await fs.writeFile("./workspace/leads.csv", csv);
}
const leads = csv.split("\\n").slice(1).map(l => { const [name, company] = l.split(","); return {name, company}; });
let done = 0;
try { done = JSON.parse(await fs.readFile("./workspace/progress.json")).done; } catch (e) {}
const batch = leads.slice(done, done + input.batch);
if (batch.length) {
  await tools.memory.create_entities({entities: batch.map(l => ({
    name: l.name, entityType: "lead", observations: [`works at ${l.company}`]}))});
}
done += batch.length;
await fs.writeFile("./workspace/progress.json", JSON.stringify({done}));
return {done, total: leads.length};
"""


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_sheet_becomes_a_csv_in_the_workspace_and_the_next_run_resumes_after_a_restart(transport, toolgate_bin, peers, work):
    files = work.path("files")
    files.mkdir(exist_ok=True)
    sheet = files / "leads.tsv"
    sheet.write_text("name\tcompany\nAda\tAnalytical\nBo\tBolt\nCy\tCyan\nDee\tDelta\n")
    cfg = config(work, peers, ("filesystem", "memory"), '\n[code.workspace]\ndir = "ws"\n')
    program = {"code": SHEET_TO_CSV, "input": {"sheet": str(sheet), "batch": 2}}

    async with session(transport, toolgate_bin, cfg, work, mode="guided") as client:
        s = answer(await client.call_tool("execute_code", program))
        assert s["result"] == {"done": 2, "total": 4}, s
        assert [c["server"] for c in s["calls"]] == ["filesystem", "memory"], s
    # The sheet changes afterwards: a resumed run must not read it again.
    sheet.write_text("name\tcompany\nZed\tZeta\n")

    async with session(transport, toolgate_bin, cfg, work, mode="guided") as client:
        s = answer(await client.call_tool("execute_code", program))
        assert s["result"] == {"done": 4, "total": 4}, s
        assert [c["server"] for c in s["calls"]] == ["memory"], "resumed from the workspace alone"
        r = await client.call_tool("execute", {"tool": "memory/open_nodes", "arguments": {"names": ["Ada", "Bo", "Cy", "Dee", "Zed"]}})
        graph = text(r) + json.dumps(r.structured_content)
        assert not r.is_error, graph
        for name in ("Ada", "Bo", "Cy", "Dee"):
            assert f'"{name}"' in graph, graph
        assert "Zed" not in json.dumps([e["name"] for e in r.structured_content["entities"]]), graph

    # The operator sees the same files; no session without a key has its own.
    out = subprocess.run([str(toolgate_bin), "workspace", "cat", "local", "leads.csv", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("name,company\nAda,Analytical\n"), out.stdout


SKILL_MD = """---
name: count-leads
description: Count the memory graph's entities of one type.
servers: [memory]
input_schema:
  type: object
  properties:
    type: {type: string}
  required: [type]
---
# count-leads
Reads the graph and counts; imports nothing.
"""
SKILL_JS = """const graph = await tools.memory.read_graph({});
return {count: graph.entities.filter(e => e.entityType === input.type).length};
"""


async def test_a_skill_that_imports_nothing_calls_tools(toolgate_bin, peers, work):
    memory = work.path("memory.jsonl")
    memory.write_text("\n".join(json.dumps({"type": "entity", "name": n, "entityType": t, "observations": []})
                                for n, t in [("Ada", "lead"), ("Bo", "lead"), ("Acme", "company")]))
    skill = work.path("skills") / "count-leads"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "skill.js").write_text(SKILL_JS)
    cfg = config(work, peers, ("memory",), f'skills_dir = "{work.path("skills")}"\n')
    async with session("stdio", toolgate_bin, cfg, work, mode="guided") as client:
        r = await client.call_tool("execute", {"tool": "skills/count-leads", "arguments": {"type": "lead"}})
        s = answer(r)
        assert s["result"] == {"count": 2}, s
        assert [(c["server"], c["tool"]) for c in s["calls"]] == [("memory", "read_graph")], s
        s = answer(await client.call_tool("execute_code", {
            "code": 'const a = await skills.run("count-leads", {type: "lead"});'
                    ' const b = await skills.run("count-leads", {type: "company"}); return [a.count, b.count]'}))
        assert s["result"] == [2, 1], s


MAIL_CATALOG = [{"server": "mail", "tool": {
    "name": "send_email", "description": "Send an e-mail.",
    "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
                    "required": ["to", "subject"]},
    # Unannotated, the policy (and code mode) would read it as destructive.
    "annotations": {"destructiveHint": False}}}]

FLOWS = """pii = true
allow_destructive = ["filesystem/write_file"]

[code.flows.crm-contacts]
classes = ["email", "phone"]
from = ["memory"]
to = ["mail"]
"""


async def test_a_flow_rule_lets_crm_contacts_reach_mail_and_never_the_filesystem(toolgate_bin, peers, work):
    work.path("memory.jsonl").write_text(json.dumps(
        {"type": "entity", "name": "Ada", "entityType": "contact", "observations": ["email: ada@example.org"]}))
    catalog = work.path("mail.json")
    catalog.write_text(json.dumps(MAIL_CATALOG))
    mail = {"mail": {"command": toolgate_bin, "args": ["fixture", "--catalog", catalog, "--server", "mail"]}}
    audit = work.path("audit.jsonl")
    cfg = config(work, peers, ("filesystem", "memory"), FLOWS + f'\n[policy.audit]\npath = "{audit}"\n', mail)
    files = work.path("files")
    leak = files / "leak.txt"

    async with session("stdio", toolgate_bin, cfg, work, mode="guided") as client:
        # Read from the CRM: the address reaches the model as a token.
        s = answer(await client.call_tool("execute_code", {"code":
            'const g = await tools.memory.open_nodes({names: ["Ada"]});'
            ' return g.entities[0].observations[0].replace("email: ", "")'}))
        token = s["result"]
        assert token.startswith("[[EMAIL:") and "ada@" not in json.dumps(s), s

        # The model passes the token on: mail may have it, the filesystem may not.
        s = answer(await client.call_tool("execute_code", {"input": {"to": token}, "code": """
            const sent = await tools.mail.send_email({to: input.to, subject: "hello"});
            let refused;
            try { await tools.filesystem.write_file({path: input.leak, content: input.to}); }
            catch (e) { refused = {code: e.code, message: e.message}; }
            return {mailed: sent.arguments.to === "ada@example.org", refused};
        """.replace("input.leak", json.dumps(str(leak)))}))
        assert s["result"]["mailed"] is True, s
        refused = s["result"]["refused"]
        assert refused["code"] == "denied", s
        assert 'flow rule "crm-contacts"' in refused["message"] and "mail only" in refused["message"], refused
        assert [(c["server"], c["ok"]) for c in s["calls"]] == [("mail", True), ("filesystem", False)], s
        assert not leak.exists()

        # Inside one run, the value itself (never a token) is held to the same rule.
        s = answer(await client.call_tool("execute_code", {"code": """
            const g = await tools.memory.open_nodes({names: ["Ada"]});
            const address = g.entities[0].observations[0].replace("email: ", "");
            try { await tools.filesystem.write_file({path: LEAK, content: `contact ${address}`}); return "written"; }
            catch (e) { return e.code; }
        """.replace("LEAK", json.dumps(str(leak)))}))
        assert s["result"] == "denied", s
        assert not leak.exists()

    # Both refusals are in the audit log as calls not made, naming the rule.
    records = [json.loads(l) for l in audit.read_text().splitlines()]
    refusals = [r for r in records if r.get("server") == "filesystem" and r.get("outcome") == "not_run"]
    assert [r.get("error") for r in refusals] == ["flow rule crm-contacts"] * 2, records
