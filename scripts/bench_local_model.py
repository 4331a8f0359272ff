#!/usr/bin/env python3
"""The incident, measured with real software: OpenCode -> llama.cpp's llama-server, with MCP
tools configured directly, through toolgate guided, and through toolgate direct with the
`local` schema profile. Run by scripts/bench-local-model.sh, which builds and fetches the
parts; this file drives them and writes the table, the JSON and the plot's data.

For each configuration and task: one `opencode run` against a fresh llama-server (no
prompt cache carried over from the run before), through a recording proxy on loopback that
keeps, per chat request, the tools sent (count and JSON bytes), the time to the first
token, the total time, llama-server's own counts (usage and timings) or its refusal.
The figure reported is OpenCode's first request that carries tools (the agent's first turn).

The model (Gemma 3 270M, a base model) is good for prompt size, time to first token and
whether the grammar builds; not for judging answers. Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# The incident (issue 44): OpenCode, llama.cpp, 96 MCP tools.
INCIDENT = {"hello_tokens": 55_985, "hello_seconds": 97.6,
            "grammar_fail_83_s": 124, "grammar_fail_96_s": 143}

# The 96-tool set: like the incident's, several servers, some with large schemas (notion
# 3.4 KB and mongodb 2.9 KB a tool on average; github 1.2 KB; filesystem 1 KB).
SUBSET = [("github", 31), ("notion", 24), ("mongodb", 27), ("filesystem", 14)]

TASKS = [
    ("hello", "hello"),
    ("issue", "Open an issue in octo-org/webapp titled 'Login page times out' saying the login "
              "page times out after 30 seconds."),
    ("count", "How many documents are in the orders collection of the shop database in MongoDB?"),
    ("notion", "Find the Notion page called 'Q3 roadmap' and show me what it says."),
]

CURVE = [16, 32, 64, 96, "all"]


# ----------------------------------------------------------------------------- catalog

def load_catalog(path: Path) -> list[dict]:
    cat = json.loads(path.read_text())
    if not isinstance(cat, list) or not cat:
        sys.exit(f"{path}: not a catalog (a JSON array of {{server, tool}})")
    return cat


def subset96(cat: list[dict]) -> list[dict]:
    """SUBSET's tools in catalog order, interleaved across servers, so that every prefix
    (16, 32, 64) also spans several servers."""
    per = {}
    for server, n in SUBSET:
        tools = [e for e in cat if e["server"] == server][:n]
        if len(tools) < n:
            sys.exit(f"the catalog has {len(tools)} tools of {server}, the subset needs {n}")
        per[server] = tools
    out, i = [], 0
    while len(out) < sum(n for _, n in SUBSET):
        for server, n in SUBSET:
            if i < n:
                out.append(per[server][i])
        i += 1
    return out


def servers_of(entries: list[dict]) -> list[str]:
    seen = []
    for e in entries:
        if e["server"] not in seen:
            seen.append(e["server"])
    return seen


# ----------------------------------------------------------------------------- processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(p: subprocess.Popen | None) -> None:
    """Ends a process group this script started, and waits for it."""
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


class LlamaServer:
    """One llama-server process on a free loopback port, started fresh for each run."""

    def __init__(self, args, log: Path):
        self.port = free_port()
        self.log = log
        cmd = [args.llama_server, "-m", args.model, "--host", "127.0.0.1", "--port", str(self.port),
               "--jinja", "--chat-template-file", args.template,
               "-c", str(args.ctx), "-np", "1", "-t", str(args.threads), "-n", str(args.max_tokens),
               "--metrics", "--no-webui",
               # Gemma 3 270M declares 32,768 tokens; llama-server caps a slot there. The
               # incident's requests were longer, so the declared context is raised: the
               # server then takes (and counts) them, the answers past 32 K mean nothing.
               "--override-kv", f"gemma3.context_length=int:{args.ctx}"]
        self.p = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                sys.exit(f"llama-server exited ({self.p.returncode}); its log: {log}\n{log.read_text()[-3000:]}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        stop(self.p)
        sys.exit(f"llama-server did not become healthy in 120 s; its log: {log}")

    def post(self, path: str, body: dict, timeout: float = 600) -> tuple[int, dict]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, {"raw": data.decode(errors="replace")}

    def count_prompt(self, body: dict) -> int | None:
        """The prompt's tokens as llama-server makes and counts it, for a request it refused:
        the chat template applied (tool_choice none: the same prompt, no grammar), then
        /tokenize."""
        b = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        b["tool_choice"] = "none"
        st, res = self.post("/apply-template", b)
        if st != 200 or "prompt" not in res:
            return None
        st, tok = self.post("/tokenize", {"content": res["prompt"], "add_special": True})
        return len(tok.get("tokens", [])) if st == 200 else None

    def close(self) -> None:
        stop(self.p)


# ----------------------------------------------------------------------------- the proxy

class Recorder:
    """Forwards OpenCode's requests to llama-server and records each chat request."""

    def __init__(self, upstream_port: int):
        self.upstream = upstream_port
        self.records: list[dict] = []
        self.lock = threading.Lock()
        rec = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                rec.forward(self, None)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                rec.forward(self, self.rfile.read(n))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def forward(self, h: BaseHTTPRequestHandler, raw: bytes | None) -> None:
        t0 = time.monotonic()
        record = None
        if raw is not None and h.path.endswith("/chat/completions"):
            body = json.loads(raw)
            tools = body.get("tools") or []
            record = {"t0": t0, "tools": len(tools),
                      "tools_bytes": len(json.dumps(tools, separators=(",", ":")).encode()),
                      "request_bytes": len(raw), "body": body, "status": None, "error": None,
                      "ttft_s": None, "total_s": None, "usage": None, "timings": None}
            with self.lock:
                self.records.append(record)
        try:
            self.relay(h, raw, record, t0)
        except (OSError, http.client.HTTPException):
            pass  # llama-server stopped under a run cut at its time limit

    def relay(self, h: BaseHTTPRequestHandler, raw: bytes | None, record: dict | None, t0: float) -> None:
        c = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=3600)
        headers = {"Content-Type": h.headers.get("Content-Type", "application/json")}
        c.request(h.command, h.path, raw, headers)
        r = c.getresponse()
        h.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection", "keep-alive"):
                h.send_header(k, v)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        buf, error_body = b"", b""
        while True:
            chunk = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
            if not chunk:
                break
            if record is not None:
                if r.status != 200:
                    error_body += chunk
                else:
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        self.on_line(record, line.strip(), t0)
            try:
                h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                h.wfile.flush()
            except OSError:
                break
        try:
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except OSError:
            pass
        if record is not None:
            record["status"] = r.status
            record["total_s"] = time.monotonic() - t0
            if r.status != 200:
                try:
                    err = json.loads(error_body)
                    record["error"] = (err.get("error") or {}).get("message") or error_body.decode()[:500]
                    record["error_json"] = err
                except ValueError:
                    record["error"] = error_body.decode(errors="replace")[:500]

    @staticmethod
    def on_line(record: dict, line: bytes, t0: float) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        try:
            ev = json.loads(data)
        except ValueError:
            return
        if "error" in ev and record["error"] is None:
            record["error"] = (ev["error"] or {}).get("message") if isinstance(ev["error"], dict) else str(ev["error"])
        for ch in ev.get("choices") or []:
            d = ch.get("delta") or {}
            if record["ttft_s"] is None and (d.get("content") or d.get("reasoning_content") or d.get("tool_calls")):
                record["ttft_s"] = time.monotonic() - t0
        if ev.get("usage"):
            record["usage"] = ev["usage"]
        if ev.get("timings"):
            record["timings"] = ev["timings"]


