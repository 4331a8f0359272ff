#!/usr/bin/env python3
"""Converts every tool schema to a llama.cpp grammar (GBNF) and reports what fails.

    toolgate lint --catalog CATALOG --profile raw   --dump-schemas > raw.jsonl
    toolgate lint --catalog CATALOG --profile local --dump-schemas > local.jsonl
    python3 scripts/grammar_check.py raw.jsonl local.jsonl

Each input line is {"server", "tool", "schema"}. Per schema, in a child process with a
time limit: llama-cpp-python's `json_schema_to_gbnf` (the Python port of llama.cpp's
json_schema_to_grammar), then, when the compiled library loads, llama.cpp's own grammar
parser (`llama_sampler_init_grammar`, no model needed) on the result. Reported per file:
converted, converter errors (by message), timeouts, parser failures, grammar sizes.

Needs `pip install llama-cpp-python` (it compiles llama.cpp). Without the compiled
library, `--converter path/to/llama_grammar.py` runs the converter step alone.
"""

import argparse
import collections
import importlib.util
import json
import multiprocessing as mp
import statistics
import sys
import time


def load_converter(path):
    if path:
        spec = importlib.util.spec_from_file_location("llama_grammar", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.json_schema_to_gbnf, None
    import llama_cpp
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf, llama_cpp


CONVERTER = None  # (convert, lib), loaded once in the parent; forked children inherit it


def check_one(schema, parse, out):
    """Runs in a child: converts, optionally parses, sends back a small dict."""
    try:
        convert, lib = CONVERTER
        t0 = time.perf_counter()
        grammar = convert(json.dumps(schema))
        res = {"ok": True, "bytes": len(grammar), "rules": grammar.count("::="),
               "convert_s": time.perf_counter() - t0}
        if parse and lib is not None:
            t0 = time.perf_counter()
            smpl = lib.llama_sampler_init_grammar(None, grammar.encode(), b"root")
            res["parse_s"] = time.perf_counter() - t0
            if not smpl:
                res = {"ok": False, "error": "llama.cpp grammar parser rejected the grammar"}
            else:
                lib.llama_sampler_free(smpl)
        out.put(res)
    except BaseException as e:  # the converter uses assert and ValueError alike
        msg = str(e).split("\n")[0]
        out.put({"ok": False, "error": f"{type(e).__name__}: {msg[:90]}"})


def run_file(path, args):
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    ctx = mp.get_context("fork")
    results = []
    for row in rows:
        q = ctx.Queue()
        p = ctx.Process(target=check_one, args=(row["schema"], args.parse, q))
        p.start()
        p.join(args.timeout)
        if p.is_alive():
            p.kill()
            p.join()
            res = {"ok": False, "timeout": True, "error": f"timeout after {args.timeout}s"}
        else:
            res = q.get() if not q.empty() else {"ok": False, "error": f"crashed (exit {p.exitcode})"}
        res["id"] = f'{row["server"]}/{row["tool"]}'
        results.append(res)
    return results


def summarize(path, results):
    ok = [r for r in results if r["ok"]]
    errors = collections.Counter(r["error"] for r in results if not r["ok"])
    sizes = [r["bytes"] for r in ok]
    out = {
        "file": path,
        "schemas": len(results),
        "converted": len(ok),
        "failed": len(results) - len(ok),
        "timeouts": sum(1 for r in results if r.get("timeout")),
        "errors": dict(errors.most_common()),
        "failed_tools": sorted(r["id"] for r in results if not r["ok"]),
        "grammar_bytes_median": statistics.median(sizes) if sizes else 0,
        "grammar_bytes_max": max(sizes) if sizes else 0,
        "parsed": sum(1 for r in ok if "parse_s" in r),
    }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="JSON lines from `toolgate lint --dump-schemas`")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per schema")
    ap.add_argument("--converter", help="llama_grammar.py to use instead of the installed package")
    ap.add_argument("--no-parse", dest="parse", action="store_false",
                    help="skip llama.cpp's C++ grammar parser")
    args = ap.parse_args()
    global CONVERTER
    CONVERTER = load_converter(args.converter)
    summaries = [summarize(f, run_file(f, args)) for f in args.files]
    print(json.dumps(summaries, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
