#!/usr/bin/env python3
"""A bounded soak of a real gateway on loopback (stdlib only).

    scripts/soak.py [--seconds 60] [--workers 6] [--toolgate target/debug/toolgate]

Starts `toolgate serve --http 127.0.0.1:0` in front of four fixture upstreams: `alpha`
(stdio, well behaved), `flood` (stdio, `--fault flood-notifications`), `crashy` (stdio; some
calls `_crash` it mid-call, so it restarts) and `web` (Streamable HTTP). Three API keys
(principals) drive mixed traffic from `--workers` threads, each on its own legacy session:
tools/call of the four upstreams with a nonce in every call, now and then a tools/list,
and now and then a request on another principal's session id (which must be refused).

Then it checks, and prints one JSON summary (exit 1 if any check fails):
- every request was answered, with its own id, and every call's answer holds its nonce
  (or is an error result: the crashed upstream, an upstream restarting);
- nothing crossed principals: no answer held another principal's nonce, every foreign
  session id was refused;
- audit lines = calls: one closing record (`end`, or the one line of a call that did not
  run) per call made;
- memory near baseline: the gateway's RSS after the load and a rest, against its RSS after
  the warm-up (reported as a ratio; fails above 1.5x + 32 MiB);
- no process left once the gateway was stopped with SIGTERM;
- the state store's faults cost only the calls that need it: one session per principal on
  `/mcp/guided` alternates an `execute` that needs nothing stored with a program's
  `state.set`/`state.get`, while the embedded store's file has pages overwritten (at 30%
  of the run; a running gateway meets them only when it reads a page it has not cached)
  and is then taken away (60%: the store "killed"). Every one of those requests is
  accounted for: answered right, or answered with a clear error naming the store's file
  (sent = right + clear); the `execute`s are all right, and the store serves again after
  the faults (a new file), without a restart.
"""

import argparse
import faulthandler
import hashlib
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

LEGACY = "2025-11-25"
KEYS = {f"k{i}": f"tg_soak_key_{i}_{os.getpid()}" for i in range(3)}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def processes_mentioning(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append(int(pid))
    return found


def messages(body):
    """The JSON-RPC messages of an answer: plain JSON or SSE data lines."""
    body = body.strip()
    if body.startswith("{"):
        return [json.loads(body)]
    out = []
    for line in body.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data.startswith("{"):
                out.append(json.loads(data))
    return out


class Session:
    def __init__(self, url, key):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.path = u.hostname, u.port, u.path
        self.key = key
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        self.sid = None
        self.next_id = 0

    def post(self, payload, sid=None):
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self.key}",
            "MCP-Protocol-Version": LEGACY,
        }
        if sid or self.sid:
            headers["Mcp-Session-Id"] = sid or self.sid
        for attempt in range(2):
            try:
                self.conn.request("POST", self.path, body=json.dumps(payload), headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.getheader("mcp-session-id"), resp.read().decode("utf-8", "replace")
            except (http.client.HTTPException, OSError):
                # A keep-alive connection the gateway closed while idle: reconnect once.
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
                if attempt:
                    raise

    def request(self, method, params, sid=None):
        self.next_id += 1
        rid = self.next_id
        status, _, body = self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, sid)
        answer = next((m for m in messages(body) if m.get("id") == rid), None) if body else None
        return rid, status, answer, body

    def open(self):
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}
        status, sid, body = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        if status != 200 or not sid:
            raise RuntimeError(f"initialize: {status} {body[:200]}")
        self.sid = sid
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}
        self.problems = []

    def add(self, key, n=1):
        with self.lock:
            self.c[key] = self.c.get(key, 0) + n

    def problem(self, text):
        with self.lock:
            if len(self.problems) < 20:
                self.problems.append(text)
            self.c["problems"] = self.c.get("problems", 0) + 1


def worker(url, principal, n, deadline, tally, sessions, rng):
    s = Session(url, KEYS[principal])
    s.open()
    with tally.lock:
        sessions.append((principal, s.sid))
    i = 0
    while time.time() < deadline:
        i += 1
        roll = rng.random()
        if roll < 0.03:
            # Another principal's session: must be refused.
            with tally.lock:
                others = [sid for p, sid in sessions if p != principal]
            if others:
                rid, status, answer, body = s.request("tools/list", {}, sid=rng.choice(others))
                tally.add("foreign_attempts")
                if status == 200 and answer and "result" in answer:
                    tally.problem(f"{principal} read another principal's session: {body[:200]}")
            continue
        if roll < 0.08:
            rid, status, answer, body = s.request("tools/list", {})
            tally.add("lists")
            if not answer or answer.get("id") != rid:
                tally.problem(f"tools/list {rid}: no answer with its id ({status}) {body[:200]}")
            continue
        nonce = f"{principal}:{n}:{i}:{rng.randrange(1 << 30)}"
        args = {"message": nonce}
        if roll < 0.70:
            tool = "alpha_echo"
        elif roll < 0.80:
            tool = "web_echo"
        elif roll < 0.86:
            tool = "flood_echo"
        else:
            tool = "crashy_echo"
            if roll > 0.97:
                args["_crash"] = True
        rid, status, answer, body = s.request("tools/call", {"name": tool, "arguments": args})
        tally.add("calls")
        if not answer or answer.get("id") != rid:
            tally.problem(f"{tool} {rid}: no answer with its id ({status}) {body[:300]}")
            continue
        text = json.dumps(answer)
        for other in KEYS:
            if other != principal and f"\"{other}:" in text.replace("\\\"", "\""):
                tally.problem(f"{principal} got an answer holding {other}'s nonce: {text[:200]}")
        result = answer.get("result") or {}
        if result.get("isError") or "error" in answer:
            tally.add(f"errors_{tool}")
            if tool in ("alpha_echo", "web_echo", "flood_echo") and "_crash" not in args:
                tally.add("errors_unexpected")
        elif nonce not in text:
            tally.problem(f"{tool} {rid}: the answer lacks its nonce: {text[:200]}")
        else:
            tally.add("ok")


