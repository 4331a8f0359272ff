"""Code mode with real MCP servers, driven by the official Python SDK: a program reads a file
with the filesystem server, stores facts about it with the memory server and returns a
one-line summary. The file's text never reaches the client; the facts are really stored."""

from __future__ import annotations

import json

import pytest

from gateway import TEST_GATEWAY, Workspace, all_tools, session, stdio_upstreams, text, write_config

pytestmark = pytest.mark.anyio

PROGRAM = """
const file = await tools.filesystem.read_text_file({path: input.path});
const lines = file.content.split("\\n").filter(l => l.trim() !== "");
const words = file.content.split(/\\s+/).filter(Boolean).length;
await tools.memory.create_entities({entities: [{
  name: "notes.txt", entityType: "file",
  observations: [`title: ${lines[0]}`, `${lines.length} lines`, `${words} words`],
}]});
return `${lines[0]}: ${lines.length} lines, ${words} words; facts stored in memory`;
"""


def config(work: Workspace, peers):
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k in ("filesystem", "memory")}
    cfg = write_config(work.path("toolgate.toml"), ups, {**TEST_GATEWAY, "mode": "guided"})
    with open(cfg, "a") as f:
        f.write("\n[code]\nenabled = true\n")
    return cfg


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_program_chains_filesystem_and_memory_and_only_its_answer_comes_back(transport, toolgate_bin, peers, work):
    files = work.path("files")
    files.mkdir(exist_ok=True)
    secret = f"the body of the report {work.marker}"
    body = "Quarterly notes\n" + "".join(f"{i}: {secret}\n" for i in range(200))
    (files / "notes.txt").write_text(body)

    async with session(transport, toolgate_bin, config(work, peers), work, mode="guided") as client:
        names = {t.name for t in await all_tools(client)}
        assert {"route", "execute", "continue", "execute_code", "describe_tools"} <= names, names
        # Discovery without the catalog: the signatures the program needs, as TypeScript.
        r = await client.call_tool("describe_tools", {"tools": ["filesystem/read_text_file", "memory/create_entities"]})
        assert not r.is_error, text(r)
        assert "read_text_file" in text(r) and "create_entities" in text(r)

        r = await client.call_tool("execute_code", {"code": PROGRAM, "input": {"path": str(files / "notes.txt")}})
        seen = text(r) + json.dumps(r.structured_content)
        assert not r.is_error, seen
        s = r.structured_content
        assert s["status"] == "ok", seen
        assert s["result"] == "Quarterly notes: 201 lines, 1402 words; facts stored in memory"
        assert [(c["server"], c["tool"], c["ok"]) for c in s["calls"]] == [
            ("filesystem", "read_text_file", True),
            ("memory", "create_entities", True),
        ]
        # Nothing of the file's body reached the client: only the program's answer.
        assert secret not in seen and work.marker not in seen
        assert len(seen) < 2000, len(seen)

        # The facts are in the real memory server.
        r = await client.call_tool("execute", {"tool": "memory/open_nodes", "arguments": {"names": ["notes.txt"]}})
        graph = text(r) + json.dumps(r.structured_content)
        assert not r.is_error, graph
        assert "title: Quarterly notes" in graph and "201 lines" in graph