# ----------------------------------------------------------------------------- one run

def opencode_config(proxy_port: int, mcp: dict, args) -> dict:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"llama": {
            "npm": "@ai-sdk/openai-compatible", "name": "llama-server",
            "options": {"baseURL": f"http://127.0.0.1:{proxy_port}/v1"},
            "models": {"gemma3-270m": {"name": "Gemma 3 270M (Q4_K_M)", "tool_call": True,
                                       "limit": {"context": args.ctx, "output": args.max_tokens}}}}},
        "model": "llama/gemma3-270m",
        "mcp": mcp,
        "autoupdate": False,
        "share": "disabled",
    }


def mcp_servers(kind: str, entries: list[dict], work: Path, args) -> dict:
    """OpenCode's `mcp` section for one configuration over these catalog entries."""
    catalog = work / "catalog.json"
    catalog.write_text(json.dumps(entries))
    servers = servers_of(entries)
    if kind == "none":
        return {}
    if kind == "direct":
        return {s: {"type": "local", "enabled": True,
                    "command": [args.toolgate, "fixture", "--catalog", str(catalog), "--server", s]}
                for s in servers}
    profile = "local" if kind == "toolgate-local" else "raw"
    mode = "guided" if kind == "guided" else "direct"
    # The first tools/list waits for every upstream: OpenCode lists tools once, at start.
    toml = [f'[gateway]\nstartup_wait_ms = 60000\n\n[direct]\nprofile = "{profile}"\n']
    for s in servers:
        toml.append(f'[upstreams.{json.dumps(s)}]\ncommand = {json.dumps(args.toolgate)}\n'
                    f'args = ["fixture", "--catalog", {json.dumps(str(catalog))}, "--server", {json.dumps(s)}]\n')
    cfg = work / "toolgate.toml"
    cfg.write_text("\n".join(toml))
    return {"toolgate": {"type": "local", "enabled": True,
                         "command": [args.toolgate, "serve", "--stdio", "--mode", mode, "--config", str(cfg)]}}


