"""Route in guided mode in front of real MCP servers, driven by the official Python SDK: a
clear task selects; the same tool on two servers asks and names them; a question is
answered by execute with a candidate's selectionId; browsing by names and by server pages
and never shows what the profile hides; a hidden tool's exact name selects nothing else;
a Chinese task finds LiveMCPBench's Chinese-described tools (served by the fixture)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gateway import TEST_GATEWAY, Workspace, missing, session, stdio_upstreams, text, write_config

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
GUIDED = {**TEST_GATEWAY, "mode": "guided"}
# What the profile `nowrite` hides: every filesystem tool that writes or moves.
HIDDEN = ("write_file", "edit_file", "move_file", "create_directory")


def config(work: Workspace, peers, only: tuple[str, ...], extra: str = "") -> Path:
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k in only}
    if "clock" in only:
        # The same real time server a second time, under another name: a true twin.
        ups["clock"] = dict(stdio_upstreams(peers, work)["time"])
    cfg = write_config(work.path("toolgate.toml"), ups, GUIDED)
    with open(cfg, "a") as f:
        f.write(extra)
    return cfg


async def route(client, args: dict) -> dict:
    r = await client.call_tool("route", args)
    assert not r.is_error, text(r)
    s = r.structured_content
    assert s is not None, text(r)
    return s


async def route_ready(client, args: dict, want: str) -> dict:
    """Routes until the upstreams have connected and `want` (server/name) is the answer's
    selected tool or first candidate (bounded: the servers start on a loaded machine)."""
    import anyio

    s: dict = {}
    for _ in range(120):
        s = await route(client, args)
        first = s if s.get("decision") == "select" else (s.get("candidates") or s.get("tools") or [{}])[0]
        if f"{first.get('server')}/{first.get('name')}" == want:
            return s
        await anyio.sleep(0.5)
    raise AssertionError(f"{want} never came first: {json.dumps(s, ensure_ascii=False)}")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_clear_task_selects_and_runs(transport, toolgate_bin, peers, work):
    cfg = config(work, peers, ("time", "filesystem", "memory"))
    async with session(transport, toolgate_bin, cfg, work, mode="guided") as client:
        s = await route_ready(client, {"task": "convert 3pm London time to Tokyo time"}, "time/convert_time")
        assert s["decision"] == "select", s
        assert s["confidence"] >= 0.84, s
        call = s["nextCall"]
        assert call["tool"] == "execute"
        args = {"source_timezone": "Europe/London", "time": "15:00", "target_timezone": "Asia/Tokyo"}
        r = await client.call_tool("execute", {"selectionId": call["arguments"]["selectionId"], "arguments": args})
        assert not r.is_error, text(r)
        assert "Asia/Tokyo" in text(r)


async def test_a_twin_asks_naming_the_servers_and_execute_answers_it(toolgate_bin, peers, work):
    cfg = config(work, peers, ("time", "clock"))
    async with session("stdio", toolgate_bin, cfg, work, mode="guided") as client:
        await route_ready(client, {"task": "clock/get_current_time"}, "clock/get_current_time")
        s = await route(client, {"task": "get the current time in a timezone"})
        assert s["decision"] == "clarify", s
        assert "clock" in s["question"] and "time" in s["question"], s["question"]
        servers = {c["server"] for c in s["candidates"] if c["name"] == "get_current_time"}
        assert servers == {"clock", "time"}, s
        # Each candidate can be run at once: its own selectionId, signature and nextCall.
        chosen = next(c for c in s["candidates"] if c["server"] == "clock" and c["name"] == "get_current_time")
        assert chosen["signature"].startswith("get_current_time(timezone: string"), chosen
        assert chosen["nextCall"]["arguments"]["selectionId"] == chosen["selectionId"]
        r = await client.call_tool("execute", {"selectionId": chosen["selectionId"], "arguments": {"timezone": "Europe/Oslo"}})
        assert not r.is_error, text(r)
        assert "Europe/Oslo" in text(r)
        # A bare name both servers have is a question too; with the server it selects.
        s = await route(client, {"task": "get_current_time"})
        assert s["decision"] == "clarify" and len(s["candidates"]) == 2, s
        s = await route(client, {"task": "get_current_time", "server": "clock"})
        assert (s["decision"], s["server"]) == ("select", "clock"), s


PROFILE = "\n[policy.profiles.nowrite]\ntools = [\"filesystem/*\", \"time/*\", " + ", ".join(
    f'"!filesystem/{n}"' for n in HIDDEN
) + "]\n"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_browsing_pages_and_never_shows_hidden_tools(transport, toolgate_bin, peers, work):
    # The default profile, so stdio and HTTP sessions alike see it.
    cfg = config(work, peers, ("filesystem", "time"), '\n[policy]\ndefault_profile = "nowrite"\n' + PROFILE)
    async with session(transport, toolgate_bin, cfg, work, mode="guided") as client:
        await route_ready(client, {"task": "filesystem/read_text_file"}, "filesystem/read_text_file")
        # By server, three at a time, following each page's nextCall.
        seen: list[str] = []
        args: dict = {"server": "filesystem", "limit": 3}
        for _ in range(20):
            s = await route(client, args)
            assert s["decision"] == "list" and len(s["tools"]) <= 3, s
            seen += [t["name"] for t in s["tools"]]
            if "nextCall" not in s:
                break
            assert s["nextCall"]["tool"] == "route"
            args = s["nextCall"]["arguments"]
        assert s["total"] == len(seen) and len(seen) == len(set(seen)) >= 6, seen
        assert "read_text_file" in seen and "list_directory" in seen, seen
        assert not set(HIDDEN) & set(seen), seen
        # By task, names only, up to 20: a search result, nothing selected.
        s = await route(client, {"task": "write or edit a file", "detail": "names", "limit": 20})
        assert s["decision"] == "list" and 1 <= len(s["tools"]) <= 20, s
        assert all(set(t) == {"server", "name", "summary"} for t in s["tools"]), s
        assert not set(HIDDEN) & {t["name"] for t in s["tools"]}, s
        r = await client.call_tool("route", {"task": "files", "limit": 21})
        assert r.is_error and "1 to 20" in text(r), text(r)


@pytest.mark.parametrize("name", ["write_file", "filesystem/write_file", "filesystem_write_file"])
async def test_a_hidden_tools_exact_name_selects_nothing_else(name, toolgate_bin, peers, work):
    cfg = config(work, peers, ("filesystem", "time"), PROFILE)
    async with session("stdio", toolgate_bin, cfg, work, mode="guided", extra=["--profile", "nowrite"]) as client:
        await route_ready(client, {"task": "filesystem/read_text_file"}, "filesystem/read_text_file")
        s = await route(client, {"task": name})
        assert s["decision"] == "clarify", s
        assert "No tool of that name is visible" in s["question"], s
        assert "write_file" not in json.dumps(s), s
        # The same name in a profile that shows it selects it.
    async with session("stdio", toolgate_bin, cfg, work, mode="guided") as client:
        s = await route_ready(client, {"task": name}, "filesystem/write_file")
        assert s["decision"] == "select", s


def livemcpbench_catalog() -> Path:
    """The repository's datasets/ (or TOOLGATE_DATASETS), as the Rust tests find it."""
    datasets = Path(os.environ.get("TOOLGATE_DATASETS") or REPO / "datasets")
    path = datasets / "livemcpbench" / "catalog.json"
    if not path.exists():
        missing(f"LiveMCPBench catalog missing at {path}: restore datasets/ or set TOOLGATE_DATASETS")
    return path


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_chinese_task_finds_a_chinese_described_tool(transport, toolgate_bin, work):
    catalog = livemcpbench_catalog()
    fixture = lambda server: {  # noqa: E731
        "command": str(toolgate_bin),
        "args": ["fixture", "--catalog", str(catalog), "--server", server],
        "connect_timeout_secs": 60,
        "call_timeout_secs": 60,
    }
    ups = {"howtocook": fixture("HowToCook-MCP Server"), "bing": fixture("Bing_CN_MCP"), "trends": fixture("Trends Hub")}
    cfg = write_config(work.path("toolgate.toml"), ups, GUIDED)
    async with session(transport, toolgate_bin, cfg, work, mode="guided") as client:
        # Chinese task, Chinese description (获取所有菜谱 / 根据分类查询菜谱...).
        s = await route_ready(client, {"task": "根据分类查询菜谱"}, "howtocook/mcp_howtocook_getRecipesByCategory")
        assert s["decision"] == "select", s
        # A mixed task ranks too: the Chinese words and the English product name.
        s = await route_ready(client, {"task": "用 Bing 搜索关键词", "detail": "names"}, "bing/bing_search")
        assert s["tools"][0]["summary"].startswith("使用必应搜索"), s