def store_worker(url, principal, deadline, tally, rng, store_path, healed_after):
    """Guided calls that need nothing stored, and programs that need the store."""
    s = Session(url, KEYS[principal])
    s.open()
    i = 0
    while time.time() < deadline:
        i += 1
        nonce = f"{principal}:st:{i}:{rng.randrange(1 << 30)}"
        needs_store = i % 2 == 0
        if needs_store:
            code = f"await state.set('soak', '{nonce}'); return await state.get('soak')"
            params = {"name": "execute_code", "arguments": {"code": code}}
        else:
            params = {"name": "execute", "arguments": {"tool": "alpha/echo", "arguments": {"message": nonce}}}
        rid, status, answer, body = s.request("tools/call", params)
        tally.add("store_sent")
        if not needs_store:
            tally.add("store_executes")  # one audited upstream call each
        if not answer or answer.get("id") != rid:
            tally.problem(f"store worker {rid}: no answer with its id ({status}) {body[:300]}")
            continue
        text = json.dumps(answer)
        if "error" not in answer and nonce in text and "state store" not in text:
            tally.add("store_right")
            if needs_store and time.time() > healed_after:
                tally.add("store_right_after_faults")
        elif needs_store and "state store" in text and store_path in text:
            tally.add("store_clear_error")
        else:
            what = "a program's state" if needs_store else "an execute that needs nothing stored"
            tally.problem(f"{what}: neither right nor a clear store error: {text[:300]}")
        # Programs cost a worker process each: a pace that leaves the machine to the rest.
        time.sleep(0.1)


