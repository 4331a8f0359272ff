"""An upstream with tools that must be called as tasks (MCP 2025-11-25), written with the
official Python SDK's own task support (mcp 1.30's `server.experimental`, the last release
with it). Run by tests/peers/test_tasks_2025.py in the venv `.ci/run` makes for it
(`.peers/py-mcp1`), behind the gateway:

    tasks_server.py                  # over stdio
    tasks_server.py --http PORT      # Streamable HTTP, answers streamed (SSE)
    tasks_server.py --http PORT --json   # Streamable HTTP, answers as plain JSON

Tools:
- `slow_report(topic)`, taskSupport "required": works a moment, then answers
  "report on TOPIC (task ID)": the id shows the call really was a task.
- `confirm_delete(path)`, "required": asks the user (an elicitation, sent while the client
  waits on tasks/result), then answers "deleted PATH" or "kept PATH".
- `long_job()`, "required": works until cancelled; a cancel is written to the log file
  named by TASKS_SERVER_LOG ("cancelled ID").
- `echo(text)`, no task support: a plain call.

A plain call of one of the first three is refused with -32601, as the specification says,
and logged ("refused plain NAME").
"""

from __future__ import annotations

import os
import sys

import anyio
import mcp.types as types
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError

server = Server("tasks-2025")
support = server.experimental.enable_tasks()

REQUIRED = types.ToolExecution(taskSupport="required")
TASK_TOOLS = {"slow_report", "confirm_delete", "long_job"}


def log(line: str) -> None:
    path = os.environ.get("TASKS_SERVER_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def schema(**props: str) -> dict:
    return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}, "required": list(props)}


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(name="slow_report", description="Write a report on a topic (slow).", inputSchema=schema(topic="string"), execution=REQUIRED),
        types.Tool(name="confirm_delete", description="Delete a file after the user confirms.", inputSchema=schema(path="string"), execution=REQUIRED),
        types.Tool(name="long_job", description="A job that runs until cancelled.", inputSchema=schema(), execution=REQUIRED),
        types.Tool(name="echo", description="Echo the text back.", inputSchema=schema(text="string")),
    ]


def done(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


@server.call_tool()
async def call_tool(name: str, arguments: dict):
    ctx = server.request_context
    if name == "echo":
        ctx.experimental.validate_task_mode(None)
        return [types.TextContent(type="text", text=arguments["text"])]
    ctx.experimental.validate_task_mode("required")

    async def work(task: ServerTaskContext) -> types.CallToolResult:
        if name == "slow_report":
            await task.update_status("writing")
            await anyio.sleep(0.3)
            return done(f"report on {arguments['topic']} (task {task.task_id})")
        if name == "confirm_delete":
            answer = await task.elicit(
                message=f"Delete {arguments['path']}?",
                requestedSchema={"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
            )
            sure = answer.action == "accept" and bool((answer.content or {}).get("confirm"))
            return done(f"{'deleted' if sure else 'kept'} {arguments['path']}")
        # long_job: until the task is cancelled (tasks/cancel marks it in the store).
        log(f"started {task.task_id}")
        for _ in range(600):
            current = await support.store.get_task(task.task_id)
            if current is None or current.status == "cancelled":
                log(f"cancelled {task.task_id}")
                # Not returned: mcp 1.30 would complete the cancelled task, which it
                # refuses (a terminal state) by failing the whole server.
                await anyio.sleep_forever()
            await anyio.sleep(0.05)
        return done("never cancelled")

    return await ctx.experimental.run_task(work)


# A plain call of a tool that requires a task is refused with the JSON-RPC error -32601,
# as the specification says (mcp 1.30's `call_tool` decorator would answer a tool error
# instead, with the same message), and logged ("refused plain NAME").
_decorated = server.request_handlers[types.CallToolRequest]


async def _strict(request: types.CallToolRequest):
    if request.params.name in TASK_TOOLS and request.params.task is None:
        log(f"refused plain {request.params.name}")
        raise McpError(types.ErrorData(code=types.METHOD_NOT_FOUND, message="This tool requires task-augmented invocation"))
    return await _decorated(request)


server.request_handlers[types.CallToolRequest] = _strict


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(port: int, json_response: bool) -> None:
    import contextlib

    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Mount

    manager = StreamableHTTPSessionManager(app=server, json_response=json_response)

    async def handle(scope, receive, send):
        await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        async with manager.run():
            yield

    app = Starlette(routes=[Mount("/mcp", app=handle)], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http(int(sys.argv[sys.argv.index("--http") + 1]), "--json" in sys.argv)
    else:
        anyio.run(serve_stdio)
