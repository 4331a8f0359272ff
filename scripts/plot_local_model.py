#!/usr/bin/env python3
"""Draws docs/local-model.png from scripts/bench_local_model.py's results JSON: the input
tokens of OpenCode's "hello" as llama-server counts them, by the number of MCP tools
configured directly (with toolgate guided's and the incident's), and per configuration.

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

    # Times on a shared, loaded machine say little; the sizes of "hello" per configuration do.
    order = [("none", "OpenCode alone"), ("guided", "toolgate guided"),
             ("toolgate-local", "toolgate direct local"), ("direct", "directly")]
    hello = {r["config"]: r for r in res["rows"] if r["task"] == "hello"}
    names = [label for kind, label in order if kind in hello]
    values = [hello[kind].get("input_tokens") or 0 for kind, _ in order if kind in hello]
    bars = ax2.bar(names, values, color=["grey", "tab:green", "tab:orange", "tab:red"][: len(values)])
    for bar, v in zip(bars, values):
        ax2.text(bar.get_x() + bar.get_width() / 2, v, f"{v:,}", ha="center", va="bottom", fontsize=8)
    ax2.axhline(inc["hello_tokens"], color="tab:blue", ls=":", label=f"the incident ({inc['hello_tokens']:,})")
    ax2.set_ylabel('input tokens of "hello", 96 MCP tools')
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3, axis="y")
    ax2.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"OpenCode -> llama-server ({res['model']}, a 270M base model: prompt sizes, not answers)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
