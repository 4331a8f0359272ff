"""MRTR through the gateway, driven by the official Python SDK (mcp 2.3): a client pinned
to 2026-07-28 cannot be sent `elicitation/create`, so when an upstream asks for it during
a call the gateway answers `input_required`, the SDK asks its elicitation callback and
retries with `inputResponses` and the `requestState` it was given, and the same upstream
call goes on. The upstreams: the real `everything` server (2025-era, asks by a request
during its call) and toolgate's conformance fixture asking twice in one call; a legacy
client of the same gateway is asked the ordinary way. One after the other: over stdio an
upstream's request names no call, so with two calls of one upstream in flight the
gateway's choice of client is a best guess (README, known limits).
"""

from __future__ import annotations

import pytest
from mcp import types

from gateway import START_TIMEOUT, http_gateway, sdk_client, stdio_upstreams, text, write_config

pytestmark = pytest.mark.anyio


class Answers:
    """An elicitation callback that fills every field of the form and keeps the messages."""

    def __init__(self, values: dict[str, str]):
        self.values = values
        self.asked: list[str] = []

    async def __call__(self, context, params) -> types.ElicitResult:
        self.asked.append(params.message)
        schema = getattr(params, "requested_schema", None) or {}
        if not isinstance(schema, dict):
            schema = schema.model_dump(by_alias=True, exclude_none=True)
        content = {}
        for name, prop in (schema.get("properties") or {}).items():
            kind = prop.get("type")
            if "default" in prop:
                content[name] = prop["default"]
            elif prop.get("enum"):
                content[name] = prop["enum"][0]
            elif kind == "boolean":
                content[name] = True
            elif kind in ("integer", "number"):
                content[name] = 1
            else:
                content[name] = self.values.get(name, "Ada")
        return types.ElicitResult(action="accept", content=content)


def config(toolgate_bin, peers, work):
    upstreams = {"everything": stdio_upstreams(peers, work)["everything"]}
    upstreams["fixture"] = {
        "command": str(toolgate_bin),
        "args": ["fixture", "--conformance"],
        "prefix": "fx",
        "connect_timeout_secs": START_TIMEOUT,
    }
    return write_config(
        work.path("toolgate.toml"), upstreams, {"mode": "direct", "startup_wait_ms": int(START_TIMEOUT * 1000)}
    )


async def test_a_modern_client_answers_an_upstreams_elicitation_by_mrtr(toolgate_bin, peers, work):
    async with http_gateway(toolgate_bin, config(toolgate_bin, peers, work), work, mode="direct") as gw:
        url = gw.wait_endpoint()
        results: dict[str, tuple] = {}

        async def run(era: str) -> None:
            answers = Answers({"name": "Alice", "color": "blue"})
            async with sdk_client(url, era=era, elicitation_callback=answers) as client:
                everything = await client.call_tool("everything_trigger-elicitation-request", {})
                twice = await client.call_tool("fx_test_input_required_result_multi_round", {})
                results[era] = (everything, twice, answers.asked)

        await run("2026-07-28")
        await run("legacy")

        for era, (everything, twice, asked) in results.items():
            assert not everything.is_error, (era, text(everything))
            assert "accept" in text(everything).lower(), (era, text(everything))
            # Both questions of the fixture's one call reached the user, and that call,
            # resumed rather than made again, saw both answers.
            assert not twice.is_error, (era, text(twice))
            assert text(twice) == "Alice likes blue", (era, text(twice))
            assert any("Step 1" in m for m in asked) and any("Step 2" in m for m in asked), (era, asked)
            assert len(asked) == 3, (era, asked)