def store_faults(store_path, started, seconds, tally):
    """Damages the embedded store's file, then takes it from under the running gateway."""
    def at(fraction):
        time.sleep(max(0.0, started + seconds * fraction - time.time()))

    at(0.3)
    size = os.path.getsize(store_path)
    with open(store_path, "r+b") as f:
        for offset in range(4096, size, 8192):
            f.seek(offset)
            f.write(b"\xa5" * 4096)
    tally.add("store_damaged")
    at(0.6)
    # The store "killed": its file gone while open (redb would go on writing to it).
    os.rename(store_path, store_path + ".killed")
    tally.add("store_killed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--toolgate", default=os.environ.get("TOOLGATE", "target/debug/toolgate"))
    a = ap.parse_args()
    # Bounded: a soak that hangs prints where every thread is and exits.
    faulthandler.dump_traceback_later(a.seconds + 180, exit=True)
    exe = os.path.abspath(a.toolgate)
    work = tempfile.mkdtemp(prefix="toolgate-soak-")
    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    catalog = [{"server": s, "tool": {"name": "echo", "description": f"Echo on {s}.", "inputSchema": schema,
                                      "annotations": {"readOnlyHint": True}}}
               for s in ("alpha", "flood", "crashy", "web")]
    cat = os.path.join(work, "catalog.json")
    with open(cat, "w") as f:
        json.dump(catalog, f)
    web = subprocess.Popen([exe, "fixture", "--catalog", cat, "--server", "web", "--http", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, text=True)
    web_url = web.stdout.readline().strip().removeprefix("listening ")

    def stdio(name, *extra):
        args = ["fixture", "--catalog", cat, "--server", name, *extra]
        return f"[upstreams.{name}]\ncommand = {json.dumps(exe)}\nargs = {json.dumps(args)}\ncall_timeout_secs = 60\n"

    keys = "".join(
        f"[policy.keys.{p}]\nhash = \"sha256:{hashlib.sha256(k.encode()).hexdigest()}\"\nscopes = [\"*\"]\ntier = \"write\"\n"
        for p, k in KEYS.items())
    audit = os.path.join(work, "audit.jsonl")
    store_path = os.path.join(work, "state.redb")
    config = (
        "[gateway]\nmode = \"direct\"\nstartup_wait_ms = 30000\n"
        + f"[code]\nenabled = true\n[store]\nbackend = \"embedded\"\npath = {json.dumps(store_path)}\n"
        "[gateway.limits]\nshutdown_grace_secs = 5\nmax_sessions_per_principal = 50\n"
        + stdio("alpha") + stdio("flood", "--fault", "flood-notifications") + stdio("crashy")
        + f"[upstreams.web]\nurl = {json.dumps(web_url)}\n"
        + f"[policy.audit]\npath = {json.dumps(audit)}\n" + keys)
    cfg = os.path.join(work, "toolgate.toml")
    with open(cfg, "w") as f:
        f.write(config)
    # The gateway's log goes to a file, so it outlives this script if the script dies.
    log_path = os.path.join(work, "gateway.log")
    # The embedded store (the HTTP default) goes in the work folder, not the user's.
    env = {**os.environ, "XDG_STATE_HOME": os.path.join(work, "state")}
    gw = subprocess.Popen([exe, "serve", "--http", "127.0.0.1:0", "--config", cfg],
                          stdout=subprocess.DEVNULL, stderr=open(log_path, "w"), env=env)
    url = None
    for _ in range(600):
        with open(log_path, errors="replace") as f:
            for line in f:
                if line.startswith("MCP endpoint: "):
                    url = line.split()[2]
        if url or gw.poll() is not None:
            break
        time.sleep(0.1)
    if not url:
        sys.exit("the gateway printed no endpoint; see " + log_path)

    tally, sessions = Tally(), []
    # Warm-up: one session per principal, a few calls each, then the baseline.
    warm_end = time.time() + 3
    ts = [threading.Thread(target=worker, args=(url, p, 100 + j, warm_end, tally, sessions, random.Random(j)))
          for j, p in enumerate(KEYS)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    time.sleep(1)
    baseline = rss_kib(gw.pid)
    started = time.time()
    deadline = started + a.seconds
    ts = [threading.Thread(target=worker, args=(url, list(KEYS)[j % 3], j, deadline, tally, sessions, random.Random(j)))
          for j in range(a.workers)]
    guided = url.removesuffix("/mcp") + "/mcp/guided"
    healed_after = started + a.seconds * 0.7
    ts += [threading.Thread(target=store_worker,
                            args=(guided, p, deadline, tally, random.Random(50 + j), store_path, healed_after))
           for j, p in enumerate(KEYS)]
    faults = threading.Thread(target=store_faults, args=(store_path, started, a.seconds, tally))
    [t.start() for t in ts]
    faults.start()
    peak = baseline
    while any(t.is_alive() for t in ts):
        peak = max(peak, rss_kib(gw.pid))
        time.sleep(0.5)
    faults.join()
    elapsed = time.time() - started
    time.sleep(5)
    after = rss_kib(gw.pid)

    gw.send_signal(signal.SIGTERM)
    try:
        code = gw.wait(timeout=60)
    except subprocess.TimeoutExpired:
        gw.kill()
        code = "killed after 60 s"
    web.terminate()
    web.wait(timeout=30)
    left = []
    for _ in range(100):
        left = processes_mentioning(work)
        if not left:
            break
        time.sleep(0.1)

    records = []
    with open(audit) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "call" and r.get("phase") != "start":
                records.append(r)
    c = tally.c
    calls = c.get("calls", 0)
    checks = {
        "every request answered with its own id": tally.problems == [],
        "nothing cross-principal": not any("nonce" in p or "session" in p for p in tally.problems),
        "audit lines = calls": len(records) == calls + c.get("store_executes", 0),
        "memory near baseline": after <= baseline * 1.5 + 32 * 1024,
        "gateway exited 0 on SIGTERM": code == 0,
        "no process left": left == [],
        "store requests: sent = right + clear error": c.get("store_sent", 0) > 0
        and c.get("store_sent", 0) == c.get("store_right", 0) + c.get("store_clear_error", 0),
        "store faults injected": c.get("store_damaged", 0) == 1 and c.get("store_killed", 0) == 1,
        "store served again after the faults": c.get("store_right_after_faults", 0) > 0,
    }
    summary = {
        "seconds": round(elapsed, 1), "workers": a.workers, "calls": calls,
        "calls_per_sec": round(calls / elapsed, 1), "ok": c.get("ok", 0),
        "errors": {k: v for k, v in c.items() if k.startswith("errors_")},
        "lists": c.get("lists", 0), "foreign_attempts_refused": c.get("foreign_attempts", 0),
        "audit_closing_records": len(records),
        "rss_mib": {"baseline": round(baseline / 1024, 1), "peak": round(peak / 1024, 1),
                    "after_rest": round(after / 1024, 1), "ratio": round(after / max(baseline, 1), 2)},
        "store": {k.removeprefix("store_"): v for k, v in c.items() if k.startswith("store_")},
        "processes_left": left, "problems": tally.problems, "checks": checks,
        "work_dir": work,
    }
    ok = all(checks.values())
    # The work folder (logs, audit, state) is kept only when something is to be looked at.
    if ok:
        shutil.rmtree(work, ignore_errors=True)
        summary["work_dir"] = None
    print(json.dumps(summary, indent=2))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
