"""Teams: the gateway as an OAuth 2.1 resource server in front of real servers, with a real
authorization server (oidc-provider from npm, `servers/oidc_provider.mjs`) and the official
Python SDK's OAuth client.

- The SDK's client finds the authorization server from the gateway's 401 (Protected Resource
  Metadata, RFC 9728), registers itself, runs the authorization code flow with PKCE, and calls
  tools with the token; when the token expires mid-session the gateway's 401 makes it refresh.
- Every refused token (expired, not yet valid, another audience, another issuer, `none`,
  HS256, a changed signature, a missing scope) gets its own clear status and reason, and the
  audit log records it.
- Claims map to what a caller sees and may do: the `admins` group may call everything; any
  other token sees and may call only `time/*` (direct and guided, tools and resources).
- The principal is the token's subject: audit records name it; one subject's handle is
  foreign to another.
- Key rotation: the provider restarts with a new signing key; new tokens are accepted
  without restarting the gateway.
- An upstream that requires OAuth: a second gateway behind the same provider, reached by the
  first with `[upstreams.NAME.oauth]` (client credentials); the caller's token is never
  passed on (the upstream sees the first gateway's own client as the subject).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from gateway import (
    START_TIMEOUT,
    HttpGateway,
    exposed_name,
    http_gateway,
    sdk_client,
    stdio_upstreams,
    text,
    write_config,
)
from oauth_provider import (
    Provider,
    client_credentials_token,
    free_port,
    make_claims,
    sign,
)

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
REDIRECT = "http://127.0.0.1:1/callback"  # never listened on: the test reads the Location


def oauth_toml(issuer: str, audit: Path, extra: str = "") -> str:
    return f"""
[policy.profiles.timeonly]
tools = ["time/*"]

[policy.audit]
path = "{audit}"

[auth.oauth]
issuer = "{issuer}"
required_scopes = ["mcp"]
clock_skew_secs = 0
jwks_refresh_min_secs = 1
{extra}
[auth.oauth.default]
scopes = ["time/*"]
tier = "read"
profile = "timeonly"

