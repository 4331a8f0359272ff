"""Claude Code (`@anthropic-ai/claude-code`, pinned in .ci/run) with a throwaway HOME and
its default settings, connected by the README's `claude mcp add-json` lines, runs `claude -p`
against the scripted Messages API; the test checks what Claude Code showed the model, from
its first request on (docs/clients.md)."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from conftest import REPO, Gateway, personalise, readme_block
from fake_models import FakeModel
from tasks import check_direct, check_guided, direct_task, first_request_shows, guided_task


def claude_env(model: FakeModel) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        # ENABLE_TOOL_SEARCH is left unset, as Claude Code ships: it defers MCP tools behind
        # its ToolSearch unless they (or their server entry) ask to be loaded.
        # `claude -p` waits for MCP servers to connect before the first request (by default
        # it starts without those still connecting, which a loaded machine makes likely).
        "MCP_CONNECTION_NONBLOCKING": "0",
    }


def readme_line(kind: str) -> list[str]:
    """The README's `claude mcp add-json NAME JSON` line for `http` or `stdio`; each entry
    asks Claude Code to load toolgate's tools up front (`"alwaysLoad": true`)."""
    lines = [shlex.split(l) for l in readme_block("Claude Code").splitlines() if l.startswith("claude mcp add-json")]
    assert len(lines) == 2, f"the README's Claude Code block needs two `claude mcp add-json` lines: {lines}"
    entries = [json.loads(l[4]) for l in lines]
    names = [l[3] for l in lines]
    assert len(set(names)) == 2, f"both README lines use one name: {names}"
    for name, entry in zip(names, entries):
        assert entry.get("alwaysLoad") is True, f"the README's {name} entry does not set \"alwaysLoad\": true: {entry}"
    return next(l for l, e in zip(lines, entries) if (e.get("type") == "http") == (kind == "http"))


def run_claude(world, model: FakeModel, server: str, task: str):
    p = world.run(["claude", "-p", task, "--allowedTools", f"mcp__{server}", "--output-format", "json"],
                  timeout=180, **claude_env(model))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p


def test_claude_code_over_stdio_routes_executes_and_continues(world):
    args = readme_line("stdio")
    args = shlex.split(personalise(shlex.join(args), world))
    added = world.run(args)
    assert added.returncode == 0, added.stdout + added.stderr
    listed = world.run(["claude", "mcp", "list"])
    assert "toolgate-stdio" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr
    model = FakeModel(guided_task())
    try:
        run_claude(world, model, "toolgate-stdio", "Echo hi through toolgate, all of it")
    finally:
        model.close()
    check_guided(model.script.t)
    first_request_shows(model.script.t, "route", "task")


def test_claude_code_over_http_calls_a_tool_on_the_direct_surface(world, gateway):
    args = readme_line("http")
    # The README's endpoint, on this gateway's port, and its direct surface.
    args = shlex.split(personalise(shlex.join(args), world, gateway.url.removesuffix("/mcp") + "/mcp/direct"))
    added = world.run(args)
    assert added.returncode == 0, added.stdout + added.stderr
    model = FakeModel(direct_task())
    try:
        run_claude(world, model, "toolgate", "Add 2 and 40")
    finally:
        model.close()
    check_direct(model.script.t)


def test_claude_code_sees_that_a_gateway_behind_oauth_needs_authentication(world):
    """A gateway with `[auth.oauth]` in front of a real authorization server (oidc-provider,
    as tests/peers/test_oauth.py runs it): Claude Code follows the 401's resource metadata to
    the server and reports that the gateway needs the user to authenticate."""
    import shutil
    import sys

    sys.path.insert(0, str(REPO / "tests" / "peers"))
    from oauth_provider import Provider, free_port

    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    with open(world.config, "a") as f:
        f.write(f'\n[auth.oauth]\nissuer = "{issuer}"\nrequired_scopes = ["mcp"]\n')
    gw = Gateway(world)
    try:
        peers = os.environ.get("TOOLGATE_PEERS") or str(REPO / ".peers")
        with Provider(shutil.which("node"), REPO, world.dir / "idp", port=idp_port, resources=[gw.url], peers=peers):
            added = world.run(["claude", "mcp", "add", "--transport", "http", "toolgate", gw.url])
            assert added.returncode == 0, added.stdout + added.stderr
            listed = world.run(["claude", "mcp", "list"])
            line = next((l for l in listed.stdout.splitlines() if l.startswith("toolgate:")), "")
            assert "Needs authentication" in line, listed.stdout + listed.stderr
    finally:
        gw.stop()
