"""The whole protocol through toolgate, driven by the Python MCP SDK against the reference
@modelcontextprotocol/server-everything: progress of a long-running operation, a sampling
request answered by this client, an elicitation answered by this client, resource read and
subscribe, and a prompt get, over stdio and over Streamable HTTP; and sampling and
elicitation relayed for a guided `execute`.

Self-contained: TOOLGATE_BIN names the toolgate binary (default target/debug/toolgate,
or $CARGO_TARGET_DIR/debug/toolgate), TOOLGATE_PEERS the folder the peers are installed
in (default .peers; `.ci/run` installs them, pinned):

    npm install --prefix .peers @modelcontextprotocol/server-everything@2026.8.31
    python3 -m venv .peers/py && .peers/py/bin/pip install mcp pytest anyio
    .peers/py/bin/pytest tests/peers/test_protocol.py
"""

import os
import re
import subprocess
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("TOOLGATE_PEERS", ROOT / ".peers")).resolve()
EVERYTHING = PEERS / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
SAMPLED = "sampled by the Python client"


def toolgate_bin() -> str:
    if os.environ.get("TOOLGATE_BIN"):
        return os.environ["TOOLGATE_BIN"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "debug" / "toolgate")


pytestmark = [
    pytest.mark.anyio,
    # Skipped only off CI: under CI a missing peer is a failure, as in the other suites.
    pytest.mark.skipif(
        not EVERYTHING.exists() and not os.environ.get("CI"),
        reason=f"server-everything not installed in {PEERS}",
    ),
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "toolgate.toml"
    path.write_text(
        '[gateway]\nmode = "direct"\n'
        "[upstreams.everything]\n"
        f'command = "node"\nargs = ["{EVERYTHING}", "stdio"]\n'
        "connect_timeout_secs = 30\n"
    )
    return path


class Recorder:
    """Answers the server's requests and keeps the notifications this session sees."""

    def __init__(self):
        self.updated: list[str] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.sampled = 0
        self.elicited = 0

    async def sampling(self, context, params):
        self.sampled += 1
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLED),
            model="test-model",
            stop_reason="endTurn",
        )

    async def elicitation(self, context, params):
        self.elicited += 1
        schema = getattr(params, "requested_schema", None) or {}
        if not isinstance(schema, dict):
            schema = schema.model_dump(by_alias=True, exclude_none=True)
        content = {}
        for name, prop in (schema.get("properties") or {}).items():
            kind = prop.get("type")
            if "default" in prop:
                content[name] = prop["default"]
            elif prop.get("enum"):
                content[name] = prop["enum"][0]
            elif kind == "boolean":
                content[name] = True
            elif kind in ("integer", "number"):
                content[name] = prop.get("minimum", 1)
            elif kind == "string":
                content[name] = "user@example.com" if prop.get("format") == "email" else "Ada Lovelace"
        return types.ElicitResult(action="accept", content=content)

    async def logging(self, params):
        self.logs.append(params)

    async def messages(self, message):
        note = getattr(message, "root", message)
        if isinstance(note, types.ResourceUpdatedNotification):
            self.updated.append(str(note.params.uri))


@asynccontextmanager
async def session_over(streams, recorder: Recorder):
    read, write = streams[0], streams[1]
    async with ClientSession(
        read,
        write,
        sampling_callback=recorder.sampling,
        elicitation_callback=recorder.elicitation,
        logging_callback=recorder.logging,
        message_handler=recorder.messages,
    ) as session:
        await session.initialize()
        yield session


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def exercise(session: ClientSession, recorder: Recorder):
    await session.send_ping()
    names = {t.name for t in (await session.list_tools()).tools}
    for needed in ("trigger-long-running-operation", "trigger-sampling-request", "trigger-elicitation-request"):
        assert f"everything_{needed}" in names, names

    # A long-running operation reports progress to this client, for this call.
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    result = await session.call_tool(
        "everything_trigger-long-running-operation",
        {"duration": 1, "steps": 3},
        progress_callback=on_progress,
    )
    assert not result.is_error, text_of(result)
    assert len(progress) >= 3 and progress == sorted(progress), progress

    # Sampling and elicitation come back to this client through the gateway.
    result = await session.call_tool("everything_trigger-sampling-request", {"prompt": "say hi", "maxTokens": 20})
    assert not result.is_error and SAMPLED in text_of(result), text_of(result)
    assert recorder.sampled == 1
    result = await session.call_tool("everything_trigger-elicitation-request", {})
    assert not result.is_error, text_of(result)
    assert recorder.elicited == 1 and "Ada Lovelace" in text_of(result), text_of(result)

    # Resources: read one, subscribe, and hear about its updates.
    resources = (await session.list_resources()).resources
    assert resources, "server-everything lists resources"
    uri = str(resources[0].uri)
    contents = (await session.read_resource(uri)).contents
    assert contents and str(contents[0].uri) == uri
    await session.subscribe_resource(uri)
    await session.call_tool("everything_toggle-subscriber-updates", {})
    with anyio.fail_after(15):
        while uri not in recorder.updated:
            await anyio.sleep(0.05)

    # Prompts are named like tools and keep their messages.
    prompts = {p.name for p in (await session.list_prompts()).prompts}
    assert "everything_simple-prompt" in prompts, prompts
    got = await session.get_prompt("everything_simple-prompt")
    assert got.messages and got.messages[0].role == "user"


async def test_guided_execute_relays_sampling_and_elicitation(config: Path):
    config.write_text(config.read_text().replace('mode = "direct"', 'mode = "guided"'))
    recorder = Recorder()
    params = StdioServerParameters(command=toolgate_bin(), args=["serve", "--stdio", "--config", str(config)])
    with anyio.fail_after(90):
        async with stdio_client(params) as streams, session_over(streams, recorder) as session:
            result = await session.call_tool(
                "execute",
                {"tool": "everything/trigger-sampling-request", "arguments": {"prompt": "say hi", "maxTokens": 20}},
            )
            assert not result.is_error and SAMPLED in text_of(result), text_of(result)
            result = await session.call_tool(
                "execute", {"tool": "everything/trigger-elicitation-request", "arguments": {}}
            )
            assert not result.is_error and "Ada Lovelace" in text_of(result), text_of(result)
            assert (recorder.sampled, recorder.elicited) == (1, 1)


async def test_everything_over_stdio(config: Path):
    recorder = Recorder()
    params = StdioServerParameters(command=toolgate_bin(), args=["serve", "--stdio", "--config", str(config)])
    with anyio.fail_after(90):
        async with stdio_client(params) as streams, session_over(streams, recorder) as session:
            await exercise(session, recorder)


async def test_everything_over_http(config: Path):
    recorder = Recorder()
    with tempfile.TemporaryFile() as log:
        gateway = subprocess.Popen(
            [toolgate_bin(), "serve", "--config", str(config), "--http", "127.0.0.1:0"],
            # The embedded store goes in this test's folder, not the user's state folder.
            env={**os.environ, "XDG_STATE_HOME": str(config.parent / "state")},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            url = None
            with anyio.fail_after(30):
                while url is None:
                    log.seek(0)
                    found = re.search(rb"MCP endpoint: (http://\S+/mcp)", log.read())
                    url = found and found.group(1).decode()
                    await anyio.sleep(0.05)
            with anyio.fail_after(90):
                async with streamable_http_client(url) as streams, session_over(streams, recorder) as session:
                    await exercise(session, recorder)
        finally:
            gateway.terminate()
            gateway.wait(timeout=10)
