"""An upstream whose tools must be called as tasks (MCP 2025-11-25), written with the
official Python SDK's task support (`mcp1/tasks_server.py`, mcp 1.30), behind the gateway
over stdio, over Streamable HTTP with streamed answers, and over Streamable HTTP with plain
JSON answers (whose `tools/list` loses each tool's `taskSupport` in rmcp, so the gateway
learns it from the server's -32601). A client that knows nothing of tasks calls the tools
plainly: the gateway calls them as tasks, waits for the result, relays the task's question
to the client and cancels the task when the client cancels its call.

    .peers/py/bin/pytest tests/peers/test_upstream_tasks_2025.py
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import types

from gateway import START_TIMEOUT, Peers, Workspace, free_port, http_gateway, missing, sdk_client, text, write_config

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parent / "mcp1" / "tasks_server.py"


def python(peers: Peers) -> str:
    exe = peers.root / "py-mcp1" / "bin" / "python"
    if not exe.exists():
        missing(f"{exe} is missing (.ci/run makes it: mcp==1.30.0)")
    return str(exe)


def wait_listening(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the task server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the task server never listened on {port}")


class Asked:
    """The client's answer to the task's question: confirm, and remember what was asked."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def __call__(self, _context, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.messages.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})


def read_log(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("transport", ["stdio", "http", "http-json"])
async def test_tools_that_require_a_task_are_called_as_tasks(toolgate_bin: Path, peers: Peers, work: Workspace, transport: str):
    log = work.path("tasks-server.log")
    env = {**work.env(), "TASKS_SERVER_LOG": str(log)}
    server = None
    if transport == "stdio":
        upstream = {"command": python(peers), "args": [str(SERVER)], "env": {"TASKS_SERVER_LOG": str(log)}}
    else:
        port = free_port()
        args = [python(peers), str(SERVER), "--http", str(port)] + (["--json"] if transport == "http-json" else [])
        server = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await anyio.to_thread.run_sync(wait_listening, port, server)
        upstream = {"url": f"http://127.0.0.1:{port}/mcp"}
    upstream.update({"prefix": "job", "connect_timeout_secs": START_TIMEOUT, "call_timeout_secs": 30})
    config = write_config(work.path("toolgate.toml"), {"jobs": upstream}, {"startup_wait_ms": int(START_TIMEOUT * 1000)})
    try:
        async with http_gateway(toolgate_bin, config, work, mode="direct") as gw:
            url = gw.wait_endpoint()
            for era in ("legacy", "2026-07-28"):
                asked = Asked()
                async with sdk_client(url, era=era, elicitation_callback=asked) as client:
                    report = await client.call_tool("job_slow_report", {"topic": "tides"})
                    assert not report.is_error, (era, text(report))
                    # The id in the text is the upstream's task's: the call was made as a task.
                    assert text(report).startswith("report on tides (task "), (era, text(report))

                    # A question needs a stream to come on: a server that answers plain JSON
                    # has none for it (mcp 1.30 holds it, and the call times out).
                    if transport != "http-json":
                        deleted = await client.call_tool("job_confirm_delete", {"path": "/tmp/old.txt"})
                        assert not deleted.is_error, (era, text(deleted))
                        assert text(deleted) == "deleted /tmp/old.txt", (era, text(deleted))
                        assert asked.messages == ["Delete /tmp/old.txt?"], (era, asked.messages)

                    plain = await client.call_tool("job_echo", {"text": "plain"})
                    assert text(plain) == "plain", (era, text(plain))

                    # A call cancelled by its client cancels the upstream's task.
                    before = len([line for line in read_log(log) if line.startswith("started ")])
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(client.call_tool, "job_long_job", {})
                        with anyio.fail_after(20):
                            while len([line for line in read_log(log) if line.startswith("started ")]) == before:
                                await anyio.sleep(0.05)
                        tg.cancel_scope.cancel()
                    started = [line.split()[1] for line in read_log(log) if line.startswith("started ")][-1]
                    with anyio.fail_after(20):
                        while f"cancelled {started}" not in read_log(log):
                            await anyio.sleep(0.05)
        # Listed as the server wrote them, the tools were called as tasks at once; over plain
        # JSON the listing lost `taskSupport`, and each was tried plainly first (-32601).
        refused = [line for line in read_log(log) if line.startswith("refused plain ")]
        if transport == "http-json":
            assert set(refused) == {"refused plain slow_report", "refused plain long_job"}, refused
        else:
            assert refused == [], refused
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
