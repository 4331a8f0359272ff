"""Running toolgate in front of real MCP servers and talking to it with the official Python SDK.

Reusable by every real-peer test (direct mode now, guided mode later):

- `missing`: the rule for something optional that is absent (skip; fail under `CI`).
- `Peers`: where the installed servers live and how to start each one.
- `Workspace`: one test's temporary folder and the marker that identifies every process
  the test started, directly or through toolgate (see `leftover_processes`).
- `write_config`: a `toolgate.toml` from plain dicts.
- `exposed_name`: the name direct mode lists an upstream tool under.
- `stdio_session` / `http_session`: an SDK `Client` connected to a fresh toolgate over
  stdio or Streamable HTTP; on exit they stop toolgate and check that it left no process
  behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, NoReturn

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE, streamable_http_client

def missing(why: str) -> NoReturn:
    """A test needs something optional (the installed peers, a dataset) that is absent: it is
    skipped, saying why; with `CI` set, where `.ci/run` installs everything, it fails."""
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI is set, so this fails)", pytrace=False)
    pytest.skip(why)


# Set in the environment of every process a test starts; children inherit it, so a scan of
# /proc finds an upstream left behind even when its command line says nothing about the test.
MARKER_VAR = "TOOLGATE_PEERS_MARKER"

# How long a gateway gets to print its endpoint, and its upstreams to connect (slow CI
# machines start six servers on two cores).
START_TIMEOUT = 60.0
# How long processes get to go away after the gateway stopped.
EXIT_TIMEOUT = 10.0

NPM_SCOPE = "node_modules/@modelcontextprotocol"


@dataclass
class Peers:
    """The folder `.ci/run` installs the real servers into (npm packages and a venv), and
    the preload that keeps a Node server on 127.0.0.1 (`loopback.cjs`, beside this file)."""

    root: Path
    node: str
    loopback: Path = Path(__file__).resolve().parent / "loopback.cjs"

    def node_script(self, package: str) -> Path:
        return self.root / NPM_SCOPE / package / "dist" / "index.js"

    def py_bin(self, name: str) -> Path:
        return self.root / "py" / "bin" / name

    def missing(self) -> list[str]:
        """Whatever a test would need and is not installed."""
        need = [self.node_script(p) for p in ("server-everything", "server-filesystem", "server-memory", "server-basic-vanillajs")]
        need += [self.py_bin(b) for b in ("mcp-server-time", "mcp-server-git")]
        # The authorization server of the OAuth tests (test_oauth.py).
        need.append(self.root / "node_modules" / "oidc-provider" / "package.json")
        return [str(p) for p in need if not p.exists()]


@dataclass
class Workspace:
    """One test's folder (files for the servers, the config, logs) and its process marker."""

    dir: Path
    marker: str = field(default_factory=lambda: f"tgpeer-{uuid.uuid4().hex[:12]}")
    _children: int = 0

    def child_marker(self) -> str:
        """A marker of its own for one process tree the test starts (e.g. one gateway), so
        what that tree leaves behind can be told from the test's other processes."""
        self._children += 1
        return f"{self.marker}.{self._children}"

    def env(self, extra: dict[str, str] | None = None, marker: str | None = None) -> dict[str, str]:
        """The environment of a process this test starts: ours plus a marker."""
        env = dict(os.environ)
        env[MARKER_VAR] = marker or self.marker
        # `serve --http` keeps an embedded store under the state folder: this test's, not the user's.
        env["XDG_STATE_HOME"] = str(self.dir / "state")
        env.update(extra or {})
        return env

    def path(self, name: str) -> Path:
        return self.dir / name

    def leftovers(self, marker: str | None = None) -> list[str]:
        """With no `marker`: every process of this test (any of its markers, or its folder on
        the command line); else those carrying exactly `marker`."""
        if marker:
            return leftover_processes(marker, exact=True)
        return leftover_processes(self.marker, needle=str(self.dir))

    def wait_no_processes(self, marker: str | None = None, timeout: float = EXIT_TIMEOUT) -> list[str]:
        """Waits (bounded) until none is alive; returns those still alive."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.leftovers(marker)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.1)

    def kill_leftovers(self) -> list[str]:
        """SIGKILLs whatever is left (a safety net, so one failure does not leak into the next test)."""
        left = self.leftovers()
        for desc in left:
            try:
                os.kill(int(desc.split()[0]), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        return left


def leftover_processes(marker: str, needle: str | None = None, exact: bool = False) -> list[str]:
    """Live (non-zombie) processes other than this one whose environment carries `marker`
    (or, unless `exact`, a child marker of it) or whose command line mentions `needle`,
    as "PID cmdline" strings."""
    me = os.getpid()
    want = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry.name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        if state == "Z":
            continue
        marked = any(v == want or (not exact and v.startswith(want + b".")) for v in environ)
        if marked or (needle is not None and needle in cmdline):
            found.append(f"{entry.name} {cmdline}")
    return found


# ---------------------------------------------------------------------------------------
# Configuration


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (str, Path)):
        # A JSON string is a valid TOML basic string (same escapes, \uXXXX included).
        return json.dumps(str(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def exposed_name(server: str, tool: str) -> str:
    """The name direct mode lists a tool under (docs/configuration.md, "Exposed names"):
    `{server}_{tool}`, except that a tool whose name already starts with its server's name and
    `_` or `-` keeps its own name (`git_log` of server `git`, not `git_git_log`)."""
    if len(tool) > len(server) + 1 and tool.startswith(server) and tool[len(server)] in "_-":
        return tool
    return f"{server}_{tool}"


def write_config(path: Path, upstreams: dict[str, dict[str, Any]], gateway: dict[str, Any] | None = None) -> Path:
    """Writes a toolgate.toml: a `[gateway]` table and one `[upstreams.NAME]` table each.
    Stdio upstreams start with a minimal environment, so each is given the marker on
    purpose (`inherit_env`) unless its table says otherwise: the leftover check finds them."""
    lines = ["[gateway]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in (gateway or {}).items()]
    for name, table in upstreams.items():
        if "command" in table and "inherit_env" not in table:
            table = {**table, "inherit_env": [MARKER_VAR]}
        lines += ["", f"[upstreams.{json.dumps(name)}]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def stdio_upstreams(peers: Peers, work: Workspace) -> dict[str, dict[str, Any]]:
    """The five real servers as stdio upstreams, each given its own files in `work`."""
    files = work.path("files")
    files.mkdir(exist_ok=True)
    repo = work.path("repo")
    limits = {"connect_timeout_secs": START_TIMEOUT, "call_timeout_secs": 60}
    return {
        "everything": {
            "command": peers.node,
            "args": [peers.node_script("server-everything"), "stdio"],
            **limits,
        },
        "filesystem": {
            "command": peers.node,
            "args": [peers.node_script("server-filesystem"), files],
            **limits,
        },
        "memory": {
            "command": peers.node,
            "args": [peers.node_script("server-memory")],
            "env": {"MEMORY_FILE_PATH": str(work.path("memory.jsonl"))},
            **limits,
        },
        "time": {
            "command": peers.py_bin("mcp-server-time"),
            "args": ["--local-timezone", "UTC"],
            **limits,
        },
        "git": {
            "command": peers.py_bin("mcp-server-git"),
            "args": ["--repository", repo],
            **limits,
        },
    }


# Gateway settings for the tests: wait for every upstream before answering tools/list, so
# a slow start shows up as a complete list a little later rather than a partial one.
TEST_GATEWAY = {"mode": "direct", "startup_wait_ms": int(START_TIMEOUT * 1000)}


# ---------------------------------------------------------------------------------------
# Sessions


def sdk_client(server: Any, era: str | None = None, **kw: Any) -> Client:
    # The SDK's defaults (mode "auto": a server/discover probe, then 2026-07-28 with
    # toolgate, or the initialize handshake with a 2025-era server), except cache=None so
    # every list really reaches the gateway, and a read timeout so a lost response fails
    # the test instead of hanging. `era` pins the client's mode ("legacy", "2026-07-28").
    if era is not None:
        kw["mode"] = era
    return Client(server, cache=None, read_timeout_seconds=90, **kw)


@asynccontextmanager
async def stdio_session(
    toolgate: Path, config: Path, work: Workspace, mode: str = "direct", extra: list[str] | None = None, **client_kw: Any
) -> AsyncIterator[Client]:
    """`toolgate serve --stdio` started by the SDK's own stdio transport."""
    marker = work.child_marker()
    params = StdioServerParameters(
        command=str(toolgate),
        args=["serve", "--stdio", "--config", str(config), "--mode", mode, *(extra or [])],
        # The SDK passes only a minimal environment: add the marker, RUST_LOG and the
        # variables a test sets for the gateway itself (TOOLGATE_TEST_*).
        env={MARKER_VAR: marker, **{k: v for k, v in os.environ.items() if k.startswith(("RUST_", "TOOLGATE_TEST_"))}},
        cwd=str(work.dir),
    )
    with open(work.path("toolgate-stdio.log"), "a") as errlog:
        async with sdk_client(stdio_client(params, errlog=errlog), **client_kw) as client:
            yield client
    left = work.wait_no_processes(marker)
    assert not left, f"processes left after the stdio session ended: {left}"


