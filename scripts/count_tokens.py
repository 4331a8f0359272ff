#!/usr/bin/env python3
"""Independent token count of a catalog's direct surface (OpenAI `tools` form).

Counts what `toolgate tokens` calls the direct total, with OpenAI's own `tiktoken`
package instead of toolgate's tiktoken-rs, and with Python's json module building the
serialization, so neither the BPE code nor the JSON writer is shared with toolgate.

    python3 scripts/count_tokens.py datasets/realcat/catalog.json [--encoding o200k_base]

tiktoken downloads its rank files on first use. Where that cannot be reached, pass
`--bpe-file` with a local copy (e.g. the one bundled in the tiktoken-rs crate); the
file is put in a private cache under the name tiktoken looks for, and tiktoken itself
checks it against the SHA-256 it expects, so a wrong or altered file is refused.
"""

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile

URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


def exposed_name(server, tool):
    """toolgate's exposed-name rule (catalog/names.rs), without the collision step."""
    sanitize = lambda s: (re.sub(r"[^a-zA-Z0-9_-]", "_", s), bool(re.search(r"[^a-zA-Z0-9_-]", s)))
    p, lp = sanitize(server)
    t, lt = sanitize(tool)
    base = f"{p}_{t}" if p else t
    if lp or lt or len(base) > 64 or not base:
        digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:6]
        return f"{base[:57]}_{digest}"
    return base


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalog")
    ap.add_argument("--encoding", default="o200k_base", choices=sorted(URLS))
    ap.add_argument("--bpe-file", help="a local copy of the encoding's .tiktoken file")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    if args.bpe_file:
        cache = tempfile.mkdtemp(prefix="tiktoken-cache-")
        key = hashlib.sha1(URLS[args.encoding].encode()).hexdigest()
        with open(args.bpe_file, "rb") as src, open(os.path.join(cache, key), "wb") as dst:
            dst.write(src.read())
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
    import tiktoken

    enc = tiktoken.get_encoding(args.encoding)
    entries = json.load(open(args.catalog, encoding="utf-8"))
    tools = []
    for e in entries:
        t = e["tool"]
        fn = {"name": exposed_name(e["server"], t["name"])}
        if "description" in t:
            fn["description"] = t["description"]
        fn["parameters"] = t.get("inputSchema", {"type": "object"})
        tools.append({"type": "function", "function": fn})

    dump = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    per_tool = sum(len(enc.encode_ordinary(dump(t))) for t in tools)
    whole = len(enc.encode_ordinary(dump(tools)))
    out = {"encoding": args.encoding, "tools": len(tools), "sum_of_tools": per_tool, "whole_array": whole}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    sys.exit(main())
