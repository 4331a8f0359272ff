"""A client of tasks in their 2025-11-25 form, written with the official Python SDK's own
task API (`session.experimental`, mcp 1.30: the last release with one). Run by
tests/peers/test_tasks_2025.py with the venv `.ci/run` makes for it (`.peers/py-mcp1`).

    tasks_client.py URL run          # prints one JSON object: what it saw
    tasks_client.py URL result ID    # the task's status, result text and the listed ids, after a restart

Every check a client would make is made here (the SDK validates each answer's shape); the
test asserts on what it prints.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def answer_elicitation(context, params: types.ElicitRequestParams):
    # The question of a task's upstream arrives while tasks/result waits, marked with its task.
    related = (params.meta.model_dump() if params.meta else {}).get("io.modelcontextprotocol/related-task")
    ANSWERED.append(related)
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


ANSWERED: list = []


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def run(url: str) -> dict:
    out: dict = {}
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=answer_elicitation) as session:
            init = await session.initialize()
            out["protocolVersion"] = init.protocolVersion
            tasks = init.capabilities.tasks
            out["tasksCapability"] = tasks.model_dump(exclude_none=True) if tasks else None
            listed = await session.list_tools()
            out["taskSupport"] = sorted({(t.execution.taskSupport if t.execution else None) or "none" for t in listed.tools})

            # A call as a task, polled to its end, its result read.
            made = await session.experimental.call_tool_as_task("cf_slow_compute", {"seconds": 1, "label": "sdk"})
            task_id = made.task.taskId
            statuses = [s.status async for s in session.experimental.poll_task(task_id)]
            result = await session.experimental.get_task_result(task_id, types.CallToolResult)
            out["done"] = {"id": task_id, "statuses": statuses, "text": text(result)}

            # An upstream that asks during its task: the question comes while tasks/result waits.
            made = await session.experimental.call_tool_as_task("cf_test_elicitation", {"message": "who are you?"})
            asked = await session.experimental.get_task_result(made.task.taskId, types.CallToolResult)
            out["asked"] = {"id": made.task.taskId, "text": text(asked), "related": ANSWERED}

            # Cancelled while running.
            made = await session.experimental.call_tool_as_task("cf_test_cancellable", {})
            await anyio.sleep(0.3)
            cancelled = await session.experimental.cancel_task(made.task.taskId)
            after = await session.experimental.get_task(made.task.taskId)
            out["cancelled"] = {"answer": cancelled.status, "then": after.status}

            # tasks/list: this caller's three tasks, oldest first.
            listed = await session.experimental.list_tasks()
            out["listed"] = [(t.taskId, t.status) for t in listed.tasks]
    return out


async def result(url: str, task_id: str) -> dict:
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            status = await session.experimental.get_task(task_id)
            got = await session.experimental.get_task_result(task_id, types.CallToolResult)
            listed = await session.experimental.list_tasks()
            return {"status": status.status, "text": text(got), "listed": [t.taskId for t in listed.tasks]}


def main() -> None:
    url, mode = sys.argv[1], sys.argv[2]
    out = anyio.run(run, url) if mode == "run" else anyio.run(result, url, sys.argv[3])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