class HttpGateway:
    """`toolgate serve --http 127.0.0.1:0`, its endpoint read from the banner on stderr."""

    def __init__(self, toolgate: Path, config: Path, work: Workspace, mode: str = "direct", extra: list[str] | None = None):
        self.log_path = work.path("toolgate-http.log")
        self.marker = work.child_marker()
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [str(toolgate), "serve", "--http", "127.0.0.1:0", "--config", str(config), "--mode", mode, *(extra or [])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=work.env(marker=self.marker),
            cwd=work.dir,
        )
        self._endpoint = threading.Event()
        self.url: str | None = None
        # Keep draining stderr for the process's whole life, so it never blocks on a full pipe.
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        with open(self.log_path, "a") as log:
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append(line)
                log.write(line + "\n")
                log.flush()
                m = re.match(r"MCP endpoint: (http://\S+/mcp)\b", line)
                if m and self.url is None:
                    self.url = m.group(1)
                    self._endpoint.set()
        self._endpoint.set()

    def wait_endpoint(self, timeout: float = START_TIMEOUT) -> str:
        self._endpoint.wait(timeout)
        if self.url is None:
            code = self.proc.poll()
            tail = "\n".join(self.lines[-30:])
            raise AssertionError(f"toolgate printed no endpoint (exit code {code}); stderr:\n{tail}")
        return self.url

    @property
    def base(self) -> str:
        assert self.url
        return self.url.removesuffix("/mcp")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, then wait (bounded; SIGKILL after). Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"toolgate did not exit within {timeout} s of SIGTERM")
        self._drain.join(5)
        return self.proc.returncode


