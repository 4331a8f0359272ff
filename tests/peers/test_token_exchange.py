"""A user-delegated upstream: `[upstreams.NAME.oauth] grant = "token_exchange"` (RFC 8693).

Real processes: the authorization server (`servers/oidc_provider.mjs`, which offers token
exchange to its client `gateway`), gateway B (a resource server for the provider, in front of
the time server; its audit log names the subject of every call it gets), and gateway A in front
of B, whose callers are alice and bob with access tokens for A.

- Two people calling the same tool reach B as themselves: B's records name alice's and bob's
  subjects, never A's client and never the other's.
- The original token never reaches B: B refuses no token (a token for A would be refused there
  as issued for another resource) and audits no refusal.
- The exchanged token is kept per person: two calls, one exchange; after it expires (a short
  lifetime here) the next call exchanges again. A's audit records say which.
- An issuer that refuses the exchange (carol) and a caller with an API key get clear errors.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from gateway import HttpGateway, exposed_name, http_gateway, sdk_client, text
from oauth_provider import Provider, authorization_code_token, exchanges, free_port
from test_oauth import audit_lines, config

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "tg-exchange-test-key"
EXCHANGE_TTL = 4


def a_config(path: Path, issuer: str, b_url: str, audit: Path) -> Path:
    digest = hashlib.sha256(API_KEY.encode()).hexdigest()
    path.write_text(f"""
[gateway]
mode = "direct"
startup_wait_ms = 1000

[policy.audit]
path = "{audit}"

[policy.keys.ops]
hash = "sha256:{digest}"
scopes = ["*"]

[auth.oauth]
issuer = "{issuer}"
required_scopes = ["mcp"]
clock_skew_secs = 0

[auth.oauth.default]
scopes = ["*"]
tier = "read"

[upstreams.b]
url = "{b_url}"
connect_timeout_secs = 10

[upstreams.b.oauth]
grant = "token_exchange"
issuer = "{issuer}"
client_id = "gateway"
client_secret = "gateway-secret"
scopes = ["mcp"]
""")
    return path


def bearer(token: str):
    return httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=90))


async def call_time(url: str, token: str):
    async with sdk_client(streamable_http_client(url, http_client=bearer(token))) as c:
        return await c.call_tool(exposed_name("b", "time_get_current_time"), {"timezone": "UTC"})


async def wait_for_tool(url: str, token: str, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        async with sdk_client(streamable_http_client(url, http_client=bearer(token))) as c:
            names = {t.name for t in (await c.list_tools()).tools}
        if name in names:
            return
        assert time.monotonic() < deadline, f"{name} never listed: {names}"
        await anyio.sleep(0.5)


async def test_each_caller_reaches_the_upstream_as_themselves(toolgate_bin, peers, work):
    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    # B: a resource server for the provider, in front of the time server; its own audit log.
    b_dir = work.path("b")
    b_dir.mkdir()
    cfg_b = Path(config(peers, work, issuer, names=("time",)).rename(b_dir / "toolgate.toml"))
    b_audit = work.path("audit.jsonl")  # where config() puts it
    b = HttpGateway(toolgate_bin, cfg_b, work)
    try:
        b_url = await anyio.to_thread.run_sync(b.wait_endpoint)
        a_dir = work.path("a")
        a_dir.mkdir()
        a_audit = a_dir / "audit.jsonl"
        a_cfg = a_config(a_dir / "toolgate.toml", issuer, b_url, a_audit)
        async with http_gateway(toolgate_bin, a_cfg, work) as a:
            a_url = a.wait_endpoint()
            provider = Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, resources=[a_url, b_url],
                                exchange_resources=[b_url], exchange_ttl=EXCHANGE_TTL, exchange_deny=["carol"],
                                env=work.env())
            with provider:
                tokens = {who: authorization_code_token(issuer, a_url, scope="mcp", login_hint=who)["access_token"]
                          for who in ("alice", "bob", "carol")}
                tool = exposed_name("b", "time_get_current_time")
                # A's shared connection to B (its own client) comes up once the provider does.
                await wait_for_tool(a_url, tokens["alice"], tool)
                before = exchanges(issuer)["count"]

                # alice twice, then bob: one exchange each, the second call of alice's reuses hers.
                for who in ("alice", "alice", "bob"):
                    r = await call_time(a_url, tokens[who])
                    assert not r.is_error, (who, text(r))
                seen = exchanges(issuer)
                assert seen["count"] - before == 2, seen
                assert seen["subjects"].get("alice") == 1 and seen["subjects"].get("bob") == 1, seen

                # After the exchanged token's lifetime (renewed early), alice's next call exchanges anew.
                await anyio.sleep(EXCHANGE_TTL)
                r = await call_time(a_url, tokens["alice"])
                assert not r.is_error, text(r)
                assert exchanges(issuer)["subjects"]["alice"] == 2

                # The issuer refuses carol's exchange: the error says so, with its reason.
                r = await call_time(a_url, tokens["carol"])
                assert r.is_error, text(r)
                message = text(r)
                assert "refused to exchange" in message and "invalid_grant" in message, message
                assert "carol may not be represented" in message and tokens["carol"] not in message, message

                # An API key has no token to exchange: refused, saying why.
                r = await call_time(a_url, API_KEY)
                assert r.is_error, text(r)
                message = text(r)
                assert 'API key "ops" presented no access token' in message, message
    finally:
        assert b.stop() == 0

    # B saw alice and bob as themselves (and never carol, nor the API key's caller).
    b_calls = [l for l in audit_lines(work) if l.get("type") == "call" and l["tool"] == "get_current_time"
               and l.get("phase") != "start"]
    subjects = [c["subject"] for c in b_calls]
    assert subjects == [f"sub:{issuer}#alice", f"sub:{issuer}#alice", f"sub:{issuer}#bob", f"sub:{issuer}#alice"], subjects
    # The callers' own tokens (for A) never reached B: B refused no token at all.
    refused = [l for l in audit_lines(work) if l.get("type") == "auth"]
    assert not refused, refused
    assert b_audit.exists()

    # A's records: who called, and how the upstream token was had; never a token.
    a_calls = [json.loads(l) for l in a_audit.read_text().splitlines()]
    ends = [(c.get("subject"), c.get("upstreamToken"), c["outcome"]) for c in a_calls
            if c.get("type") == "call" and c.get("phase") == "end"]
    assert ends[:4] == [
        (f"sub:{issuer}#alice", "exchanged", "ok"),
        (f"sub:{issuer}#alice", "exchanged_cached", "ok"),
        (f"sub:{issuer}#bob", "exchanged", "ok"),
        (f"sub:{issuer}#alice", "exchanged", "ok"),
    ], ends
    assert ends[4] == (f"sub:{issuer}#carol", None, "error"), ends
    assert ends[5] == (None, None, "error") and len(ends) == 6, ends
    # No token, the callers' or an exchanged one, is in A's audit log or either gateway's log.
    logs = a_audit.read_text() + work.path("toolgate-http.log").read_text()
    assert "exchanged the caller's access token" in logs
    assert not [t for t in tokens.values() if t in logs]
    assert "eyJ" not in logs, "no JWT at all is logged"
