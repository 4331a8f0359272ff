"""Fixtures of the real-client suite: the toolgate binary on PATH (as the README's snippets
expect), the clients installed by .ci/run, a fixture upstream, a running HTTP gateway, and
the README's own connection snippets.

Environment:
  TOOLGATE_BIN      the toolgate binary (default: $CARGO_TARGET_DIR/debug/toolgate, else
                    target/debug/toolgate in the repository)
  TOOLGATE_CLIENTS  the npm prefix holding the clients (default: .peers/clients)

Clients that are not installed skip the tests (`missing`), or fail them with CI set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()

# Two tools of the fixture's test server: one that echoes (any size, `_result_bytes`) and
# one that adds (a small structured answer).
CATALOG = [
    {"server": "alpha", "tool": {"name": "echo", "description": "Echo the message back.",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}},
    {"server": "alpha", "tool": {"name": "add_numbers", "description": "Add two integers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     "required": ["a", "b"]}}},
]


def _path(var: str, default: Path) -> Path:
    v = os.environ.get(var)
    p = Path(v) if v else default
    return (p if p.is_absolute() else REPO / p).resolve()


@dataclass
class Env:
    """One test's world: a folder, a bin folder with `toolgate` in it, a config."""
    dir: Path
    bin: Path
    clients: Path
    config: Path

    def env(self, **extra: str) -> dict[str, str]:
        """A minimal environment with a throwaway HOME, toolgate and the clients on PATH."""
        home = self.dir / "home"
        home.mkdir(exist_ok=True)
        path = f"{self.bin}:{self.clients / 'node_modules' / '.bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        base = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", "NO_COLOR": "1", "TERM": "dumb"}
        return {**base, **extra}

    def run(self, args: list[str], timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=self.env(**extra), cwd=self.dir / "project", capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def missing(why: str):
    """Something optional is absent (the clients): skip, saying why; with `CI` set, where
    `.ci/run` installs everything, fail instead."""
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI is set, so this fails)", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def toolgate_bin() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    path = _path("TOOLGATE_BIN", target / "debug" / "toolgate")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no toolgate binary at {path}: run `cargo build -p toolgate-cli` or set TOOLGATE_BIN", pytrace=False)
    return path


@pytest.fixture(scope="session")
def clients() -> Path:
    root = _path("TOOLGATE_CLIENTS", REPO / ".peers" / "clients")
    absent = [b for b in ("claude", "codex", "opencode", "mcp-inspector-cli")
              if not (root / "node_modules" / ".bin" / b).exists()]
    if absent:
        missing(f"clients not installed under {root} (bash .ci/run installs them): missing {absent}")
    return root


@pytest.fixture
def world(tmp_path, toolgate_bin, clients) -> Env:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "toolgate").symlink_to(toolgate_bin)
    (tmp_path / "project").mkdir()
    (tmp_path / "catalog.json").write_text(json.dumps(CATALOG))
    config = tmp_path / "toolgate.toml"
    config.write_text(
        "[gateway]\nstartup_wait_ms = 30000\n\n[upstreams.alpha]\n"
        f"command = {json.dumps(str(toolgate_bin))}\n"
        f"args = {json.dumps(['fixture', '--catalog', str(tmp_path / 'catalog.json'), '--server', 'alpha'])}\n"
    )
    return Env(dir=tmp_path, bin=tmp_path / "bin", clients=clients, config=config)


class Gateway:
    """`toolgate serve --http 127.0.0.1:0`; its endpoint read from the banner."""

    def __init__(self, world: Env):
        self.proc = subprocess.Popen(
            ["toolgate", "serve", "--http", "127.0.0.1:0", "--config", str(world.config)],
            env=world.env(), cwd=world.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)
        self.lines: list[str] = []
        self.url: str | None = None
        found = threading.Event()

        def drain() -> None:
            assert self.proc.stderr
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append(line)
                m = re.match(r"MCP endpoint: (http://\S+/mcp)\b", line)
                if m and self.url is None:
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=drain, daemon=True).start()
        found.wait(90)
        if self.url is None:
            self.stop()
            raise AssertionError("toolgate printed no endpoint:\n" + "\n".join(self.lines[-30:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def gateway(world):
    gw = Gateway(world)
    yield gw
    gw.stop()


# ---------------------------------------------------------------------------------------
# The README's snippets, as a user copies them


def readme_block(heading: str) -> str:
    """The first code block (indented or fenced) after the bold `heading` in the README."""
    start = README.index(f"**{heading}**")
    rest = README[start:]
    fenced = re.search(r"```[a-z]*\n(.*?)```", rest, re.S)
    indented = re.search(r"\n\n((?:    .+\n)+)", rest)
    blocks = [m for m in (fenced, indented) if m]
    first = min(blocks, key=lambda m: m.start())
    text = first.group(1)
    return "\n".join(line[4:] if first is indented else line for line in text.splitlines())


def personalise(snippet: str, world: Env, url: str | None = None) -> str:
    """The snippet with this test's config path and gateway address in place of the README's."""
    out = snippet.replace("/path/to/toolgate.toml", str(world.config))
    if url:
        out = out.replace("http://127.0.0.1:8377/mcp", url)
    return out
