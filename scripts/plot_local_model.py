#!/usr/bin/env python3
"""Draws docs/local-model.png from scripts/bench_local_model.py's results JSON: the input
tokens and the time to first token of OpenCode's "hello" against llama-server, by the number
of MCP tools configured directly, with toolgate guided's and the incident's points.

    python plot_local_model.py RESULTS.json OUT.png     # needs matplotlib
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    res = json.load(open(sys.argv[1]))
    curve = [r for r in res["curve"] if r.get("input_tokens")]
    guided = next((r for r in res["rows"] if r["config"] == "guided" and r["task"] == "hello"), None)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))

    xs = [r["n_tools"] for r in curve]
    ok = [r for r in curve if r.get("accepted")]
    refused = [r for r in curve if not r.get("accepted")]
    ax1.plot(xs, [r["input_tokens"] for r in curve], "-", color="tab:red", label="MCP servers directly")
    ax1.plot([r["n_tools"] for r in ok], [r["input_tokens"] for r in ok], "o", color="tab:red")
    ax1.plot([r["n_tools"] for r in refused], [r["input_tokens"] for r in refused], "x", color="black",
             markersize=9, label="refused by llama-server")
    if guided and guided.get("input_tokens"):
        ax1.axhline(guided["input_tokens"], color="tab:green", ls="--",
                    label=f"toolgate guided, 96 tools ({guided['input_tokens']:,})")
    inc = res["incident"]
    ax1.plot([96], [inc["hello_tokens"]], "s", color="tab:blue", label=f"the incident, 96 tools ({inc['hello_tokens']:,})")
    ax1.set_xlabel("MCP tools configured")
    ax1.set_ylabel('input tokens of "hello" (llama-server\'s count)')
    ax1.set_yscale("log")
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)

    timed = [r for r in curve if r.get("ttft_s") is not None]
    ax2.plot([r["n_tools"] for r in timed], [r["ttft_s"] for r in timed], "o-", color="tab:red",
             label="MCP servers directly")
    if guided and guided.get("ttft_s") is not None:
        ax2.axhline(guided["ttft_s"], color="tab:green", ls="--", label=f"toolgate guided ({guided['ttft_s']:.1f} s)")
    ax2.set_xlabel("MCP tools configured")
    ax2.set_ylabel("time to first token (s)")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(f"OpenCode -> llama-server ({res['model']}, a 270M base model: sizes and times, not answers)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
