"""Fixtures of the real-peer suite: the toolgate binary, the installed peers, one workspace
per test (with the leftover-process check), a git repository, and server-everything over
Streamable HTTP.

Environment:
  TOOLGATE_BIN     the toolgate binary (default: $CARGO_TARGET_DIR/debug/toolgate, else
                   target/debug/toolgate in the repository)
  TOOLGATE_PEERS   where .ci/run installed the peers (default: .peers in the repository)

Peers that are not installed skip the tests that need them (`gateway.missing`), or fail
them with CI set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gateway import MARKER_VAR, Peers, Workspace, missing, sdk_client, free_port, stdio_upstreams
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[2]


def _from_env(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    path = Path(value) if value else default
    return path if path.is_absolute() else (REPO / path)


@pytest.fixture(scope="session")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def toolgate_bin() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    path = _from_env("TOOLGATE_BIN", target / "debug" / "toolgate")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no toolgate binary at {path}: run `cargo build -p toolgate-cli` or set TOOLGATE_BIN", pytrace=False)
    return path.resolve()


@pytest.fixture(scope="session")
def peers() -> Peers:
    root = _from_env("TOOLGATE_PEERS", REPO / ".peers").resolve()
    node = shutil.which("node")
    if node is None:
        missing("node is not on PATH (the real peers are Node and Python servers)")
    p = Peers(root=root, node=node)
    if absent := p.missing():
        missing(f"peers not installed (bash .ci/run installs them): missing {absent}")
    return p


@pytest.fixture
def work(tmp_path: Path):
    """This test's folder and marker. Afterwards nothing the test started may still run."""
    w = Workspace(tmp_path)
    yield w
    # Shown by pytest only when the test failed: the last lines of every log of the test.
    for log in sorted(tmp_path.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()
        print(f"---- {log.name} (last 40 of {len(lines)} lines)", *lines[-40:], sep="\n")
    left = w.wait_no_processes()
    if left:
        w.kill_leftovers()
        pytest.fail(f"processes left running after the test (now killed): {left}", pytrace=False)


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Peer Test",
        "GIT_AUTHOR_EMAIL": "peer@test.invalid",
        "GIT_COMMITTER_NAME": "Peer Test",
        "GIT_COMMITTER_EMAIL": "peer@test.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo.parent),
    }
    out = subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True, timeout=30)
    return out.stdout


@pytest.fixture
def repo(work: Workspace) -> Path:
    """A git repository with one commit, one modified file and one untracked file."""
    r = work.path("repo")
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "tracked.txt").write_text("first line\n")
    git(r, "add", "tracked.txt")
    git(r, "commit", "-q", "-m", "peer suite: initial commit")
    (r / "tracked.txt").write_text("first line\nsecond line\n")
    (r / "untracked.txt").write_text("new\n")
    return r


def start_everything(work: Workspace, peers: Peers, mode: str, port: int | None = None) -> tuple[subprocess.Popen, int]:
    """server-everything in its `streamableHttp` or `sse` mode on 127.0.0.1 (forced by
    loopback.cjs), on `port` or a free one; returns the process and its port once it listens."""
    ready = {"streamableHttp": "listening on port {port}", "sse": "Server is running on port {port}"}[mode]
    log_path = work.path(f"everything-{mode}.log")
    for _attempt in range(1 if port else 5):
        chosen = port or free_port()
        # The log is appended to (a restart keeps the earlier lines): read only what is new.
        seen = log_path.stat().st_size if log_path.exists() else 0
        log = open(log_path, "a")
        proc = subprocess.Popen(
            [peers.node, str(peers.node_script("server-everything")), mode],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=work.env({"PORT": str(chosen), "NODE_OPTIONS": f'--require "{peers.loopback}"'}),
            cwd=work.dir,
        )
        log.close()
        deadline = time.monotonic() + 30
        state = "starting"
        while time.monotonic() < deadline:
            with open(log_path, errors="replace") as f:
                f.seek(seen)
                out = f.read()
            if ready.format(port=chosen) in out:
                state = "up"
                break
            if "already in use" in out or proc.poll() is not None:
                state = "retry"
                break
            time.sleep(0.1)
        if state == "up":
            # The loopback rule: the server must listen on 127.0.0.1 only, never on all interfaces.
            assert listening_addresses(chosen) == {"127.0.0.1"}, f"server-everything listens on {listening_addresses(chosen)}"
            return proc, chosen
        stop_process(proc)
        if state == "starting":
            pytest.fail(f"server-everything did not start ({mode}):\n{log_path.read_text()}", pytrace=False)
    pytest.fail(f"server-everything could not get a port ({mode}):\n{log_path.read_text()}", pytrace=False)


def stop_process(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def everything_http(work: Workspace, peers: Peers):
    """server-everything over Streamable HTTP; yields its /mcp URL, stopped after the test
    (before the leftover check of `work`)."""
    proc, port = start_everything(work, peers, "streamableHttp")
    yield f"http://127.0.0.1:{port}/mcp"
    stop_process(proc)


async def _refuse(*_args, **_kw):
    from mcp import types
    return types.ErrorData(code=-32603, message="the reference client answers no requests")


URL_ELICITATION_ONLY = {"trigger-url-elicitation"}
GATEWAY_LIKE_CLIENT = dict(sampling_callback=_refuse, elicitation_callback=_refuse, list_roots_callback=_refuse)


@pytest.fixture(scope="session")
async def reference_tools(peers: Peers, tmp_path_factory) -> dict[str, list[dict]]:
    """Each server's own tools/list (as JSON), asked directly with the SDK, without toolgate:
    what the gateway's list is compared with."""
    w = Workspace(tmp_path_factory.mktemp("reference"))
    w.path("repo").mkdir()
    git(w.path("repo"), "init", "-q")
    out = {}
    with open(w.path("servers.log"), "w") as errlog:
        for name, up in stdio_upstreams(peers, w).items():
            params = StdioServerParameters(
                command=str(up["command"]), args=[str(a) for a in up["args"]],
                env={**up.get("env", {}), MARKER_VAR: w.marker})
            # Declare what toolgate's upstream client declares (sampling, elicitation,
            # roots), since servers such as everything list more tools to such a client.
            async with sdk_client(stdio_client(params, errlog=errlog), **GATEWAY_LIKE_CLIENT) as client:
                tools = (await client.list_tools()).tools
            assert tools, f"{name} listed no tools"
            # The SDK client also declares URL-mode elicitation, which toolgate's upstream
            # client does not (it relays form elicitation), so leave out the tool that needs it.
            tools = [t for t in tools if t.name not in URL_ELICITATION_ONLY]
            out[name] = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]
    assert not w.wait_no_processes(), "reference servers left running"
    return out


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on `port` (from /proc/net/tcp{,6})."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, p = local.split(":")
            if state != "0A" or int(p, 16) != port:  # 0A: LISTEN
                continue
            if len(addr) == 8:
                found.add(".".join(str(b) for b in reversed(bytes.fromhex(addr))))
            else:
                found.add("::" if int(addr, 16) == 0 else addr)
    return found