@asynccontextmanager
async def http_gateway(
    toolgate: Path, config: Path, work: Workspace, mode: str = "direct", extra: list[str] | None = None
) -> AsyncIterator[HttpGateway]:
    """A running HTTP gateway; on exit it must stop cleanly on SIGTERM and leave nothing behind."""
    gw = HttpGateway(toolgate, config, work, mode, extra)
    try:
        await anyio.to_thread.run_sync(gw.wait_endpoint)
        yield gw
    finally:
        code = await anyio.to_thread.run_sync(gw.stop)
    assert code == 0, f"toolgate exited with {code} after SIGTERM"
    left = work.wait_no_processes(gw.marker)
    assert not left, f"processes left after the HTTP gateway stopped: {left}"


def http_client(url: str, max_sse_event_size: int | None = DEFAULT_MAX_SSE_EVENT_SIZE, **client_kw: Any) -> Client:
    """An SDK client for a Streamable HTTP endpoint (what `Client(url)` builds), with the
    SDK's limit on one SSE event (1 MiB by default) adjustable."""
    return sdk_client(streamable_http_client(url, max_sse_event_size=max_sse_event_size), **client_kw)


@asynccontextmanager
async def http_session(
    toolgate: Path, config: Path, work: Workspace, mode: str = "direct", extra: list[str] | None = None, **client_kw: Any
) -> AsyncIterator[Client]:
    """A fresh HTTP gateway and one SDK client session on its `/mcp` endpoint."""
    async with http_gateway(toolgate, config, work, mode, extra) as gw:
        async with http_client(gw.wait_endpoint(), **client_kw) as client:
            yield client


def session(transport: str, toolgate: Path, config: Path, work: Workspace, mode: str = "direct", **client_kw: Any):
    """`stdio_session` or `http_session` by name (for tests parametrized over both)."""
    return {"stdio": stdio_session, "http": http_session}[transport](toolgate, config, work, mode, **client_kw)


# ---------------------------------------------------------------------------------------
# Results


def text(result: Any) -> str:
    """The text blocks of a CallToolResult, joined."""
    return "".join(getattr(c, "text", "") for c in result.content if getattr(c, "type", None) == "text")


async def all_tools(client: Client) -> list[Any]:
    """Every tool, following nextCursor (bounded)."""
    tools, cursor = [], None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools
    raise AssertionError("tools/list never ended")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
