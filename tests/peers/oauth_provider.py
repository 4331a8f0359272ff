"""A real OAuth 2.1 / OIDC authorization server for the peer suite (`servers/oidc_provider.mjs`,
oidc-provider from npm) and the client side of it: tokens by client credentials, by the
authorization code flow with PKCE (no human: the server logs in `login_hint`, default alice),
introspection, and tokens of our own signed with the server's key (expired, not yet valid,
wrong audience, ...).

    with start_provider(peers.node, REPO, work.path("oidc"), resources=[url], env=work.env()) as idp:
        token = client_credentials_token(idp.issuer, "svc-admin", "svc-admin-secret", url, scope="mcp")
        forged = sign(idp.private_key_pem, idp.kid, make_claims(idp.issuer, url, exp_in=-60))

Clients: svc-admin / svc-reader (client_credentials; groups [admins] / []), gateway
(client_credentials, for introspection); secrets are `<id>-secret`, sent with HTTP Basic.
Users: alice (groups [admins]), bob ([readers]), any other name ([]); login_hint=deny makes
the authorization request end in access_denied. Token scopes come from what is requested
(mcp tools:read tools:write admin); ask for none and the token has no `scope` claim.

Stdlib only, plus PyJWT for `sign` (in the venv as a dependency of mcp).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import jwt

SCRIPT = Path(__file__).resolve().parent / "servers" / "oidc_provider.mjs"
ALL_SCOPES = "mcp tools:read tools:write admin"
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Provider:
    """The node server as a process. `start()` waits for `READY <issuer>`; `stop()` terminates
    it (kill after 10 s); `restart(kid=...)` keeps the port, so the issuer stays the same.

    port None: the server picks one (no race); it is then kept across restarts.
    opaque_resources: resources whose access tokens are opaque (introspection only).
    env: the process environment (pass `work.env()` so the leftover check covers it).
    exchange_resources: resources the client `gateway` may exchange a user's token for (RFC 8693),
    each token living exchange_ttl seconds; exchange_deny: subjects whose exchange is refused.
    log_path: stdout+stderr of the server (default state_dir/provider.log, appended to).
    """

    def __init__(self, node: str | os.PathLike, repo: str | os.PathLike, state_dir: str | os.PathLike,
                 port: int | None = None, resources: Sequence[str] = (), kid: str = "k1",
                 access_ttl: int = 300, opaque_resources: Sequence[str] = (),
                 peers: str | os.PathLike | None = None, env: dict[str, str] | None = None,
                 log_path: str | os.PathLike | None = None, exchange_resources: Sequence[str] = (),
                 exchange_ttl: int = 300, exchange_deny: Sequence[str] = ()):
        self.node = str(node)
        self.repo = Path(repo)
        self.state_dir = Path(state_dir)
        self.port = port or 0
        self.resources = list(resources)
        self.opaque_resources = list(opaque_resources)
        self.kid = kid
        self.access_ttl = access_ttl
        peers_dir = peers or os.environ.get("TOOLGATE_PEERS") or self.repo / ".peers"
        self.node_modules = (self.repo / peers_dir).resolve() / "node_modules"
        self.env = env
        self.exchange_resources = list(exchange_resources)
        self.exchange_ttl = exchange_ttl
        self.exchange_deny = list(exchange_deny)
        self.log_path = Path(log_path) if log_path else self.state_dir / "provider.log"
        self.issuer = ""
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        cmd = [self.node, str(SCRIPT), "--port", str(self.port), "--state-dir", str(self.state_dir),
               "--kid", self.kid, "--access-ttl", str(self.access_ttl),
               "--node-modules", str(self.node_modules)]
        for r in self.resources:
            cmd += ["--resource", r]
        for r in self.opaque_resources:
            cmd += ["--opaque-resource", r]
        for r in self.exchange_resources:
            cmd += ["--exchange-resource", r]
        for s in self.exchange_deny:
            cmd += ["--exchange-deny", s]
        return cmd + ["--exchange-ttl", str(self.exchange_ttl)]

    def start(self) -> "Provider":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.env, cwd=self.state_dir)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:].decode(errors="replace")
            for line in text.splitlines():
                if line.startswith("READY "):
                    self.issuer = line.split()[1]
                    self.port = int(self.issuer.rsplit(":", 1)[1])
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"oidc_provider.mjs exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"oidc_provider.mjs did not print READY in {START_TIMEOUT} s:\n{text}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, kid: str | None = None) -> "Provider":
        """Stop and start on the same port; another kid makes a new signing key."""
        self.stop()
        if kid is not None:
            self.kid = kid
        return self.start()

    @property
    def private_key_pem(self) -> bytes:
        return (self.state_dir / "signing-key.pem").read_bytes()

    def __enter__(self) -> "Provider":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def start_provider(node, repo, state_dir, port: int | None = None, resources: Sequence[str] = (),
                   kid: str = "k1", access_ttl: int = 300, **kw) -> Iterator[Provider]:
    """The provider, running for the `with` block (see `Provider` for the other keywords)."""
    p = Provider(node, repo, state_dir, port=port, resources=resources, kid=kid, access_ttl=access_ttl, **kw)
    p.start()
    try:
        yield p
    finally:
        p.stop()


# ---- HTTP ----------------------------------------------------------------------------------

class OAuthError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body
        try:
            self.json = json.loads(body)
        except ValueError:
            self.json = None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **kw):
        return None


_opener = urllib.request.build_opener(_NoRedirect)  # no cookies, no redirects followed


def _request(url: str, data: dict | None = None, json_body: dict | None = None,
             basic: tuple[str, str] | None = None) -> tuple[int, dict, bytes]:
    headers = {"Accept": "application/json"}
    body = None
    if data is not None:
        body = urllib.parse.urlencode({k: v for k, v in data.items() if v is not None}).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif json_body is not None:
        body = json.dumps(json_body).encode()
        headers["Content-Type"] = "application/json"
    if basic:
        pair = f"{urllib.parse.quote(basic[0], safe='')}:{urllib.parse.quote(basic[1], safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with _opener.open(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _json(url: str, **kw) -> dict:
    status, _, body = _request(url, **kw)
    if status not in (200, 201):
        raise OAuthError(status, body.decode(errors="replace"))
    return json.loads(body)


def discovery(issuer: str, oauth: bool = False) -> dict:
    """/.well-known/openid-configuration, or with oauth=True /.well-known/oauth-authorization-server."""
    name = "oauth-authorization-server" if oauth else "openid-configuration"
    return _json(f"{issuer}/.well-known/{name}")


def jwks(issuer: str) -> dict:
    return _json(f"{issuer}/jwks")


def token_request(issuer: str, data: dict, basic: tuple[str, str] | None = None) -> dict:
    """POST /token; the response JSON, or OAuthError (with .json = the error body)."""
    return _json(f"{issuer}/token", data=data, basic=basic)


def client_credentials(issuer: str, client_id: str, secret: str, resource: str | None,
                       scope: str | None = None) -> dict:
    return token_request(issuer, {"grant_type": "client_credentials", "resource": resource, "scope": scope},
                         basic=(client_id, secret))


def client_credentials_token(issuer: str, client_id: str, secret: str, resource: str | None,
                             scope: str | None = None) -> str:
    """An access token for `resource` (a JWT, aud = resource, sub = client_id). scope None sends
    none, and the token then carries no `scope` claim; ask e.g. for ALL_SCOPES."""
    return client_credentials(issuer, client_id, secret, resource, scope)["access_token"]


def exchanges(issuer: str) -> dict:
    """The token exchanges the server made: {"count": n, "subjects": {sub: n}}."""
    return _json(f"{issuer}/test/exchanges")


def introspect(issuer: str, token: str, client_id: str = "gateway", secret: str = "gateway-secret") -> dict:
    return _json(f"{issuer}/token/introspection", data={"token": token}, basic=(client_id, secret))


def register_client(issuer: str, redirect_uri: str = "http://127.0.0.1:1/callback", **metadata) -> dict:
    """Dynamic registration (open): by default a public native client for code + refresh."""
    body = {"redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "application_type": "native", "client_name": "peer-suite", **metadata}
    return _json(f"{issuer}/reg", json_body=body)


def follow_authorize(url: str, redirect_uri: str, max_hops: int = 10) -> dict[str, str]:
    """GET an authorization URL and follow its Location headers (no cookies needed) until one
    points at `redirect_uri`; return that redirect's query (code, state, iss, or error...)."""
    for _ in range(max_hops):
        status, headers, body = _request(url)
        location = headers.get("Location") or headers.get("location")
        if status not in (302, 303) or not location:
            raise OAuthError(status, body.decode(errors="replace"))
        url = urllib.parse.urljoin(url, location)
        if url.split("?", 1)[0] == redirect_uri:
            return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    raise RuntimeError(f"more than {max_hops} redirects from the authorization endpoint")


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorization_code_token(issuer: str, resource: str | None, scope: str | None = "mcp",
                             login_hint: str | None = None, client: dict | None = None,
                             redirect_uri: str = "http://127.0.0.1:1/callback") -> dict:
    """Code + PKCE end to end: register a public client (unless `client` is a registration
    response), authorize (the server logs in login_hint, default alice), exchange the code.
    Returns the token response plus `client` (the registration used)."""
    client = client or register_client(issuer, redirect_uri)
    redirect_uri = client["redirect_uris"][0]
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(16)
    query = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": redirect_uri,
             "state": state, "code_challenge": challenge, "code_challenge_method": "S256",
             "scope": scope, "resource": resource, "login_hint": login_hint}
    answer = follow_authorize(f"{issuer}/auth?" + urllib.parse.urlencode({k: v for k, v in query.items() if v}),
                              redirect_uri)
    if "error" in answer:
        raise OAuthError(400, json.dumps(answer))
    assert answer.get("state") == state and answer.get("iss") == issuer, answer
    secret = client.get("client_secret")
    tokens = token_request(issuer, {"grant_type": "authorization_code", "code": answer["code"],
                                    "redirect_uri": redirect_uri, "code_verifier": verifier,
                                    "client_id": None if secret else client["client_id"], "resource": resource},
                           basic=(client["client_id"], secret) if secret else None)
    return {**tokens, "client": client}


