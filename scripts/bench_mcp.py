#!/usr/bin/env python3
"""The MCP side of scripts/bench-load.sh: sessions and one checked call (stdlib only).

    bench_mcp.py session URL TOOL legacy|modern   print the headers wrk sends (one per line)
    bench_mcp.py sessions URL N                   open N sessions and leave them open
    bench_mcp.py body TOOL legacy|modern          print the tools/call body wrk sends
    bench_mcp.py stdio SECS TOOL CMD...           call TOOL over stdio, one call at a time

`session` opens a session (legacy: initialize + notifications/initialized, the session id
header) and makes one tools/call with those headers, so a wrong tool name or a server that
does not speak the era stops the benchmark with its answer instead of a wrk run of errors.

`stdio` starts CMD (an MCP server over stdio), initializes it, and for SECS seconds writes
a tools/call line and reads its answer line, one call at a time, with requests built in
advance from bytes and answers checked by a byte search: no HTTP, no gateway, no JSON
parse on the hot path. It prints "RESULT calls/s p50_us p99_us bad cpu_us" (cpu: the
server's user + system time per call): what one call through a stdio hop costs at least.
"""

import http.client
import json
import os
import resource
import subprocess
import sys
import time
import urllib.parse

LEGACY = "2025-11-25"
MODERN = "2026-07-28"


def connect(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30), u.path or "/"


# BENCH_AUTHORIZATION: an Authorization header every request sends (and `session` prints
# for wrk), e.g. "Bearer tg_..." for a key or "Bearer eyJ..." for an access token.
AUTH = {"Authorization": os.environ["BENCH_AUTHORIZATION"]} if os.environ.get("BENCH_AUTHORIZATION") else {}


def post(conn, path, payload, headers):
    headers = {**AUTH, **headers}
    conn.request(
        "POST",
        path,
        body=json.dumps(payload),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    resp = conn.getresponse()
    return resp.status, dict(resp.getheaders()), resp.read().decode("utf-8", "replace")


def messages(body):
    """JSON-RPC messages of a plain JSON body or an SSE stream."""
    body = body.strip()
    if body.startswith("{"):
        return [json.loads(body)]
    out = []
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip():
            out.append(json.loads(line[5:]))
    return out


def call_body(tool, era):
    params = {"name": tool, "arguments": {"message": "hello"}}
    if era == "modern":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "bench-load", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return {"jsonrpc": "2.0", "id": "__ID__", "method": "tools/call", "params": params}


def initialize(conn, path):
    status, headers, body = post(
        conn,
        path,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "bench-load", "version": "1"},
            },
        },
        {},
    )
    sid = {k.lower(): v for k, v in headers.items()}.get("mcp-session-id")
    if status != 200 or not sid:
        sys.exit(f"initialize at {path}: HTTP {status}, no session id: {body[:300]}")
    version = messages(body)[-1]["result"]["protocolVersion"]
    hdrs = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": version}
    status, _, body = post(
        conn, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, hdrs
    )
    if status not in (200, 202):
        sys.exit(f"notifications/initialized: HTTP {status}: {body[:300]}")
    return hdrs


def session(url, tool, era):
    conn, path = connect(url)
    if era == "modern":
        # No session; the standard headers (SEP-2243) name the method and the tool.
        hdrs = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    else:
        hdrs = initialize(conn, path)
    status, _, body = post(conn, path, call_body(tool, era), hdrs)
    msgs = messages(body) if status == 200 else []
    result = msgs[-1].get("result") if msgs else None
    if not result or result.get("isError"):
        sys.exit(f"tools/call {tool} at {url} ({era}): HTTP {status}: {body[:400]}")
    for k, v in {**AUTH, **hdrs}.items():
        print(f"{k}: {v}")


def sessions(url, n):
    conn, path = connect(url)
    for _ in range(n):
        initialize(conn, path)
    print(n)


class Lines:
    """Reads newline-delimited messages from a pipe's file descriptor."""

    def __init__(self, fd):
        self.fd, self.buf = fd, b""

    def next(self):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 1 :]
                return line
            chunk = os.read(self.fd, 65536)
            if not chunk:
                sys.exit("stdio: the server closed its stdout")
            self.buf += chunk


def stdio(secs, tool, cmd):
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    w, lines = proc.stdin.fileno(), Lines(proc.stdout.fileno())

    def send(msg):
        os.write(w, json.dumps(msg).encode() + b"\n")

    send(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "bench-load", "version": "1"},
            },
        }
    )
    first = json.loads(lines.next())
    if "result" not in first:
        sys.exit(f"stdio initialize: {first}")
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    head, tail = json.dumps(call_body(tool, "legacy")).encode().split(b'"__ID__"')
    # Every answer is a line of its own; a server's notification would be one too, and is
    # counted as a bad answer (the echo tool sends none).
    os.write(w, head + b"1" + tail + b"\n")
    answer = json.loads(lines.next())
    if not answer.get("result") or answer["result"].get("isError"):
        sys.exit(f"stdio tools/call {tool}: {answer}")
    lat, bad, n = [], 0, 0
    clock = time.perf_counter_ns
    start = t = clock()
    end = start + int(secs * 1e9)
    while t < end:
        n += 1
        req = head + b"%d" % (n + 1) + tail + b"\n"
        t0 = clock()
        os.write(w, req)
        line = lines.next()
        t = clock()
        lat.append(t - t0)
        if b'"result"' not in line or b'"isError":true' in line:
            bad += 1
    took = (t - start) / 1e9
    proc.stdin.close()
    proc.wait(timeout=10)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000
    # The server's CPU includes its start and handshake: a few ms against seconds of calls.
    cpu = (used.ru_utime + used.ru_stime) * 1e6 / n
    print(f"RESULT {n / took:.1f} {pct(0.5):.0f} {pct(0.99):.0f} {bad} {cpu:.1f}")


def main():
    cmd = sys.argv[1:2]
    if cmd == ["session"] and len(sys.argv) == 5:
        session(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == ["sessions"] and len(sys.argv) == 4:
        sessions(sys.argv[2], int(sys.argv[3]))
    elif cmd == ["body"] and len(sys.argv) == 4:
        print(json.dumps(call_body(sys.argv[2], sys.argv[3])))
    elif cmd == ["stdio"] and len(sys.argv) >= 5:
        stdio(float(sys.argv[2]), sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
