"""Codex (`@openai/codex`, pinned in .ci/run) with a throwaway CODEX_HOME, connected by the
README's `[mcp_servers.toolgate]` table, runs `codex exec` against the scripted Responses
API; the test checks what Codex showed the model."""

from __future__ import annotations

import re

from conftest import personalise, readme_block
from fake_models import FakeModel
from tasks import check_direct, check_guided, direct_task, first_request_shows, guided_task


def readme_table(kind: str, world, url: str | None = None) -> str:
    """The README's Codex table for `stdio` as written, or `http` with its `url` line
    uncommented in place of `command` and `args`."""
    block = personalise(readme_block("Codex"), world, url)
    if kind == "stdio":
        return block
    lines = []
    for line in block.splitlines():
        if line.startswith(("command", "args")):
            continue
        m = re.match(r"#\s*(url\s*=.*)", line)
        lines.append(m.group(1) if m else line)
    return "\n".join(lines)


def run_codex(world, model: FakeModel, table: str, task: str) -> None:
    home = world.dir / "codex-home"
    home.mkdir()
    # The model provider is this test's; the MCP table is the README's. A generous startup
    # timeout: a loaded CI machine starts a debug build slowly.
    (home / "config.toml").write_text(
        f'model = "gpt-test"\nmodel_provider = "scripted"\n\n'
        f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{model.url}/v1"\n'
        f'wire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n\n'
        f"{table}\nstartup_timeout_sec = 60\n"
    )
    p = world.run(["codex", "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", task],
                  timeout=180, CODEX_HOME=str(home), SCRIPTED_API_KEY="test")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]


def test_codex_over_stdio_routes_executes_and_continues(world):
    model = FakeModel(guided_task())
    try:
        run_codex(world, model, readme_table("stdio", world), "Echo hi through toolgate, all of it")
    finally:
        model.close()
    check_guided(model.script.t)
    # Codex as it ships lists the server's tools, schemas included, from the first request.
    first_request_shows(model.script.t, "route", "task")


def test_codex_over_http_calls_a_tool_on_the_direct_surface(world, gateway):
    direct = gateway.url.removesuffix("/mcp") + "/mcp/direct"
    model = FakeModel(direct_task())
    try:
        run_codex(world, model, readme_table("http", world, direct), "Echo the message")
    finally:
        model.close()
    check_direct(model.script.t)
