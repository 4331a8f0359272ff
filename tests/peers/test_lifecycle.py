"""The gateway's life with real servers behind it: starting, an upstream crashing, and
stopping when the client goes away, with no upstream process outliving it."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time

import anyio
import pytest
from mcp.types import ToolListChangedNotification

from gateway import (
    START_TIMEOUT,
    TEST_GATEWAY,
    Workspace,
    all_tools,
    leftover_processes,
    session,
    stdio_session,
    stdio_upstreams,
    text,
    write_config,
)

pytestmark = pytest.mark.anyio


class RawStdio:
    """toolgate over stdio spoken to by hand, so the test (not an SDK) decides when stdin
    closes and can watch the process exit by itself."""

    def __init__(self, toolgate, config, work: Workspace):
        self.marker = work.child_marker()
        self.log = open(work.path("toolgate-raw.log"), "w")
        self.proc = subprocess.Popen(
            [str(toolgate), "serve", "--stdio", "--config", str(config), "--mode", "direct"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=work.env(marker=self.marker), cwd=work.dir,
        )
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.next_id = 1

    def send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None, timeout: float = START_TIMEOUT) -> dict:
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params else {})})
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == rid and "method" not in msg:
                    assert "error" not in msg, f"{method}: {msg['error']}"
                    return msg["result"]
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to {method} within {timeout} s"
            if self.sel.select(left):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"toolgate closed stdout before answering {method} (exit {self.proc.poll()})"
                self.buf += chunk

    def close(self) -> None:
        self.sel.close()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def test_stdio_gateway_exits_by_itself_when_the_client_hangs_up(toolgate_bin, peers, work, repo):
    """Closing stdin ends the session: toolgate stops every upstream and exits 0, without
    being signalled (the SDK would kill it after a grace period and hide a hang)."""
    cfg = write_config(work.path("toolgate.toml"), stdio_upstreams(peers, work), TEST_GATEWAY)
    gw = RawStdio(toolgate_bin, cfg, work)
    try:
        init = gw.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "raw-peer-test", "version": "0"}})
        assert init["serverInfo"]["name"] == "toolgate"
        assert init["protocolVersion"] == "2025-06-18"
        gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        names = {t["name"] for t in gw.request("tools/list")["tools"]}
        assert {"everything_echo", "filesystem_read_text_file", "memory_read_graph",
                "time_get_current_time", "git_status"} <= names
        r = gw.request("tools/call", {"name": "everything_echo", "arguments": {"message": "raw"}})
        assert r["content"] == [{"type": "text", "text": "Echo: raw"}] and not r.get("isError")
        # All five upstreams are running, each under this gateway's marker.
        running = leftover_processes(gw.marker, exact=True)
        for server in ("server-everything", "server-filesystem", "server-memory", "mcp-server-time", "mcp-server-git"):
            assert any(server in p for p in running), f"{server} not among {running}"

        gw.proc.stdin.close()
        try:
            code = gw.proc.wait(15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"toolgate still running 15 s after its stdin closed; processes: {work.leftovers(gw.marker)}")
        assert code == 0, f"exit code {code}"
        left = work.wait_no_processes(gw.marker, timeout=5)
        assert not left, f"upstreams outlived the gateway: {left}"
    finally:
        gw.close()


def test_a_killed_gateway_leaves_no_upstream_behind(toolgate_bin, peers, work, repo):
    """SIGKILL (no chance to clean up): every upstream still goes away, because its stdin
    pipe closes with the gateway (nothing else holds it open)."""
    cfg = write_config(work.path("toolgate.toml"), stdio_upstreams(peers, work), TEST_GATEWAY)
    gw = RawStdio(toolgate_bin, cfg, work)
    try:
        gw.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "raw-peer-test", "version": "0"}})
        gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert len(gw.request("tools/list")["tools"]) == 53  # everything lists 16 to toolgate
        assert len(leftover_processes(gw.marker, exact=True)) == 6  # the gateway and five servers
        gw.proc.kill()
        gw.proc.wait(10)
        left = work.wait_no_processes(gw.marker, timeout=15)
        assert not left, f"upstreams outlived a killed gateway: {left}"
    finally:
        gw.close()


def crash_config(peers, work: Workspace):
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k in ("everything", "time")}
    return write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)


async def kill_time_server_and_call_until_back(client, work: Workspace) -> tuple[list[str], int, int]:
    """SIGKILLs the real mcp-server-time behind the gateway, then calls one of its tools
    until it answers again (bounded). Returns the outcomes ("ok" or the error text) and the
    old and new server pids."""

    def time_server() -> list[int]:
        return [int(p.split()[0]) for p in work.leftovers() if "mcp-server-time" in p]

    names = {t.name for t in await all_tools(client)}
    assert {"time_get_current_time", "everything_echo"} <= names
    [old] = time_server()
    os.kill(old, signal.SIGKILL)
    outcomes = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
        outcomes.append("ok" if not r.is_error else text(r))
        if not r.is_error:
            break
        await anyio.sleep(0.2)
    print("outcomes after SIGKILL:", outcomes)
    new = time_server()
    return outcomes, old, (new[0] if len(new) == 1 else -1)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_crashed_upstream_is_restarted(transport, toolgate_bin, peers, work):
    """SIGKILL a real upstream mid-session: calls to it fail as tool errors (never as
    protocol errors), the other upstream keeps working, and the gateway restarts it."""
    list_changed = []

    async def on_message(message) -> None:
        if isinstance(message, ToolListChangedNotification):
            list_changed.append(time.monotonic())

    # Pushed notifications outside a request are the older revisions' (a 2026-07-28 client
    # asks for them with subscriptions/listen), so this client speaks 2025-11-25.
    async with session(
        transport, toolgate_bin, crash_config(peers, work), work, message_handler=on_message, era="legacy"
    ) as client:
        await all_tools(client)
        before = len(list_changed)
        outcomes, old, new = await kill_time_server_and_call_until_back(client, work)
        echo = await client.call_tool("everything_echo", {"message": "still here"})
        relisted = {t.name for t in await all_tools(client)}
        # The client heard that the list changed (the tools went away, and came back).
        with anyio.move_on_after(10):
            while len(list_changed) - before < 2:
                await anyio.sleep(0.1)
    assert len(list_changed) - before >= 2, f"tools/list_changed notifications after the crash: {len(list_changed) - before}"
    assert outcomes[-1] == "ok", f"time never came back: {outcomes[-5:]}"
    # The first call after the kill cannot have succeeded on the dead process.
    assert len(outcomes) > 1, "the call right after SIGKILL succeeded: was the process really killed?"
    assert all("time" in o for o in outcomes[:-1]), outcomes
    assert new not in (old, -1), f"restarted server: {new}, killed: {old}"
    assert text(echo) == "Echo: still here"
    assert "time_get_current_time" in relisted


async def test_a_call_to_a_restarting_upstream_says_so(toolgate_bin, peers, work):
    async with stdio_session(toolgate_bin, crash_config(peers, work), work) as client:
        outcomes, _, _ = await kill_time_server_and_call_until_back(client, work)
    assert outcomes[-1] == "ok", outcomes
    # Failing while the upstream restarts is fine (or waiting for it); "Unknown tool" is not.
    assert not [e for e in outcomes if "Unknown tool" in e], outcomes


async def test_a_call_right_after_initialize_waits_for_the_upstream(toolgate_bin, peers, work):
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k == "time"}
    cfg = write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)
    async with stdio_session(toolgate_bin, cfg, work) as client:
        # A client that knows the tool (e.g. from its last session) calls it at once.
        r = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
    # Asserted outside the session, so a failure is a plain AssertionError.
    assert not r.is_error, text(r)
    assert r.structured_content["timezone"] == "UTC"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_slow_calls_time_out_and_cancelled_calls_do_not_block(transport, toolgate_bin, peers, work):
    """call_timeout_secs turns a slow real call into a tool error; a call the client gives
    up on (notifications/cancelled) does not hold the session up."""
    everything = stdio_upstreams(peers, work)["everything"]
    ups = {"hasty": {**everything, "call_timeout_secs": 1.5}, "patient": {**everything, "call_timeout_secs": 600}}
    cfg = write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)
    async with session(transport, toolgate_bin, cfg, work) as client:
        names = {t.name for t in await all_tools(client)}
        assert {"hasty_trigger-long-running-operation", "patient_trigger-long-running-operation"} <= names
        r = await client.call_tool("hasty_trigger-long-running-operation", {"duration": 8, "steps": 2})
        # The error names the setting: the gateway's timeout ended the call, not its end.
        assert r.is_error and "call_timeout_secs" in text(r), text(r)

        with anyio.move_on_after(0.5) as scope:
            await client.call_tool("patient_trigger-long-running-operation", {"duration": 120, "steps": 2})
        assert scope.cancelled_caught
        # Had the session waited for the cancelled call, this echo would come after it (two
        # minutes); the bound is a safety net only, far from either outcome.
        with anyio.fail_after(60):
            r = await client.call_tool("patient_echo", {"message": "after cancel"})
        assert text(r) == "Echo: after cancel"
