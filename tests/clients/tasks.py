"""The tasks the scripted model drives a client through, and what the model must have been
shown at each step (the tool results as the client passed them back)."""

from __future__ import annotations

import re

from fake_models import Script, Transcript

# Large enough for several pages at the default 4,000-token budget.
ECHO_BYTES = 30_000


def _cursor(t: Transcript) -> dict:
    shown = t.result("execute")
    m = re.search(r"pg-[A-Za-z0-9_-]+", shown)
    assert m, f"the model was shown no cursor after execute: {shown[:500]}"
    return {"cursor": m.group(0)}


def guided_task() -> Script:
    """route -> execute (a paged result) -> continue with the cursor the model was shown."""
    return Script([
        lambda t: ("route", {"task": "echo a message back"}),
        lambda t: ("execute", {"tool": "alpha/echo", "arguments": {"message": "hi", "_result_bytes": ECHO_BYTES}}),
        lambda t: ("continue", _cursor(t)),
    ])


def check_guided(t: Transcript) -> None:
    assert not t.unknown_tools, f"the client did not offer {t.unknown_tools}"
    assert [c.suffix for c in t.calls] == ["route", "execute", "continue"], t.calls
    route = t.result("route")
    assert "alpha" in route and "echo" in route and "selectionId" in route, route[:500]
    first = t.result("execute")
    # The page itself reached the model, not only the cursor.
    assert "000001 echo:" in first, f"page 1's text was not shown: {first[:500]}"
    assert re.search(r'"page"\s*:\s*1\b', first) or "page 1 of" in first, first[-500:]
    second = t.result("continue")
    assert "echo:" in second and "000001 echo:" not in second, second[:500]
    assert re.search(r'"page"\s*:\s*2\b', second) or "page 2 of" in second, second[-500:]


MESSAGE = "hello-from-the-direct-surface"


def direct_task() -> Script:
    """One call of a tool under its exposed name on the direct surface."""
    return Script([lambda t: ("alpha_echo", {"message": MESSAGE})])


def check_direct(t: Transcript) -> None:
    assert not t.unknown_tools, f"the client did not offer {t.unknown_tools}"
    assert [c.suffix for c in t.calls] == ["alpha_echo"], t.calls
    shown = t.result("alpha_echo")
    assert MESSAGE in shown, shown


def first_request_shows(t: Transcript, suffix: str, prop: str) -> None:
    """The model's first request that offers tools holds the tool ending in `suffix` with its
    schema (naming `prop`), loaded, not deferred behind the client's own tool search."""
    offered = [r["body"] for r in t.requests if isinstance(r.get("body"), dict) and r["body"].get("tools")]
    assert offered, "no request offered the model any tool"
    tools = []
    for tool in offered[0]["tools"]:
        tools += tool.get("tools") or [] if tool.get("type") == "namespace" else [tool]
    names = [x.get("name") or (x.get("function") or {}).get("name") or "" for x in tools]
    found = [x for x, n in zip(tools, names) if n == suffix or n.endswith("__" + suffix) or n.endswith("_" + suffix)]
    assert found, f"the first request does not offer {suffix}: it offers {names}"
    tool = found[0]
    assert not tool.get("defer_loading"), f"{suffix} is deferred in the first request: {tool}"
    schema = tool.get("input_schema") or tool.get("parameters") or (tool.get("function") or {}).get("parameters") or {}
    assert prop in (schema.get("properties") or {}), f"{suffix} has no schema naming {prop!r} in the first request: {tool}"