[[auth.oauth.map]]
name = "admins"
claim = "groups"
values = ["admins"]
scopes = ["*"]
tier = "destructive"
"""


def config(peers, work, issuer: str, names=("time", "everything"), extra: str = "", mode: str = "direct") -> Path:
    ups = {k: v for k, v in stdio_upstreams(peers, work).items() if k in names}
    path = write_config(work.path("toolgate.toml"), ups, {"mode": mode, "startup_wait_ms": int(START_TIMEOUT * 1000)})
    with open(path, "a") as f:
        f.write(oauth_toml(issuer, work.path("audit.jsonl"), extra))
        if mode == "guided":
            f.write("\n[code]\nenabled = true\n")
    return path


# A program that calls one tool outside the `default` rule's scopes and one inside.
PROGRAM = """
const out = [];
try { await tools.everything.echo({message: "x"}); out.push("echo ran"); }
catch (e) { out.push("echo refused: " + e.message); }
await tools.time.get_current_time({timezone: "UTC"});
out.push("time ran");
return out.join("; ");
"""


def post(url: str, token: str | None, body: dict, headers: dict | None = None) -> tuple[int, dict, dict]:
    """A raw JSON-RPC POST: (status, headers, JSON body or {})."""
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream",
         "mcp-protocol-version": "2025-11-25", **(headers or {})}
    if token is not None:
        h["authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read().decode()
            return r.status, dict(r.headers), (json.loads(raw) if raw.startswith("{") else {})
    except urllib.error.HTTPError as e:
        raw = e.read().decode()
        return e.code, dict(e.headers), (json.loads(raw) if raw.startswith("{") else {})


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class Browser:
    """The SDK's redirect and callback handlers, as a browser that follows the authorization
    server's redirects (its interaction logs in `login_hint`) up to the client's redirect URI."""

    def __init__(self, login: str = "alice"):
        self.login = login
        self.captured: dict[str, str] = {}

    async def redirect(self, url: str) -> None:
        url += f"&login_hint={self.login}"
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            for _ in range(10):
                r = await browser.get(url)
                assert r.status_code in (302, 303), r.text
                url = urllib.parse.urljoin(url, r.headers["location"])
                if url.startswith(REDIRECT):
                    self.captured = dict(httpx2.URL(url).params)
                    return
        raise AssertionError("the authorization never came back to the client")

    async def callback(self) -> AuthorizationCodeResult:
        c = self.captured
        return AuthorizationCodeResult(code=c["code"], state=c["state"], iss=c.get("iss"))


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, t):
        self.tokens = t

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, c):
        self.client = c


def sdk_oauth_client(url: str, login: str = "alice", era: str | None = None, storage: Memory | None = None):
    storage = storage or Memory()
    browser = Browser(login)
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(client_name="toolgate-peer-suite", redirect_uris=[REDIRECT],
                                            token_endpoint_auth_method="none"),
        storage=storage, redirect_handler=browser.redirect, callback_handler=browser.callback)
    http = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=90))
    return sdk_client(streamable_http_client(url, http_client=http), era=era), storage


def audit_lines(work) -> list[dict]:
    path = work.path("audit.jsonl")
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


async def test_the_sdk_oauth_client_discovers_registers_and_calls(toolgate_bin, peers, work):
    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    cfg = config(peers, work, issuer)
    # The gateway starts before its authorization server: it says so, and heals on the first token.
    async with http_gateway(toolgate_bin, cfg, work) as gw:
        url = gw.wait_endpoint()
        with Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, resources=[url], env=work.env()):
            # Without a token: 401 pointing at the metadata, which names the provider.
            status, headers, body = post(url, None, INIT)
            challenge = headers.get("www-authenticate") or headers.get("WWW-Authenticate")
            assert status == 401, body
            metadata_url = f"{gw.base}/.well-known/oauth-protected-resource/mcp"
            assert f'resource_metadata="{metadata_url}"' in challenge and 'scope="mcp"' in challenge
            assert "error=" not in challenge, "no error code when no token was presented (RFC 6750)"
            with urllib.request.urlopen(metadata_url) as r:
                doc = json.load(r)
            assert doc["resource"] == url and doc["authorization_servers"] == [issuer]

            client, storage = sdk_oauth_client(url)
            async with client:
                tools = (await client.list_tools()).tools
                names = {t.name for t in tools}
                assert exposed_name("everything", "echo") in names, "alice is an admin: every tool"
                result = await client.call_tool(exposed_name("everything", "echo"), {"message": "hi"})
                assert "hi" in text(result)
            assert storage.client is not None, "the client registered itself (dynamic registration)"
            assert storage.tokens.refresh_token
            # A legacy session (initialize, a session id) with the same token: the same person.
            client, _ = sdk_oauth_client(url, era="legacy", storage=storage)
            async with client:
                r = await client.call_tool(exposed_name("time", "get_current_time"), {"timezone": "UTC"})
                assert not r.is_error, text(r)
    calls = [l for l in audit_lines(work) if l.get("type") == "call"]
    mine = [c for c in calls if c["tool"] in ("echo", "get_current_time")]
    assert {c["tool"] for c in mine} == {"echo", "get_current_time"} and all(c["subject"] == f"sub:{issuer}#alice" and c["key"] == "oauth:admins" for c in mine), mine


async def test_every_wrong_token_is_refused_with_its_reason(toolgate_bin, peers, work):
    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    cfg = config(peers, work, issuer, names=("time",))
    async with http_gateway(toolgate_bin, cfg, work) as gw:
        url = gw.wait_endpoint()
        with Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, resources=[url, "http://127.0.0.1:1/other"],
                      env=work.env()) as idp, \
             Provider(peers.node, ROOT, work.path("oidc2"), resources=[url], env=work.env()) as other:
            key, kid = idp.private_key_pem, idp.kid
            good = client_credentials_token(issuer, "svc-reader", "svc-reader-secret", url, scope="mcp")
            assert post(url, good, INIT)[0] == 200
            forged_payload = good.split(".")
            cases = {
                "expired": (sign(key, kid, make_claims(issuer, url, exp_in=-60)), 401, "has expired"),
                "not yet valid": (sign(key, kid, make_claims(issuer, url, nbf_in=600)), 401, "not valid yet"),
                "for another resource": (client_credentials_token(issuer, "svc-reader", "svc-reader-secret",
                                                                  "http://127.0.0.1:1/other", scope="mcp"),
                                         401, "another resource"),
                # Another provider's token (its own key, under the same kid): the signature fails.
                "from another provider": (client_credentials_token(other.issuer, "svc-reader", "svc-reader-secret",
                                                                   url, scope="mcp"), 401, "signature is not valid"),
                "naming another issuer": (sign(key, kid, make_claims("https://evil.example.com", url)), 401,
                                          "another authorization server"),
                "alg none": (".".join([_b64({"alg": "none", "kid": kid}), forged_payload[1], ""]), 401, "signed with none"),
                "HS256": (sign(b"a shared secret the gateway never has", kid, make_claims(issuer, url), alg="HS256"),
                          401, "signed with HS256"),
                "a changed payload": (".".join([forged_payload[0], _b64({**_claims(good), "sub": "root"}),
                                                forged_payload[2]]), 401, "signature is not valid"),
                "without the required scope": (client_credentials_token(issuer, "svc-reader", "svc-reader-secret",
                                                                        url, scope="tools:read"),
                                               403, "lacks the scope"),
                "garbage": ("x" * 40, 401, "not a token this gateway can read"),
            }
            for what, (token, want_status, want_text) in cases.items():
                status, headers, body = post(url, token, INIT)
                challenge = headers.get("www-authenticate") or headers.get("WWW-Authenticate") or ""
                assert status == want_status, (what, status, body)
                assert want_text in body["message"], (what, body)
                assert token not in body["message"] and token not in challenge, "the token is never echoed"
                code = "insufficient_scope" if want_status == 403 else "invalid_token"
                assert f'error="{code}"' in challenge and "resource_metadata=" in challenge, (what, challenge)
    refused = [l for l in audit_lines(work) if l.get("type") == "auth"]
    reasons = " | ".join(l["reason"] for l in refused)
    for phrase in ("has expired", "not valid yet", "another resource", "signed with none", "lacks the scope"):
        assert phrase in reasons, (phrase, reasons)


def _b64(obj: dict) -> str:
    import base64
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def _claims(token: str) -> dict:
    import base64
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


@pytest.mark.parametrize("mode", ["direct", "guided"])
async def test_claims_decide_what_a_caller_sees_and_may_do(toolgate_bin, peers, work, mode):
    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    cfg = config(peers, work, issuer, mode=mode)
    async with http_gateway(toolgate_bin, cfg, work, mode=mode) as gw:
        url = gw.wait_endpoint()
        with Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, resources=[url], env=work.env()):
            admin = client_credentials_token(issuer, "svc-admin", "svc-admin-secret", url, scope="mcp")
            reader = client_credentials_token(issuer, "svc-reader", "svc-reader-secret", url, scope="mcp")

            def bearer(token):
                return httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=90))

            async with sdk_client(streamable_http_client(url, http_client=bearer(admin))) as c:
                if mode == "direct":
                    r = await c.call_tool(exposed_name("everything", "echo"), {"message": "x"})
                else:
                    r = await c.call_tool("execute", {"tool": "everything/echo", "arguments": {"message": "x"}})
                    assert not r.is_error, text(r)
                    r = await c.call_tool("execute_code", {"code": PROGRAM})
                    assert r.structured_content["result"] == "echo ran; time ran", r.structured_content
                assert not r.is_error, text(r)
                uri = (await c.list_resources()).resources[0].uri
                prompt = next(p.name for p in (await c.list_prompts()).prompts if not p.arguments)
            async with sdk_client(streamable_http_client(url, http_client=bearer(reader))) as c:
                if mode == "direct":
                    names = {t.name for t in (await c.list_tools()).tools}
                    assert names and all(n.startswith("time_") for n in names), names
                    # Named exactly, a tool the profile hides is judged by the grant: refused.
                    r = await c.call_tool(exposed_name("everything", "echo"), {"message": "x"})
                    assert r.is_error and 'auth.oauth rule "default"' in text(r) and "svc-reader" in text(r), text(r)
                    r = await c.call_tool(exposed_name("time", "get_current_time"), {"timezone": "UTC"})
                    assert not r.is_error, text(r)
                else:
                    r = await c.call_tool("execute", {"tool": "everything/echo", "arguments": {"message": "x"}})
                    assert r.is_error and "svc-reader" in text(r), text(r)
                    r = await c.call_tool("execute", {"tool": "time/get_current_time", "arguments": {"timezone": "UTC"}})
                    assert not r.is_error, text(r)
                    # Code mode: a program gets only the tools its caller may call.
                    r = await c.call_tool("execute_code", {"code": PROGRAM})
                    result = r.structured_content["result"]
                    assert result == "echo refused: cannot read property 'echo' of undefined; time ran", result
                # The everything server's resources belong to it whole: not this caller's.
                assert not (await c.list_resources()).resources, "its profile lists none"
                with pytest.raises(Exception) as refused:
                    await c.read_resource(uri)
                assert "svc-reader" in str(refused.value), str(refused.value)
                with pytest.raises(Exception) as refused:
                    await c.get_prompt(prompt)
                assert "svc-reader" in str(refused.value), str(refused.value)


async def test_a_rotated_key_and_an_expired_token_heal_without_a_restart(toolgate_bin, peers, work):
    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    cfg = config(peers, work, issuer, names=("time",))
    async with http_gateway(toolgate_bin, cfg, work) as gw:
        url = gw.wait_endpoint()
        idp = Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, resources=[url], access_ttl=4, env=work.env())
        with idp:
            client, storage = sdk_oauth_client(url)
            async with client:
                await client.call_tool(exposed_name("time", "get_current_time"), {"timezone": "UTC"})
                first = storage.tokens.access_token
                # The token expires mid-session: it is refused from then on (401 "expired", what
                # makes a client refresh), and the SDK's client, which refreshes, goes on.
                await anyio.sleep(5)
                status, headers, body = post(url, first, INIT)
                assert status == 401 and "has expired" in body["message"], body
                r = await client.call_tool(exposed_name("time", "get_current_time"), {"timezone": "UTC"})
                assert not r.is_error
                assert storage.tokens.access_token != first, "the client refreshed its token"
            # The provider rotates its signing key (k1 -> k2): new tokens verify at once.
            old_key = idp.private_key_pem
            idp.restart(kid="k2")
            token = client_credentials_token(issuer, "svc-reader", "svc-reader-secret", url, scope="mcp")
            assert post(url, token, INIT)[0] == 200
            # A token of the old key is now refused, as signed with a key no longer published.
            old = sign(old_key, "k1", make_claims(issuer, url))
            status, _, body = post(url, old, INIT)
            assert status == 401 and "does not publish" in body["message"], body
    reasons = [l["reason"] for l in audit_lines(work) if l.get("type") == "auth"]
    assert any("has expired" in r for r in reasons), reasons


async def test_an_upstream_that_requires_oauth_gets_the_gateways_own_token(toolgate_bin, peers, work):
    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    # B: a gateway behind the provider, in front of the time server.
    b_dir = work.path("b")
    b_dir.mkdir()
    cfg_b = config(peers, work, issuer, names=("time",))
    cfg_b = Path(cfg_b.rename(b_dir / "toolgate.toml"))
    b = HttpGateway(toolgate_bin, cfg_b, work)
    try:
        b_url = await anyio.to_thread.run_sync(b.wait_endpoint)
        with Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, resources=[b_url], env=work.env()):
            # A without OAuth for B: `toolgate check` names B's authorization server.
            a_dir = work.path("a")
            a_dir.mkdir()
            bare = a_dir / "bare.toml"
            bare.write_text(f'[upstreams.b]\nurl = "{b_url}"\nconnect_timeout_secs = 10\n')
            out = await anyio.to_thread.run_sync(lambda: __import__("subprocess").run(
                [str(toolgate_bin), "check", "--config", str(bare)], capture_output=True, text=True, timeout=60,
                env=work.env()))
            assert out.returncode != 0
            assert "requires an OAuth access token" in out.stdout and "oauth-protected-resource" in out.stdout, out.stdout
            assert "[upstreams.b.oauth]" in out.stdout, out.stdout
            # A with a client of its own at the provider.
            a_cfg = a_dir / "toolgate.toml"
            a_cfg.write_text(
                f'[gateway]\nmode = "direct"\nstartup_wait_ms = 60000\n'
                f'[upstreams.b]\nurl = "{b_url}"\n'
                f'[upstreams.b.oauth]\nissuer = "{issuer}"\nclient_id = "svc-admin"\n'
                f'client_secret = "${{B_SECRET}}"\nscopes = ["mcp"]\n')
            env = {"B_SECRET": "svc-admin-secret"}
            out = await anyio.to_thread.run_sync(lambda: __import__("subprocess").run(
                [str(toolgate_bin), "check", "--config", str(a_cfg)], capture_output=True, text=True, timeout=60,
                env=work.env(env)))
            assert out.returncode == 0, out.stdout + out.stderr
            import os
            os.environ["B_SECRET"] = "svc-admin-secret"
            try:
                async with http_gateway(toolgate_bin, a_cfg, work) as a:
                    async with sdk_client(a.wait_endpoint()) as c:
                        names = {t.name for t in (await c.list_tools()).tools}
                        tool = next(n for n in names if n.endswith("get_current_time"))
                        r = await c.call_tool(tool, {"timezone": "UTC"})
                        assert not r.is_error, text(r)
            finally:
                del os.environ["B_SECRET"]
    finally:
        assert b.stop() == 0
    # B saw A's own client, never a caller's token.
    calls = [l for l in audit_lines(work) if l.get("type") == "call" and l["tool"] == "get_current_time"]
    assert calls and all(c["subject"] == f"sub:{issuer}#svc-admin" for c in calls), calls


async def test_an_opaque_token_is_introspected(toolgate_bin, peers, work):
    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    extra = (f'introspection_url = "{issuer}/token/introspection"\nclient_id = "gateway"\n'
             'client_secret = "${TEST_INTROSPECTION_SECRET}"\n')
    cfg = config(peers, work, issuer, names=("time",), extra=extra)
    import os
    os.environ["TEST_INTROSPECTION_SECRET"] = "gateway-secret"
    try:
        async with http_gateway(toolgate_bin, cfg, work) as gw:
            url = gw.wait_endpoint()
            with Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, opaque_resources=[url], env=work.env()):
                opaque = client_credentials_token(issuer, "svc-admin", "svc-admin-secret", url, scope="mcp")
                assert opaque.count(".") != 2, "the provider issued an opaque token for this resource"
                status, _, body = post(url, opaque, INIT)
                assert status == 200, body
                status, headers, body = post(url, "not-a-token-the-provider-issued", INIT)
                assert status == 401 and "not active" in body["message"], body
    finally:
        del os.environ["TEST_INTROSPECTION_SECRET"]
    calls = [l for l in audit_lines(work) if l.get("type") == "auth"]
    assert any("not active" in l["reason"] for l in calls), calls


async def test_toolgate_auth_login_logs_the_gateway_in_to_an_upstream(toolgate_bin, peers, work):
    """`toolgate auth login b`: the upstream's Protected Resource Metadata names the provider,
    the command registers itself there, prints the authorization URL and waits on a loopback
    port; a browser (here: urllib following the redirects, the provider logging in alice)
    comes back with the code; the tokens go to the state store, where the gateway finds them.
    B then sees alice, not a caller, as the subject of A's calls."""
    import os
    import subprocess
    import threading

    idp_port = free_port()
    issuer = f"http://127.0.0.1:{idp_port}"
    b_dir = work.path("b")
    b_dir.mkdir()
    cfg_b = Path(config(peers, work, issuer, names=("time",)).rename(b_dir / "toolgate.toml"))
    b = HttpGateway(toolgate_bin, cfg_b, work)
    try:
        b_url = await anyio.to_thread.run_sync(b.wait_endpoint)
        # Access tokens live 20 s: under the 30 s the gateway keeps in hand, so its first
        # use of the login refreshes it (the refresh token grant, the new tokens stored).
        with Provider(peers.node, ROOT, work.path("oidc"), port=idp_port, resources=[b_url], access_ttl=20,
                      env=work.env()):
            a_dir = work.path("a")
            a_dir.mkdir()
            a_cfg = a_dir / "toolgate.toml"
            a_cfg.write_text(
                f'[gateway]\nmode = "direct"\nstartup_wait_ms = 60000\n'
                f'[upstreams.b]\nurl = "{b_url}"\n'
                f'[upstreams.b.oauth]\ngrant = "authorization_code"\nscopes = ["mcp"]\n')
            # Before the login, the gateway says what to run.
            out = subprocess.run([str(toolgate_bin), "check", "--config", str(a_cfg)], capture_output=True,
                                 text=True, timeout=60, env=work.env())
            assert out.returncode != 0 and "toolgate auth login b" in out.stdout, out.stdout
            login = subprocess.Popen([str(toolgate_bin), "auth", "login", "b", "--config", str(a_cfg),
                                      "--timeout-secs", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=work.env())
            link = None
            for line in login.stdout:
                if line.strip().startswith("http://"):
                    link = line.strip()
                    break
            assert link and "code_challenge_method=S256" in link and "resource=" in link, link

            def browse():
                with urllib.request.urlopen(link, timeout=30) as r:
                    return r.read().decode()

            page = await anyio.to_thread.run_sync(browse)
            assert "logged in" in page, page
            rest, err = login.communicate(timeout=30)
            assert login.returncode == 0, rest + err
            assert f"Logged in to b at {issuer}" in rest, rest
            async with http_gateway(toolgate_bin, a_cfg, work) as a:
                async with sdk_client(a.wait_endpoint()) as c:
                    names = {t.name for t in (await c.list_tools()).tools}
                    tool = next(n for n in names if n.endswith("get_current_time"))
                    r = await c.call_tool(tool, {"timezone": "UTC"})
                    assert not r.is_error, text(r)
            assert "refreshed the login's access token" in work.path("toolgate-http.log").read_text()
            out = subprocess.run([str(toolgate_bin), "auth", "logout", "b", "--config", str(a_cfg)],
                                 capture_output=True, text=True, timeout=60, env=work.env())
            assert out.returncode == 0, out.stdout + out.stderr
    finally:
        assert b.stop() == 0
    calls = [l for l in audit_lines(work) if l.get("type") == "call" and l["tool"] == "get_current_time"]
    assert calls and all(c["subject"] == f"sub:{issuer}#alice" for c in calls), calls
