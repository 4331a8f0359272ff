"""The CLI and configuration paths with real servers: `toolgate check`, `toolgate tools`,
an mcpServers JSON file instead of TOML, a broken upstream beside working ones, and
several HTTP sessions sharing one gateway's upstreams."""

from __future__ import annotations

import json
import subprocess

import anyio
import pytest

from gateway import (
    exposed_name,
    MARKER_VAR,
    TEST_GATEWAY,
    all_tools,
    http_client,
    http_gateway,
    stdio_session,
    stdio_upstreams,
    text,
    write_config,
)

pytestmark = pytest.mark.anyio

# What each server lists (to a client declaring no sampling, elicitation or roots).
# everything lists 16 tools to a client that declares sampling, elicitation and roots, as
# toolgate's upstream client does (13 otherwise).
TOOL_COUNTS = {"everything": 16, "filesystem": 14, "memory": 9, "time": 2, "git": 12}


def run(toolgate_bin, work, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(toolgate_bin), *args], capture_output=True, text=True, timeout=timeout,
                          env=work.env(marker=work.child_marker()), cwd=work.dir, stdin=subprocess.DEVNULL)


async def test_check_and_tools_report_every_real_server(toolgate_bin, peers, work, repo, reference_tools):
    cfg = write_config(work.path("toolgate.toml"), stdio_upstreams(peers, work), TEST_GATEWAY)
    p = run(toolgate_bin, work, "check", "--config", str(cfg), "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["upstream"]: r for r in map(json.loads, p.stdout.splitlines()) if "upstream" in r}
    assert {k: (r["status"], r["tools"]) for k, r in rows.items()} == {k: ("ready", n) for k, n in TOOL_COUNTS.items()}
    assert "everything" in rows["everything"]["detail"] and "2025-11-25" in rows["everything"]["detail"]

    p = run(toolgate_bin, work, "tools", "--config", str(cfg), "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert sorted((r["server"], r["tool"], r["exposed"]) for r in rows) == sorted(
        (s, t["name"], exposed_name(s, t["name"])) for s, tools in reference_tools.items() for t in tools)


def test_a_broken_upstream_does_not_take_the_others_down(toolgate_bin, peers, work):
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k in ("time", "memory")}
    ups["broken"] = {"command": str(work.path("no-such-server")), "connect_timeout_secs": 10}
    ups["crashing"] = {"command": peers.node, "args": ["-e", "process.exit(3)"], "connect_timeout_secs": 10}
    cfg = write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)
    p = run(toolgate_bin, work, "check", "--config", str(cfg), "--json")
    assert p.returncode == 1, p.stdout + p.stderr
    rows = {r["upstream"]: r for r in map(json.loads, p.stdout.splitlines()) if "upstream" in r}
    assert rows["time"]["status"] == "ready" and rows["memory"]["status"] == "ready"
    assert rows["broken"]["status"] == "down" and "no-such-server" in rows["broken"]["detail"]
    assert rows["crashing"]["status"] == "down" and "initialize" in rows["crashing"]["detail"]


async def test_mcp_json_import_serves_the_same_servers(toolgate_bin, peers, work, repo, reference_tools):
    """The same servers described in a Claude-style mcpServers file (`--mcp-json`), merged
    into a TOML file that holds only the [gateway] table."""
    servers = {}
    for name, up in stdio_upstreams(peers, work).items():
        servers[name] = {"command": str(up["command"]), "args": [str(a) for a in up["args"]]}
        # Children start with a minimal environment: pass the leftover check's marker on.
        servers[name]["env"] = {**up.get("env", {}), MARKER_VAR: "${" + MARKER_VAR + "}"}
    mcp_json = work.path(".mcp.json")
    mcp_json.write_text(json.dumps({"mcpServers": servers}))
    cfg = write_config(work.path("toolgate.toml"), {}, TEST_GATEWAY)
    async with stdio_session(toolgate_bin, cfg, work, extra=["--mcp-json", str(mcp_json)]) as client:
        names = sorted(t.name for t in await all_tools(client))
        r = await client.call_tool("memory_create_entities", {"entities": [
            {"name": "from-json", "entityType": "test", "observations": ["imported"]}]})
    assert names == sorted(exposed_name(s, t["name"]) for s, tools in reference_tools.items() for t in tools)
    assert not r.is_error, text(r)
    # The env of the imported entry reached the server: it wrote the file it was given.
    assert "from-json" in work.path("memory.jsonl").read_text()


async def test_http_sessions_share_the_upstreams(toolgate_bin, peers, work):
    """Two HTTP sessions (on /mcp and /mcp/direct) at once: both see every tool, and what one
    stores in the memory server the other reads back (one upstream process, shared)."""
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k in ("memory", "time")}
    cfg = write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)
    entity = f"Shared-{work.marker}"
    async with http_gateway(toolgate_bin, cfg, work) as gw:
        async with http_client(gw.url) as a, http_client(f"{gw.base}/mcp/direct") as b:
            names_a = sorted(t.name for t in await all_tools(a))
            names_b = sorted(t.name for t in await all_tools(b))
            assert names_a == names_b and len(names_a) == TOOL_COUNTS["memory"] + TOOL_COUNTS["time"]
            r = await a.call_tool("memory_create_entities", {"entities": [
                {"name": entity, "entityType": "test", "observations": ["from session a"]}]})
            assert not r.is_error, text(r)
            r = await b.call_tool("memory_open_nodes", {"names": [entity]})
            assert not r.is_error, text(r)
            assert json.loads(text(r))["entities"][0]["observations"] == ["from session a"]
            # Calls from both sessions at once.
            results = {}

            async def tokyo(client, key: str, hour: int) -> None:
                r = await client.call_tool("time_convert_time", {
                    "source_timezone": "UTC", "time": f"{hour:02d}:15", "target_timezone": "Asia/Tokyo"})
                results[key] = r.structured_content["target"]["datetime"]

            async with anyio.create_task_group() as tg:
                for h in range(6):
                    tg.start_soon(tokyo, a, f"a{h}", h)
                    tg.start_soon(tokyo, b, f"b{h}", h + 6)
            for h in range(6):
                assert f"T{h + 9:02d}:15:00" in results[f"a{h}"]
                assert f"T{h + 15:02d}:15:00" in results[f"b{h}"]
        memory_servers = [p for p in work.leftovers(gw.marker) if "server-memory" in p]
        assert len(memory_servers) == 1, memory_servers
