"""The official Python SDK ends an HTTP session with DELETE and accepts 200 or 204: toolgate
answers so, and the SDK's exit is quiet (it used to log "Session termination failed: 202"
on every exit)."""

from __future__ import annotations

import logging

import pytest

from gateway import TEST_GATEWAY, http_session, stdio_upstreams, write_config

pytestmark = pytest.mark.anyio


async def test_the_sdk_ends_its_session_without_a_warning(toolgate_bin, peers, work, caplog):
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k == "time"}
    cfg = write_config(work.path("toolgate.toml"), ups, TEST_GATEWAY)
    with caplog.at_level(logging.DEBUG, logger="mcp.client.streamable_http"):
        async with http_session(toolgate_bin, cfg, work) as client:
            assert (await client.list_tools()).tools
    records = [r for r in caplog.records if r.name == "mcp.client.streamable_http"]
    assert not [r.getMessage() for r in records if "termination failed" in r.getMessage()]
