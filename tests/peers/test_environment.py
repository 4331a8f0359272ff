"""What a stdio upstream sees of the gateway's environment: a minimal set (PATH, HOME,
LANG, ...), the names its `inherit_env` asks for, and its own `env`; nothing else. The real
server-everything's `get-env` tool returns its whole environment to any caller, so a secret
given to one upstream must not reach another (issue 18, item 2)."""

from __future__ import annotations

import json
import os

import pytest

from gateway import MARKER_VAR, TEST_GATEWAY, session, text, write_config

pytestmark = pytest.mark.anyio

GATEWAY_SECRET = "TOOLGATE_TEST_GATEWAY_SECRET"
PASSED_ON = "TOOLGATE_TEST_PASSED_ON"


def everything(peers, **table):
    return {"command": peers.node, "args": [peers.node_script("server-everything"), "stdio"],
            "connect_timeout_secs": 60, **table}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_secret_given_to_one_upstream_is_not_visible_to_another(toolgate_bin, peers, work, transport, monkeypatch):
    # The gateway's own environment holds a secret of its own and one meant for `two`.
    monkeypatch.setenv(GATEWAY_SECRET, "gateway-only")
    monkeypatch.setenv(PASSED_ON, "for-two")
    ups = {
        "one": everything(peers, env={"ONE_TOKEN": "one-secret"}),
        "two": everything(peers, inherit_env=[MARKER_VAR, PASSED_ON]),
    }
    cfg = write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)
    async with session(transport, toolgate_bin, cfg, work) as client:
        seen = {}
        for name in ups:
            r = await client.call_tool(f"{name}_get-env", {})
            assert not r.is_error, text(r)
            seen[name] = json.loads(text(r))
    one, two = seen["one"], seen["two"]
    assert one["ONE_TOKEN"] == "one-secret"
    assert "ONE_TOKEN" not in two, "one upstream's secret reached another"
    assert two[PASSED_ON] == "for-two", "inherit_env passes the names it lists"
    assert PASSED_ON not in one
    assert GATEWAY_SECRET not in one and GATEWAY_SECRET not in two, "the gateway's environment leaked"
    # What every program needs still arrives.
    for env in (one, two):
        assert env["PATH"] == os.environ["PATH"]
        assert "HOME" in env
