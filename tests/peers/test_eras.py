"""Both protocol eras through one gateway, driven by the official Python SDK (mcp 2.3):
a client pinned to 2026-07-28 (stateless: no initialize, no session) and a legacy one
(initialize, Mcp-Session-Id) at the same time, each running route -> execute -> continue
over a paged result from the real filesystem server; a handle is the caller's, so the
modern client's cursor also works from a fresh modern client, and its calls are the plain
kind the HTTP front's fast lane answers. And a server that speaks
only 2026-07-28 (the SDK's modern loop, over stdio) behind the gateway: listed and called.
"""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

import anyio
import pytest
from mcp import Client

from gateway import START_TIMEOUT, http_gateway, sdk_client, stdio_session, text, write_config

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent


def filesystem(peers, work) -> dict:
    files = work.path("files")
    files.mkdir(exist_ok=True)
    # About 25,000 tokens: several pages at the default budget.
    lines = [f"line {i:05d}: the quick brown fox jumps over the lazy dog" for i in range(1500)]
    (files / "big.txt").write_text("\n".join(lines) + "\n")
    return {
        "command": peers.node,
        "args": [peers.node_script("server-filesystem"), files],
        "connect_timeout_secs": START_TIMEOUT,
        "call_timeout_secs": 60,
    }


async def route_execute_continue(client: Client, path: Path) -> tuple[list[str], str]:
    """The guided loop over one paged result; returns the first two pages' text and the
    first cursor."""
    routed = await client.call_tool("route", {"task": "filesystem/read_text_file"})
    assert not routed.is_error, text(routed)
    routed = routed.structured_content
    assert routed["decision"] == "select", routed
    first = await client.call_tool("execute", {"selectionId": routed["selectionId"], "arguments": {"path": str(path)}})
    assert not first.is_error, text(first)
    shown = first.structured_content
    # A slow machine may turn the read into an operation: follow it to its first page.
    for _ in range(60):
        if "operationId" not in shown:
            break
        waited = await client.call_tool("continue", {"operationId": shown["operationId"]})
        assert not waited.is_error, text(waited)
        shown = waited.structured_content
    assert "nextCursor" in shown, (shown, text(first)[:500])
    cursor = shown["nextCursor"]
    # What a client that shows only structuredContent gives the model: the page itself.
    assert "line 00000" in shown["text"], shown
    nxt = await client.call_tool("continue", {"cursor": cursor})
    assert not nxt.is_error, text(nxt)
    assert "line 0" in nxt.structured_content["text"] and "line 00000" not in nxt.structured_content["text"]
    return [shown["text"], nxt.structured_content["text"]], cursor


async def test_a_modern_and_a_legacy_client_at_once(toolgate_bin, peers, work):
    config = write_config(
        work.path("toolgate.toml"),
        {"filesystem": filesystem(peers, work)},
        {"mode": "guided", "startup_wait_ms": int(START_TIMEOUT * 1000)},
    )
    big = work.path("files") / "big.txt"
    async with http_gateway(toolgate_bin, config, work, mode="guided") as gw:
        url = gw.wait_endpoint()
        results: dict[str, tuple] = {}

        async def run(mode: str) -> None:
            async with sdk_client(url, era=mode) as client:
                results[mode] = await route_execute_continue(client, big)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "2026-07-28")
            tg.start_soon(run, "legacy")
        # The same pages in both eras (the notes after them name each client's own cursor).
        page = lambda mode, n: results[mode][0][n].split("\n[toolgate]")[0]  # noqa: E731
        assert page("2026-07-28", 0) == page("legacy", 0)
        assert page("2026-07-28", 1) == page("legacy", 1)
        # The cursor is the caller's (here the local identity), not a session's: a fresh
        # modern client continues where the first one left off.
        async with sdk_client(url, era="2026-07-28") as again:
            r = await again.call_tool("continue", {"cursor": results["2026-07-28"][1]})
            assert not r.is_error, text(r)
        # The SDK's 2026-07-28 calls are plain: the HTTP front's fast lane answered them
        # (route, execute, at least one continue, and the last continue); a legacy
        # session's never take it.
        metrics = urllib.request.urlopen(url.rsplit("/mcp", 1)[0] + "/metrics").read().decode()
        lane = [line for line in metrics.splitlines() if line.startswith("toolgate_fast_lane_requests_total ")]
        assert lane and float(lane[0].split()[1]) >= 4, lane


async def test_a_modern_only_upstream_is_listed_and_called(toolgate_bin, peers, work):
    server = HERE / "servers" / "modern_only.py"
    config = write_config(
        work.path("toolgate.toml"),
        {"modern": {"command": sys.executable, "args": [server], "connect_timeout_secs": START_TIMEOUT}},
        {"mode": "direct", "startup_wait_ms": int(START_TIMEOUT * 1000)},
    )
    async with stdio_session(toolgate_bin, config, work, mode="direct") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        assert "modern_shout" in tools, tools
        r = await client.call_tool("modern_shout", {"text": "hello"})
        assert not r.is_error, text(r)
        assert "HELLO" in text(r)