def refresh(issuer: str, client: dict, refresh_token: str, resource: str | None = None) -> dict:
    secret = client.get("client_secret")
    return token_request(issuer, {"grant_type": "refresh_token", "refresh_token": refresh_token,
                                  "client_id": None if secret else client["client_id"], "resource": resource},
                         basic=(client["client_id"], secret) if secret else None)


# ---- tokens of our own -----------------------------------------------------------------------

def make_claims(issuer: str, aud: str, sub: str = "alice", scope: str | None = ALL_SCOPES,
                groups: Sequence[str] = ("admins",), exp_in: int = 300, nbf_in: int | None = None,
                client_id: str = "svc-admin", **extra) -> dict:
    """Claims shaped like the server's access tokens; exp_in < 0 is expired, nbf_in > 0 not yet
    valid. Pass None to leave a claim out (e.g. scope=None)."""
    now = int(time.time())
    claims = {"iss": issuer, "aud": aud, "sub": sub, "scope": scope, "groups": list(groups),
              "client_id": client_id, "iat": now, "exp": now + exp_in, "jti": secrets.token_urlsafe(12),
              "nbf": None if nbf_in is None else now + nbf_in, **extra}
    return {k: v for k, v in claims.items() if v is not None}


def sign(private_key_pem: bytes, kid: str, claims: dict, alg: str = "RS256", headers: dict | None = None) -> str:
    """A JWT over `claims`, signed with the provider's key; header kid + typ at+jwt (RFC 9068)
    unless `headers` says otherwise (typ None drops it)."""
    return jwt.encode(claims, private_key_pem, algorithm=alg, headers={"kid": kid, "typ": "at+jwt", **(headers or {})})


def decode_unverified(token: str) -> tuple[dict, dict]:
    """(header, payload) of a JWT, without checking anything."""
    return jwt.get_unverified_header(token), jwt.decode(token, options={"verify_signature": False})
