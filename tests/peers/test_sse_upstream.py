"""A legacy HTTP+SSE server (protocol 2024-11-05: `GET /sse`, `POST /message`) as an
upstream: the reference @modelcontextprotocol/server-everything in its `sse` mode, named
with `transport = "sse"` and found by the fallback when `transport` is left out. The whole
protocol passes (progress, sampling, elicitation, resources and their updates, prompts,
through `test_protocol.exercise`), and a server that restarts is used again without
restarting the gateway.

    .peers/py/bin/pytest tests/peers/test_sse_upstream.py
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from conftest import start_everything, stop_process
from gateway import Peers, Workspace, write_config
from test_protocol import Recorder, exercise, session_over, text_of

pytestmark = pytest.mark.anyio


def gateway_params(toolgate_bin: Path, config: Path, work: Workspace) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(toolgate_bin),
        args=["serve", "--stdio", "--config", str(config)],
        env={**work.env(), "XDG_STATE_HOME": str(work.path("state"))},
        cwd=str(work.dir),
    )


def check(toolgate_bin: Path, config: Path, work: Workspace) -> subprocess.CompletedProcess:
    """`toolgate check` of `config`, with this test's state folder."""
    return subprocess.run(
        [str(toolgate_bin), "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**work.env(), "XDG_STATE_HOME": str(work.path("state"))},
    )


@pytest.mark.parametrize("named", [True, False], ids=["transport-sse", "detected"])
async def test_the_whole_protocol_through_a_legacy_sse_server(named: bool, toolgate_bin: Path, peers: Peers, work: Workspace):
    proc, port = start_everything(work, peers, "sse")
    try:
        table = {"url": f"http://127.0.0.1:{port}/sse", "connect_timeout_secs": 30}
        if named:
            table["transport"] = "sse"
        config = write_config(work.path("toolgate.toml"), {"everything": table}, {"mode": "direct"})

        # `toolgate check` says which transport the server speaks.
        checked = check(toolgate_bin, config, work)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        row = next(line for line in checked.stdout.splitlines() if line.startswith("everything "))
        assert " ready " in row and "HTTP+SSE" in row, checked.stdout

        recorder = Recorder()
        with anyio.fail_after(120):
            async with stdio_client(gateway_params(toolgate_bin, config, work)) as streams, session_over(streams, recorder) as session:
                await exercise(session, recorder)
    finally:
        stop_process(proc)


async def call_echo(session, message: str) -> tuple[bool, str]:
    """(succeeded, text) of one echo call; a protocol error counts as a failure."""
    try:
        result = await session.call_tool("everything_echo", {"message": message})
    except MCPError as e:
        return False, str(e)
    return not result.is_error, text_of(result)


async def test_a_legacy_sse_server_that_restarts_is_used_again(toolgate_bin: Path, peers: Peers, work: Workspace):
    proc, port = start_everything(work, peers, "sse")
    try:
        config = write_config(
            work.path("toolgate.toml"),
            {"everything": {"url": f"http://127.0.0.1:{port}/sse", "transport": "sse", "call_timeout_secs": 10}},
            {"mode": "direct"},
        )
        with anyio.fail_after(120):
            async with stdio_client(gateway_params(toolgate_bin, config, work)) as streams, session_over(streams, Recorder()) as session:
                ok, got = await call_echo(session, "before")
                assert ok and "before" in got, got

                # The server goes away: the call fails and says so, nothing hangs.
                stop_process(proc)
                ok, got = await call_echo(session, "while down")
                assert not ok, got
                assert "everything" in got, got

                # It comes back on the same port: the gateway reconnects by itself.
                proc, _ = start_everything(work, peers, "sse", port=port)
                for _ in range(300):
                    ok, got = await call_echo(session, "after")
                    if ok:
                        break
                    await anyio.sleep(0.1)
                assert ok and "after" in got, got
    finally:
        stop_process(proc)


def test_a_url_that_is_neither_transport_says_both_failed(toolgate_bin: Path, peers: Peers, work: Workspace):
    proc, port = start_everything(work, peers, "sse")
    try:
        config = write_config(
            work.path("toolgate.toml"),
            {"everything": {"url": f"http://127.0.0.1:{port}/nothing-here", "connect_timeout_secs": 10}},
            {"mode": "direct"},
        )
        checked = check(toolgate_bin, config, work)
        row = next(line for line in checked.stdout.splitlines() if line.startswith("everything "))
        assert " down " in row, checked.stdout
        assert "as HTTP+SSE" in row and "404" in row and "not an event stream" in row, row
    finally:
        stop_process(proc)
