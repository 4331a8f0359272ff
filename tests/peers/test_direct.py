"""Direct mode in front of real MCP servers, driven by the official Python SDK over stdio and
Streamable HTTP: every upstream tool is listed under `{server}_{tool}` (or its own name when it already starts with
the server's) exactly as the server
describes it, and calls reach the real servers and come back intact."""

from __future__ import annotations

import base64
import gzip
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import git
from gateway import MARKER_VAR, exposed_name, TEST_GATEWAY, Workspace, all_tools, sdk_client, session, stdio_upstreams, text, write_config

pytestmark = pytest.mark.anyio

TRANSPORTS = ["stdio", "http"]

# The name of server-everything's Streamable HTTP instance as an upstream (a `url` upstream).
EVERYTHING_HTTP = "everything-http"


def config(work: Workspace, peers, http_url: str | None = None, only: tuple[str, ...] = ()) -> Path:
    ups = stdio_upstreams(peers, work)
    if only:
        ups = {k: v for k, v in ups.items() if k in only}
    if http_url:
        ups[EVERYTHING_HTTP] = {"url": http_url, "connect_timeout_secs": 30, "call_timeout_secs": 60}
    return write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)


async def listed(client, *names: str) -> None:
    """Lists the tools first, as clients do (and which waits for the upstreams to start),
    and checks the ones the test is about are there."""
    have = {t.name for t in await all_tools(client)}
    missing = set(names) - have
    assert not missing, f"not listed: {sorted(missing)}; listed: {sorted(have)}"