DEMO_SERVERS = ("tickets", "docs", "calendar", "mail", "files", "metrics", "deploy")


async def test_the_demos_natural_tasks_select(toolgate_bin, peers, work):
    """Tasks a new user types, in their words rather than the tools': each selects the
    tool it means and runs it (the built-in demo catalog served by `toolgate fixture
    --demo`, and the real time server next to the real filesystem server)."""
    demo = lambda server: {  # noqa: E731
        "command": str(toolgate_bin),
        "args": ["fixture", "--demo", "--server", server],
        "connect_timeout_secs": 60,
        "call_timeout_secs": 60,
    }
    ups = {s: demo(s) for s in DEMO_SERVERS}
    ups.update({k: v for k, v in stdio_upstreams(peers, work).items() if k in ("time", "filesystem")})
    cfg = write_config(work.path("toolgate.toml"), ups, GUIDED)
    async with session("stdio", toolgate_bin, cfg, work, mode="guided") as client:
        await route_ready(client, {"task": "time/get_current_time"}, "time/get_current_time")
        await route_ready(client, {"task": "calendar/list_events"}, "calendar/list_events")
        s = await route(client, {"task": "what time is it in Tokyo"})
        assert (s["decision"], s.get("server"), s.get("name")) == ("select", "time", "get_current_time"), s
        r = await client.call_tool("execute", {"selectionId": s["selectionId"], "arguments": {"timezone": "Asia/Tokyo"}})
        assert not r.is_error and "Asia/Tokyo" in text(r), text(r)
        s = await route(client, {"task": "list my calendar for tomorrow"})
        assert (s["decision"], s.get("server"), s.get("name")) == ("select", "calendar", "list_events"), s
        # "open a ticket" means creating one; the login page is the ticket's subject, and
        # the wiki's page tools do not take it away.
        s = await route(client, {"task": "open a support ticket about a broken login page"})
        assert (s["decision"], s.get("server"), s.get("name")) == ("select", "tickets", "create_issue"), s
        r = await client.call_tool(
            "execute",
            {"selectionId": s["selectionId"], "arguments": {"project": "WEB", "title": "Login page is broken"}},
        )
        assert not r.is_error and "create_issue" in text(r) and "Login page is broken" in text(r), text(r)
