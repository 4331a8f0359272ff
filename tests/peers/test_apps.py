"""MCP Apps (the `io.modelcontextprotocol/ui` extension) through the gateway, with a real app
server from npm: @modelcontextprotocol/server-basic-vanillajs, whose `get-time` tool names
its UI (`_meta.ui.resourceUri`, a `ui://` resource of type `text/html;profile=mcp-app`).

Direct mode passes the app through (the tool's `_meta.ui`, in the raw and the slim listing;
the `ui://` resource, read whole). Guided mode returns the tool's UI with execute's result,
and serves the app's own calls (`tools/call` by the server's tool name, as a host sends
what the app asks) through the same gate as execute: a key that may not call the tool is
refused both ways, and both refusals are audited.

    .peers/py/bin/pytest tests/peers/test_apps.py
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import anyio
import pytest

from gateway import Peers, Workspace, stdio_session, stdio_upstreams, write_config

pytestmark = pytest.mark.anyio

APP_URI = "ui://get-time/mcp-app.html"
APP_MIME = "text/html;profile=mcp-app"


def app_server(peers: Peers) -> dict:
    script = peers.node_script("server-basic-vanillajs")
    if not script.exists():
        pytest.fail(f"{script} is missing: run .ci/run (it installs the npm peers)", pytrace=False)
    return {"command": peers.node, "args": [str(script), "--stdio"], "connect_timeout_secs": 60}


def config(peers: Peers, work: Workspace, extra: str = "") -> Path:
    # The time server beside it: a server without apps, whose tools stay unknown by name
    # on the guided surface.
    upstreams = {"clock": app_server(peers), "time": stdio_upstreams(peers, work)["time"]}
    # The first listing waits for both (a loaded machine starts the time server in over 1 s).
    path = write_config(work.path("toolgate.toml"), upstreams, {"startup_wait_ms": 30000})
    with path.open("a") as f:
        f.write(extra)
    return path


def ui_of(meta) -> dict:
    return (meta or {}).get("ui") or {}


@pytest.mark.parametrize("profile", ["raw", "slim"])
async def test_direct_mode_passes_an_app_through(profile: str, toolgate_bin: Path, peers: Peers, work: Workspace):
    toml = config(peers, work, f'\n[direct]\nprofile = "{profile}"\n')
    with anyio.fail_after(120):
        async with stdio_session(toolgate_bin, toml, work, mode="direct") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert ui_of(tools["clock_get-time"].meta).get("resourceUri") == APP_URI, tools["clock_get-time"]
            assert not (tools["time_get_current_time"].meta or {}).get("ui")

            resources = {str(r.uri): r for r in (await client.list_resources()).resources}
            assert resources[APP_URI].mime_type == APP_MIME, resources
            read = await client.read_resource(APP_URI)
            [page] = read.contents
            assert page.mime_type == APP_MIME and "<html" in page.text and "</html>" in page.text

            # The model's call by the exposed name, and the app's by the server's own name.
            for name in ("clock_get-time", "get-time"):
                r = await client.call_tool(name, {})
                assert not r.is_error, r
                assert set(r.structured_content) == {"time"}, r.structured_content


async def test_guided_mode_returns_the_ui_with_executes_result_and_serves_the_apps_calls(
    toolgate_bin: Path, peers: Peers, work: Workspace
):
    toml = config(peers, work)
    with anyio.fail_after(120):
        async with stdio_session(toolgate_bin, toml, work, mode="guided") as client:
            r = await client.call_tool("execute", {"tool": "clock_get-time", "arguments": {}})
            assert not r.is_error, r
            assert ui_of(r.meta).get("resourceUri") == APP_URI, r.meta
            assert r.meta["toolgate/tool"] == "clock_get-time"
            # What the app reads is the tool's own structured content, nothing added.
            assert set(r.structured_content) == {"time"}, r.structured_content

            # A tool without an app: no UI in the answer.
            r = await client.call_tool("execute", {"tool": "time_get_current_time", "arguments": {"timezone": "UTC"}})
            assert not r.is_error, r
            assert not ui_of(r.meta)

            # The app calls its server's tools by name; the host passes them on.
            for name in ("get-time", "clock/get-time", "clock_get-time"):
                r = await client.call_tool(name, {})
                assert not r.is_error, (name, r)
                assert set(r.structured_content) == {"time"}
            # Another server's tool is still not callable by name on the guided surface.
            r = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
            assert r.is_error and "guided mode" in r.content[0].text, r

            # The UI resource itself is listed and read on the guided surface too.
            read = await client.read_resource(APP_URI)
            assert read.contents[0].mime_type == APP_MIME


async def test_an_apps_calls_pass_the_same_gate_as_execute(toolgate_bin: Path, peers: Peers, work: Workspace):
    audit = work.path("audit.jsonl")
    digest = hashlib.sha256(b"viewer-token").hexdigest()
    toml = config(
        peers,
        work,
        f"""
[policy]
stdio_key = "viewer"

[policy.audit]
path = "{audit}"

[policy.keys.viewer]
hash = "sha256:{digest}"
scopes = ["time/*"]
""",
    )
    with anyio.fail_after(120):
        async with stdio_session(toolgate_bin, toml, work, mode="guided") as client:
            by_execute = await client.call_tool("execute", {"tool": "clock_get-time", "arguments": {}})
            by_app = await client.call_tool("get-time", {})
            allowed = await client.call_tool("execute", {"tool": "time_get_current_time", "arguments": {"timezone": "UTC"}})
    assert by_execute.is_error and by_app.is_error, (by_execute, by_app)
    for r in (by_execute, by_app):
        text = " ".join(c.text for c in r.content if c.type == "text")
        assert "scope" in text and "clock/get-time" in text, text
    assert not allowed.is_error, allowed

    records = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
    refused = [r for r in records if (r.get("server"), r.get("tool"), r.get("decision")) == ("clock", "get-time", "refused")]
    assert len(refused) == 2 and {r["code"] for r in refused} == {"scope"}, records