def prompt_progress(log: Path) -> dict | None:
    """Whether llama-server launched the request's slot, which it does only once the
    request's sampler, tool grammar included, is made ("processing task"), and its last
    "prompt processing" line: how much of the prompt it had read, at what rate."""
    text = log.read_text(errors="replace") if log.exists() else ""
    if "processing task" not in text:
        return None
    out = {"launched": True}
    last = None
    for line in text.splitlines():
        if "prompt processing, n_tokens" in line:
            last = line
    if last is not None:
        try:
            out["n_tokens"] = int(last.split("n_tokens =")[1].split(",")[0])
            out["progress"] = float(last.split("progress =")[1].split(",")[0])
            out["t_s"] = float(last.split("t =")[1].split("s /")[0])
            out["tokens_per_s"] = float(last.split("s /")[1].split("tokens")[0])
        except (IndexError, ValueError):
            pass
    return out


def run_one(kind: str, entries: list[dict], task: str, args, logs: Path, label: str,
            timeout: float | None = None) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"lm-{label}-", dir=args.scratch))
    (work / "project").mkdir()
    (work / "home").mkdir()
    llama = LlamaServer(args, logs / f"{label}.llama.log")
    rec = Recorder(llama.port)
    try:
        cfg = opencode_config(rec.port, mcp_servers(kind, entries, work, args), args)
        (work / "project" / "opencode.json").write_text(json.dumps(cfg, indent=2))
        env = {"HOME": str(work / "home"), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "LANG": "C.UTF-8", "NO_COLOR": "1", "TERM": "dumb",
               "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
        t0 = time.monotonic()
        out = logs / f"{label}.opencode.log"
        p = subprocess.Popen([args.opencode, "run", "--title", "bench", task], cwd=work / "project", env=env,
                             stdout=out.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        timed_out = False
        try:
            p.wait(timeout=timeout or args.run_timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        stop(p)
        wall = time.monotonic() - t0
        first = next((r for r in rec.records if r["tools"]), rec.records[0] if rec.records else None)
        row = {"config": kind, "task": label.split(".")[-1], "label": label, "n_tools": len(entries),
               "wall_s": round(wall, 1),
               "timed_out": timed_out, "requests": len(rec.records), "opencode_exit": p.returncode}
        if first is None:
            row.update({"status": None, "error": f"OpenCode sent no chat request (see {out})"})
            return row
        # Counted and read before llama-server stops: a run cut at its time limit may still
        # be reading the prompt.
        progress = prompt_progress(llama.log) if first["status"] is None else None
        tokens, counted = None, "usage"
        if first["usage"]:
            tokens = first["usage"].get("prompt_tokens")
        ej = (first.get("error_json") or {}).get("error") or {}
        if tokens is None and ej.get("n_prompt_tokens"):
            tokens, counted = ej["n_prompt_tokens"], "error"
        if tokens is None:
            tokens, counted = llama.count_prompt(first["body"]), "tokenize"
        accepted = (first["status"] == 200 and not first["error"]) or (first["status"] is None and progress is not None)
        row.update({
            "status": first["status"], "accepted": accepted, "error": first["error"],
            "input_tokens": tokens, "tokens_from": counted,
            "tools_sent": first["tools"], "tools_json_bytes": first["tools_bytes"],
            "tool_names": [(t.get("function") or {}).get("name") for t in first["body"].get("tools") or []],
            "request_bytes": first["request_bytes"],
            "ttft_s": round(first["ttft_s"], 2) if first["ttft_s"] is not None else None,
            "first_total_s": round(first["total_s"], 2) if first["total_s"] is not None else None,
            "prompt_ms": (first["timings"] or {}).get("prompt_ms"),
            "prompt_per_second": (first["timings"] or {}).get("prompt_per_second") or (progress or {}).get("tokens_per_s"),
            "cut_while_reading": progress,
        })
        if kind in ("guided",) and len(rec.records) > 1:
            row["later_max_input_tokens"] = max(((r["usage"] or {}).get("prompt_tokens") or 0) for r in rec.records)
        return row
    finally:
        rec.close()
        llama.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- output

def fmt(v, unit=""):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.1f}{unit}"
    if isinstance(v, int):
        return f"{v:,}{unit}"
    return str(v)


def outcome(r: dict) -> str:
    cut = r.get("cut_while_reading")
    if r.get("accepted") and cut and "progress" in cut:
        return (f"accepted (grammar built); {cut['progress']:.0%} of the prompt read when the run was cut "
                f"at {r['wall_s']:.0f} s, {cut['tokens_per_s']:.0f} tokens/s")
    if r.get("accepted") and cut:
        return f"accepted (grammar built); the run was cut at {r['wall_s']:.0f} s before the first progress line"
    if r.get("accepted"):
        return "accepted (grammar built)" + (" (run cut)" if r.get("timed_out") else "")
    if r.get("status") is None:
        return r.get("error") or "no answer when the run was cut"
    return f"refused {r['status']}: {(r.get('error') or '')[:110]}"


def ttft(r: dict) -> str:
    if r.get("ttft_s") is None and r.get("cut_while_reading"):
        return f"> {r['wall_s']:.0f} s"
    return fmt(r.get("ttft_s"), " s")


def table(rows: list[dict]) -> str:
    head = ("| configuration | task | MCP tools | tools sent | tools JSON | input tokens (llama-server) "
            "| time to first token | first request | whole run | llama-server |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
    lines = []
    for r in rows:
        lines.append(f"| {r['config']} | {r['task']} | {fmt(r.get('n_tools'))} | {fmt(r.get('tools_sent'))} | "
                     f"{fmt(r.get('tools_json_bytes'))} B | {fmt(r.get('input_tokens'))} | "
                     f"{ttft(r)} | {fmt(r.get('first_total_s'), ' s')} | "
                     f"{fmt(r.get('wall_s'), ' s')} | {outcome(r)} |")
    return head + "\n".join(lines) + "\n"


def render(out: Path, logs: Path) -> int:
    res = json.loads(out.read_text())
    for r in res["rows"] + res["curve"]:
        if r.get("status") is None and not r.get("accepted"):
            label = r.get("label") or (f"{r['config']}.{r['task']}" if r in res["rows"] else f"curve{r['n_tools']}.hello")
            prog = prompt_progress(logs / f"{label}.llama.log")
            if prog:
                r["accepted"], r["cut_while_reading"] = True, prog
    out.write_text(json.dumps(res, indent=2))
    print(table(res["rows"]))
    if res["curve"]:
        print(table(res["curve"]))
    return 0


def show(row: dict) -> None:
    keys = ("n_tools", "input_tokens", "ttft_s", "wall_s", "accepted", "error")
    print(f"     -> {json.dumps({k: row.get(k) for k in keys})}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-server")
    ap.add_argument("--model")
    ap.add_argument("--template", help="a tool-capable chat template (jinja)")
    ap.add_argument("--opencode")
    ap.add_argument("--toolgate")
    ap.add_argument("--catalog", type=Path)
    ap.add_argument("--out", required=True, type=Path, help="results JSON")
    ap.add_argument("--logs", required=True, type=Path)
    ap.add_argument("--smoke", action="store_true",
                    help='"hello" only: OpenCode alone, guided and direct with 96 tools')
    ap.add_argument("--ctx", type=int, default=131072)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--run-timeout", type=float, default=900)
    ap.add_argument("--probe-timeout", type=float, default=None,
                    help="seconds for the three tasks and the curve (default: --run-timeout); a run "
                         "cut while llama-server reads the prompt still gives its tokens and grammar")
    ap.add_argument("--skip-all", action="store_true", help="leave the 589-tool point out of the curve")
    ap.add_argument("--keep", action="store_true", help="keep each run's folder")
    ap.add_argument("--machine", default="", help="the machine's state, kept in the results")
    ap.add_argument("--render", action="store_true",
                    help="only print the tables of --out again, rows cut at their limit re-read from --logs")
    args = ap.parse_args()
    if args.render:
        return render(args.out, args.logs)
    args.logs.mkdir(parents=True, exist_ok=True)
    args.scratch = str(args.logs)
    if args.catalog is None:
        sys.exit("--catalog is needed (datasets/realcat/catalog.json)")
    for name in ("llama_server", "model", "template", "opencode", "toolgate"):
        path = getattr(args, name)
        if not path or not os.path.exists(path):
            sys.exit(f"--{name.replace('_', '-')} {path}: not found")
        setattr(args, name, os.path.abspath(path))  # the runs change folder

    cat = load_catalog(args.catalog)
    sub = subset96(cat)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = {"incident": INCIDENT, "model": Path(args.model).name, "ctx": args.ctx,
               "machine": args.machine, "when": when,
               "max_tokens": args.max_tokens, "rows": [], "curve": []}

    def save():
        args.out.write_text(json.dumps(results, indent=2))

    if args.smoke:
        plan = [("none", "hello"), ("guided", "hello"), ("direct", "hello")]
    else:
        # OpenCode alone once (its own prompt and tools: the floor every row stands on).
        plan = [("none", "hello")] + [(k, t) for t, _ in TASKS for k in ("direct", "guided", "toolgate-local")]
    tasks = dict(TASKS)
    for kind, task in plan:
        label = f"{kind}.{task}"
        print(f"run: {kind:15s} {task:8s} {0 if kind == 'none' else len(sub)} MCP tools ...", file=sys.stderr, flush=True)
        row = run_one(kind, [] if kind == "none" else sub, tasks[task], args, args.logs, label,
                      None if task == "hello" else args.probe_timeout)
        if kind == "none":
            row["n_tools"] = 0
        show(row)
        results["rows"].append(row)
        save()
    if not args.smoke:
        for n in CURVE:
            if n == "all" and args.skip_all:
                continue
            entries = cat if n == "all" else sub[:n]
            if n == len(sub):  # the table's direct "hello" is this point
                results["curve"].append(next(r for r in results["rows"] if r["config"] == "direct" and r["task"] == "hello"))
                continue
            label = f"curve{len(entries)}.hello"
            print(f"run: curve direct  hello    {len(entries)} tools ...", file=sys.stderr, flush=True)
            row = run_one("direct", entries, "hello", args, args.logs, label, args.probe_timeout)
            row["task"] = "hello"
            show(row)
            results["curve"].append(row)
            save()
    save()
    print(table(results["rows"]))
    if results["curve"]:
        print(table(results["curve"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