def ok(result) -> str:
    """The text of a successful result (fails the test on isError)."""
    assert not result.is_error, f"unexpected isError: {text(result)}"
    return text(result)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_tool_is_listed_as_the_server_describes_it(transport, toolgate_bin, peers, work, repo, everything_http, reference_tools):
    async with session(transport, toolgate_bin, config(work, peers, everything_http), work) as client:
        assert client.server_info is not None and client.server_info.name == "toolgate"
        tools = await all_tools(client)

    names = [t.name for t in tools]
    assert len(names) == len(set(names)), f"duplicate names: {sorted(names)}"
    expected = {}
    for server, upstream in [*((s, s) for s in reference_tools), (EVERYTHING_HTTP, "everything")]:
        for t in reference_tools[upstream]:
            expected[exposed_name(server, t["name"])] = t
    assert sorted(names) == sorted(expected), "exposed names differ from {server}_{tool} (a tool already named after its server kept)"
    # Named examples, so an empty reference cannot make this pass.
    for n in ["everything_echo", "everything_get-structured-content", "filesystem_read_text_file",
              "memory_create_entities", "time_get_current_time", "time_convert_time",
              "git_status", "everything-http_echo"]:
        assert n in names
    # Descriptions, schemas and annotations come through as the server sent them.
    for t in tools:
        got = t.model_dump(by_alias=True, exclude_none=True, mode="json")
        want = expected[t.name]
        for key in ("description", "inputSchema", "outputSchema", "annotations", "title"):
            assert got.get(key) == want.get(key), f"{t.name}: {key} differs"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_everything(transport, toolgate_bin, peers, work, everything_http):
    cfg = config(work, peers, everything_http, only=("everything",))
    async with session(transport, toolgate_bin, cfg, work) as client:
        await listed(client, "everything_echo", "everything-http_echo", "everything_get-sum")
        r = await client.call_tool("everything_echo", {"message": "hello peers ✓"})
        assert ok(r) == "Echo: hello peers ✓"
        # The same server reached over Streamable HTTP as a `url` upstream.
        r = await client.call_tool("everything-http_echo", {"message": "over http"})
        assert ok(r) == "Echo: over http"

        r = await client.call_tool("everything_get-sum", {"a": 2, "b": 40})
        assert "is 42" in ok(r)

        # structuredContent passes through; the SDK validates it against the outputSchema.
        r = await client.call_tool("everything_get-structured-content", {"location": "Chicago"})
        ok(r)
        assert r.structured_content == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}

        # Binary content (an image block) passes through intact.
        r = await client.call_tool("everything_get-tiny-image", {})
        ok(r)
        images = [c for c in r.content if c.type == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")

        # The server rejects bad arguments with isError; it comes back as such.
        r = await client.call_tool("everything_echo", {"message": 17})
        assert r.is_error
        assert "message" in text(r)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_filesystem(transport, toolgate_bin, peers, work):
    files = work.path("files")
    files.mkdir()
    (files / "hello.txt").write_text(f"written by the test {work.marker}\nline two\n")
    async with session(transport, toolgate_bin, config(work, peers, only=("filesystem",)), work) as client:
        await listed(client, "filesystem_read_text_file", "filesystem_write_file", "filesystem_list_directory")
        r = await client.call_tool("filesystem_read_text_file", {"path": str(files / "hello.txt")})
        assert ok(r) == f"written by the test {work.marker}\nline two\n"
        assert r.structured_content == {"content": f"written by the test {work.marker}\nline two\n"}

        r = await client.call_tool("filesystem_write_file", {"path": str(files / "out.txt"), "content": "from the gateway\n"})
        ok(r)
        assert (files / "out.txt").read_text() == "from the gateway\n"

        r = await client.call_tool("filesystem_list_directory", {"path": str(files)})
        assert sorted(ok(r).splitlines()) == ["[FILE] hello.txt", "[FILE] out.txt"]

        # Upstream failures: a missing file, and a path outside the allowed directory.
        r = await client.call_tool("filesystem_read_text_file", {"path": str(files / "nope.txt")})
        assert r.is_error and "ENOENT" in text(r)
        r = await client.call_tool("filesystem_read_text_file", {"path": "/etc/hostname"})
        assert r.is_error and "Access denied" in text(r)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_memory(transport, toolgate_bin, peers, work):
    entity = f"Gateway-{work.marker}"
    async with session(transport, toolgate_bin, config(work, peers, only=("memory",)), work) as client:
        await listed(client, "memory_create_entities", "memory_open_nodes", "memory_search_nodes")
        r = await client.call_tool("memory_create_entities", {"entities": [
            {"name": entity, "entityType": "service", "observations": ["speaks MCP", "runs on port 8377"]}]})
        ok(r)
        r = await client.call_tool("memory_open_nodes", {"names": [entity]})
        graph = json.loads(ok(r))
        assert [e["name"] for e in graph["entities"]] == [entity]
        assert graph["entities"][0]["observations"] == ["speaks MCP", "runs on port 8377"]
        assert r.structured_content["entities"][0]["name"] == entity

        r = await client.call_tool("memory_search_nodes", {"query": "port 8377"})
        assert [e["name"] for e in json.loads(ok(r))["entities"]] == [entity]

        r = await client.call_tool("memory_add_observations", {"observations": [
            {"entityName": "no such entity", "contents": ["x"]}]})
        assert r.is_error and "no such entity" in text(r)
    # The server really stored it, in the file the configuration gave it.
    stored = [json.loads(line) for line in work.path("memory.jsonl").read_text().splitlines() if line.strip()]
    assert any(e.get("name") == entity for e in stored)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_git(transport, toolgate_bin, peers, work, repo):
    async with session(transport, toolgate_bin, config(work, peers, only=("git",)), work) as client:
        await listed(client, "git_status", "git_log", "git_commit")
        status = ok(await client.call_tool("git_status", {"repo_path": str(repo)}))
        assert "modified:   tracked.txt" in status
        assert "untracked.txt" in status.split("Untracked files:")[1]

        diff = ok(await client.call_tool("git_diff_unstaged", {"repo_path": str(repo)}))
        assert "+second line" in diff

        log = ok(await client.call_tool("git_log", {"repo_path": str(repo)}))
        assert "peer suite: initial commit" in log

        ok(await client.call_tool("git_add", {"repo_path": str(repo), "files": ["tracked.txt", "untracked.txt"]}))
        ok(await client.call_tool("git_commit", {"repo_path": str(repo), "message": "committed through toolgate"}))

        r = await client.call_tool("git_checkout", {"repo_path": str(repo), "branch_name": "no-such-branch"})
        assert r.is_error and "no-such-branch" in text(r)
    assert git(repo, "log", "-1", "--format=%s").strip() == "committed through toolgate"
    assert git(repo, "status", "--porcelain").strip() == ""


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_time(transport, toolgate_bin, peers, work):
    async with session(transport, toolgate_bin, config(work, peers, only=("time",)), work) as client:
        await listed(client, "time_convert_time", "time_get_current_time")
        r = await client.call_tool("time_convert_time", {
            "source_timezone": "UTC", "time": "12:30", "target_timezone": "Asia/Tokyo"})
        ok(r)
        conv = r.structured_content
        assert conv["source"]["timezone"] == "UTC" and "T12:30:00" in conv["source"]["datetime"]
        assert conv["target"]["timezone"] == "Asia/Tokyo" and "T21:30:00+09:00" in conv["target"]["datetime"]
        assert conv["time_difference"] == "+9.0h"
        assert json.loads(text(r)) == conv

        r = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
        ok(r)
        now = datetime.fromisoformat(r.structured_content["datetime"])
        assert abs(now - datetime.now(timezone.utc)) < timedelta(minutes=5)

        r = await client.call_tool("time_get_current_time", {"timezone": "Mars/Olympus_Mons"})
        assert r.is_error and "Mars/Olympus_Mons" in text(r)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_progress_passes_through(transport, toolgate_bin, peers, work):
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with session(transport, toolgate_bin, config(work, peers, only=("everything",)), work) as client:
        await listed(client, "everything_trigger-long-running-operation")
        r = await client.call_tool("everything_trigger-long-running-operation", {"duration": 1, "steps": 3},
                                   progress_callback=on_progress)
        assert "Steps: 3" in ok(r)
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_concurrent_calls_across_servers(transport, toolgate_bin, peers, work):
    results: dict[str, str] = {}
    async with session(transport, toolgate_bin, config(work, peers, only=("everything", "time")), work) as client:
        await listed(client, "everything_echo", "time_convert_time")

        async def echo(i: int) -> None:
            results[f"echo{i}"] = ok(await client.call_tool("everything_echo", {"message": f"m{i}"}))

        async def tokyo(i: int) -> None:
            r = await client.call_tool("time_convert_time", {
                "source_timezone": "UTC", "time": f"0{i}:00", "target_timezone": "Asia/Tokyo"})
            results[f"time{i}"] = ok(r) and r.structured_content["target"]["datetime"]

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(echo, i)
                tg.start_soon(tokyo, i)
    for i in range(8):
        assert results[f"echo{i}"] == f"Echo: m{i}"
        assert f"T{i + 9:02d}:00:00+09:00" in results[f"time{i}"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_unknown_tool_is_a_tool_error(transport, toolgate_bin, peers, work):
    async with session(transport, toolgate_bin, config(work, peers, only=("time",)), work) as client:
        await listed(client, "time_get_current_time")
        r = await client.call_tool("time_get_current", {})
        assert r.is_error
        assert "Unknown tool" in text(r) and "time_get_current_time" in text(r)
        r = await client.call_tool("weather_forecast", {})
        assert r.is_error
        assert "Unknown tool" in text(r) and "tools/list" in text(r)


# Calls whose results are deterministic: each made directly on server-everything and
# through the gateway must come back identical, block for block.
EVERYTHING_CALLS = [
    ("echo", {"message": "fidelity"}),
    ("get-sum", {"a": 1.5, "b": 2}),
    ("get-structured-content", {"location": "Los Angeles"}),
    ("get-tiny-image", {}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-annotated-message", {"messageType": "debug"}),
    ("get-resource-links", {"count": 2}),
    ("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
    ("get-resource-reference", {"resourceType": "Blob", "resourceId": 3}),
    ("gzip-file-as-resource", {"name": "peer.txt.gz", "outputType": "resource",
                               "data": "data:text/plain;base64," + base64.b64encode(b"gzip me\n" * 50).decode()}),
    ("echo", {}),  # invalid arguments: the gateway's refusal, not the upstream's
]


CLOCK = re.compile(r"\d{1,2}:\d{2}:\d{2}( [AP]M)?")


def dump(result) -> dict:
    """A result as JSON, with wall-clock times (server-everything's dynamic resources carry
    the time they were made) masked, also inside base64 blobs."""

    def mask(v):
        if isinstance(v, dict):
            return {k: (mask_blob(x) if k == "blob" else mask(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [mask(x) for x in v]
        return CLOCK.sub("<time>", v) if isinstance(v, str) else v

    def mask_blob(b: str) -> str:
        raw = base64.b64decode(b)
        try:
            return "decoded:" + CLOCK.sub("<time>", raw.decode())
        except UnicodeDecodeError:
            return b

    return mask(result.model_dump(by_alias=True, exclude_none=True, mode="json"))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_results_are_identical_to_calling_the_server_directly(transport, toolgate_bin, peers, work):
    direct = []
    params = StdioServerParameters(command=peers.node, args=[str(peers.node_script("server-everything")), "stdio"],
                                   env={MARKER_VAR: work.marker})
    with open(work.path("everything-direct.log"), "w") as errlog:
        async with sdk_client(stdio_client(params, errlog=errlog)) as client:
            for name, args in EVERYTHING_CALLS:
                direct.append(dump(await client.call_tool(name, args)))
    via = []
    async with session(transport, toolgate_bin, config(work, peers, only=("everything",)), work) as client:
        await listed(client, "everything_echo")
        for name, args in EVERYTHING_CALLS:
            via.append(dump(await client.call_tool(f"everything_{name}", args)))

    kinds = {block["type"] for r in direct for block in r["content"]}
    assert kinds == {"text", "image", "resource_link", "resource"}, kinds
    assert direct[-1]["isError"] is True
    for (name, args), d, v in zip(EVERYTHING_CALLS[:-1], direct, via):
        assert v == d, f"{name}({args}) differs through the gateway"
    # Arguments the tool's schema refuses never reach the upstream: the gateway answers with
    # the validation report (the same as execute's), as a tool error the model can fix.
    refused = via[-1]
    assert refused["isError"] is True, refused
    assert refused["structuredContent"]["error"] == "invalid_arguments", refused
    assert "/message" in refused["content"][0]["text"], refused
    blob = next(b for b in via[-2]["content"] if b["type"] == "resource")["resource"]["blob"]
    assert gzip.decompress(base64.b64decode(blob)) == b"gzip me\n" * 50


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_large_result_comes_through_whole(transport, toolgate_bin, peers, work):
    """A 3 MB file read through filesystem: one large JSON-RPC line from the upstream, one
    large response to the client."""
    files = work.path("files")
    files.mkdir()
    body = "".join(f"{i:07d} the quick brown fox jumps over the lazy dog\n" for i in range(60_000))
    assert len(body) > 3_000_000
    (files / "big.txt").write_text(body)
    # The SDK refuses SSE events over 1 MiB by default (a client-side limit), and a result
    # over HTTP is one SSE event: raise the limit for this test.
    kw = {"max_sse_event_size": 16 << 20} if transport == "http" else {}
    # Whole only with a budget that allows it: by default a direct result is cut at
    # direct.max_result_tokens (25,000), with a note on how much was left out.
    cfg = config(work, peers, only=("filesystem",))
    async with session(transport, toolgate_bin, cfg, work, **kw) as client:
        await listed(client, "filesystem_read_text_file")
        r = await client.call_tool("filesystem_read_text_file", {"path": str(files / "big.txt")})
    # read_text_file has an output schema, which a cut result cannot meet: a tool error
    # with the first page and the note.
    cut = text(r)
    assert r.is_error is True and r.structured_content is None, cut[-400:]
    assert len(cut) < len(body) // 10 and "[toolgate] result cut at 25000 tokens" in cut, cut[-400:]
    with open(cfg, "a") as f:
        f.write("\n[direct]\nmax_result_tokens = 10000000\n")
    async with session(transport, toolgate_bin, cfg, work, **kw) as client:
        await listed(client, "filesystem_read_text_file")
        r = await client.call_tool("filesystem_read_text_file", {"path": str(files / "big.txt")})
    assert ok(r) == body
    assert r.structured_content == {"content": body}
