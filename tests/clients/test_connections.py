"""OpenCode (`opencode-ai`) and the MCP Inspector CLI (`@modelcontextprotocol/inspector-cli`),
both pinned in .ci/run, connected by the README's snippets: each reaches toolgate over
HTTP and over stdio and sees its tools."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

from conftest import personalise, readme_block


def test_opencode_connects_over_http_and_stdio(world, gateway):
    snippet = personalise(readme_block("OpenCode"), world, gateway.url)
    (world.dir / "project" / "opencode.json").write_text(snippet)
    json.loads(snippet)  # the README's snippet is valid JSON
    p = world.run(["opencode", "mcp", "list"], timeout=120)
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout + p.stderr)
    assert p.returncode == 0, out
    for name in ("toolgate", "toolgate-stdio"):
        assert re.search(rf"✓ {re.escape(name)}\s+connected", out), out


def inspector(world, args: list[str]):
    # Inspector CLI 1.0.3 reads ../package.json relative to its working folder (a packaging
    # bug), so it runs from a folder whose parent has one.
    folder = world.dir / "project" / "inspector"
    folder.mkdir(exist_ok=True)
    (world.dir / "project" / "package.json").write_text("{}")
    p = subprocess.run(["mcp-inspector-cli", *args], env=world.env(), cwd=folder, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads(p.stdout[p.stdout.index("{"):])


def test_inspector_lists_the_direct_surface_over_http(world, gateway):
    line = next(l for l in readme_block("MCP Inspector").splitlines() if l.startswith("mcp-inspector-cli"))
    args = shlex.split(personalise(line, world, gateway.url))[1:]
    listed = inspector(world, args)
    assert sorted(t["name"] for t in listed["tools"]) == ["alpha_add_numbers", "alpha_echo"]


def test_inspector_routes_over_stdio(world):
    # `toolgate serve --stdio` finds ./toolgate.toml (the Inspector keeps `--config` for itself).
    folder = world.dir / "project" / "inspector"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toolgate.toml").write_text(world.config.read_text())
    answer = inspector(world, ["--cli", "toolgate", "serve", "--stdio", "--method", "tools/call",
                               "--tool-name", "route", "--tool-arg", "task=echo a message"])
    assert not answer["isError"], answer
    assert answer["structuredContent"]["decision"] == "select", answer
    assert answer["structuredContent"]["name"] == "echo", answer
