"""Tasks in their 2025-11-25 form, end to end through the official Python SDK's own client
for them (mcp 1.30's `session.experimental`: call_tool_as_task, poll_task, get_task_result,
cancel_task), over Streamable HTTP, with toolgate's conformance fixture as the upstream: the
SDK reads the `tasks` capability and each tool's `taskSupport`, a task is polled to its end
and its result read, an upstream's question during a task reaches the client (marked with
the task) while it waits for the result, a cancelled task says so, tasks/list lists the three,
and after a restart of the gateway the ended task's result is read again and the tasks listed
again from the embedded store.

The client is its own program (`mcp1/tasks_client.py`) in its own venv (`.peers/py-mcp1`,
made by `.ci/run`): mcp 2.x, which the rest of this suite uses, has no client for this form.

    .peers/py/bin/pytest tests/peers/test_tasks_2025.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from gateway import HttpGateway, Peers, Workspace, missing, write_config

pytestmark = pytest.mark.anyio

CLIENT = Path(__file__).resolve().parent / "mcp1" / "tasks_client.py"


def client(peers: Peers, work: Workspace, *args: str) -> dict:
    python = peers.root / "py-mcp1" / "bin" / "python"
    if not python.exists():
        missing(f"{python} is missing (.ci/run makes it: mcp==1.30.0)")
    done = subprocess.run(
        [str(python), str(CLIENT), *args], capture_output=True, text=True, timeout=120, env=work.env()
    )
    assert done.returncode == 0, f"the SDK client failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def start(toolgate_bin: Path, config: Path, work: Workspace) -> HttpGateway:
    gw = HttpGateway(toolgate_bin, config, work, "direct")
    gw.wait_endpoint()
    return gw


async def test_the_python_sdks_2025_task_client_end_to_end(toolgate_bin: Path, peers: Peers, work: Workspace):
    fixture = {"command": str(toolgate_bin), "args": ["fixture", "--conformance", "--server", "cf-fx"]}
    config = write_config(work.path("toolgate.toml"), {"cf": fixture}, {"startup_wait_ms": 30000})
    gw = await anyio.to_thread.run_sync(start, toolgate_bin, config, work)
    try:
        seen = await anyio.to_thread.run_sync(client, peers, work, f"{gw.url}/direct", "run")
    finally:
        assert await anyio.to_thread.run_sync(gw.stop) == 0
    assert seen["protocolVersion"] == "2025-11-25", seen
    assert seen["tasksCapability"]["requests"]["tools"]["call"] == {}, seen
    assert seen["tasksCapability"]["list"] == {}, seen
    assert seen["taskSupport"] == ["optional"], seen

    done = seen["done"]
    assert done["statuses"][-1] == "completed", done
    assert set(done["statuses"]) <= {"working", "completed"}, done
    assert "slow_compute sdk done" in done["text"], done

    asked = seen["asked"]
    assert "action=accept" in asked["text"] and "ada@example.com" in asked["text"], asked
    assert asked["related"] == [{"taskId": asked["id"]}], asked

    assert seen["cancelled"] == {"answer": "cancelled", "then": "cancelled"}, seen
    ids = [done["id"], asked["id"]]
    assert seen["listed"][:2] == [[ids[0], "completed"], [ids[1], "completed"]], seen
    assert [s for _, s in seen["listed"][2:]] == ["cancelled"], seen

    # The same configuration, so the same embedded store: the ended task is still there.
    gw = await anyio.to_thread.run_sync(start, toolgate_bin, config, work)
    try:
        again = await anyio.to_thread.run_sync(client, peers, work, f"{gw.url}/direct", "result", done["id"])
    finally:
        assert await anyio.to_thread.run_sync(gw.stop) == 0
    # Listed after the restart too, from the embedded store.
    assert again == {"status": "completed", "text": done["text"], "listed": [t for t, _ in seen["listed"]]}, again
    left = work.wait_no_processes()
    assert not left, f"processes left behind: {left}"
