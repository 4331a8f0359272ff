#!/usr/bin/env bash
# The HTTP load benchmark: toolgate and npm mcp-proxy in front of the same fixture upstream
# (a stdio child), and the fixture's own HTTP endpoint as the no-gateway baseline, driven by
# wrk with keep-alive at 1, 8 and 64 connections. Prints requests/s, p50, p99 and ratios in
# one table, with the fixture called over stdio directly (one call at a time, no HTTP) as the
# least a call through a stdio hop costs, and a bare relay (hyper and the stdio hop, nothing
# else: crates/toolgate-fixture/examples/bare_relay.rs) as the least any HTTP-to-stdio
# gateway costs; then resident memory: idle, with 1,000 open sessions, after the load.
#
#     scripts/bench-load.sh
#
# Environment (all optional):
#   TOOLGATE_BIN    the toolgate binary (default: `cargo build --release`, target/release/toolgate)
#   BENCH_BEFORE    a second toolgate binary measured in the same run (e.g. the previous commit)
#   BENCH_RELAY     the bare relay (default: `cargo build --release --example bare_relay`;
#                   "none" leaves its row out)
#   BENCH_SECS      seconds per wrk run (default 10)
#   BENCH_RUNS      runs of each row, the targets taking turns; each figure is the median
#                   of its runs (default 1)
#   BENCH_CONNS     connection counts (default "1 8 64")
#   BENCH_ERAS      "legacy" (default), "modern" (2026-07-28) or "legacy modern"
#   BENCH_SESSIONS  sessions opened for the memory table (default 1000)
#   BENCH_TOML      TOML appended to each toolgate's configuration, to measure what a
#                   setting costs (e.g. BENCH_TOML=$'[store]\nbackend = "memory"')
#   BENCH_CPUS      "SERVERS/LOAD": CPU lists (taskset -c) for the servers, their upstreams
#                   included, and for wrk, e.g. "0/1", so that the load generator does not
#                   compete for the servers' cores (default: no pinning)
#   MCP_PROXY       mcp-proxy's bin (default: .peers-extra, installed pinned if missing)
#   BENCH_AUTH     "1": two more toolgate rows, toolgate-key (callers send an API key) and
#                   toolgate-jwt (an access token of [auth.oauth], checked against the JWKS of
#                   an issuer served from the work folder, RS256 signed by openssl): what
#                   authenticating each request costs against no authentication (default: off)
#   BENCH_ALLOW_BAD targets whose failed or wrong answers are reported (column bad, and a
#                   note) without failing the run, e.g. "mcp-proxy" for a smoke run on a
#                   loaded machine (default: none; any bad answer fails the run)
# Needs wrk (Debian: apt-get install wrk), node + npm, python3. Everything listens on
# 127.0.0.1 and is stopped when the script ends.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
SECS=${BENCH_SECS:-10}
RUNS=${BENCH_RUNS:-1}
CONNS=${BENCH_CONNS:-"1 8 64"}
ERAS=${BENCH_ERAS:-legacy}
SESSIONS=${BENCH_SESSIONS:-1000}
PROXY_VERSION=6.7.19
die() { printf 'bench-load: %s\n' "$*" >&2; exit 1; }

command -v wrk >/dev/null || die "wrk is not installed (Debian: apt-get install wrk)"
command -v python3 >/dev/null || die "python3 is not installed"
if [ -z "${TOOLGATE_BIN:-}" ]; then
  cargo build --release -q -p toolgate-cli
  TOOLGATE_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/toolgate"
fi
[ -x "$TOOLGATE_BIN" ] || die "no toolgate binary at $TOOLGATE_BIN"
if [ -z "${BENCH_RELAY:-}" ]; then
  cargo build --release -q -p toolgate-fixture --example bare_relay
  BENCH_RELAY="${CARGO_TARGET_DIR:-$REPO/target}/release/examples/bare_relay"
fi
[ "$BENCH_RELAY" = none ] || [ -x "$BENCH_RELAY" ] || die "BENCH_RELAY=$BENCH_RELAY is not an executable"
[ -z "${BENCH_BEFORE:-}" ] || [ -x "$BENCH_BEFORE" ] || die "BENCH_BEFORE=$BENCH_BEFORE is not an executable"
if [ -z "${MCP_PROXY:-}" ]; then
  MCP_PROXY="$REPO/.peers-extra/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs"
  have=$(node -p "try { require('$REPO/.peers-extra/node_modules/mcp-proxy/package.json').version } catch { '' }")
  if [ "$have" != "$PROXY_VERSION" ]; then
    npm install --prefix "$REPO/.peers-extra" --save-exact --no-audit --no-fund --no-progress \
      --loglevel=error "mcp-proxy@$PROXY_VERSION" >&2
  fi
fi
[ -f "$MCP_PROXY" ] || die "no mcp-proxy at $MCP_PROXY"
HELPER="$REPO/scripts/bench_mcp.py"
SRV=() LOAD=()
if [ -n "${BENCH_CPUS:-}" ]; then
  command -v taskset >/dev/null || die "BENCH_CPUS needs taskset (Debian: util-linux)"
  [[ $BENCH_CPUS == ?*/?* ]] || die "BENCH_CPUS=$BENCH_CPUS: write it SERVERS/LOAD, e.g. 0/1"
  SRV=(taskset -c "${BENCH_CPUS%%/*}") LOAD=(taskset -c "${BENCH_CPUS#*/}")
  { "${SRV[@]}" true && "${LOAD[@]}" true; } 2>/dev/null ||
    die "BENCH_CPUS=$BENCH_CPUS: not CPU lists of this machine (it has $(nproc) cores)"
fi

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

CATALOG="$WORK/catalog.json"
cat >"$CATALOG" <<'EOF'
[{"server":"bench","tool":{"name":"echo","description":"Echo the message.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}}]
EOF
# One fixture binary for every upstream, so only the HTTP side differs between rows.
FIXTURE=("$TOOLGATE_BIN" fixture --catalog "$CATALOG")

# wait_line FILE PATTERN: the first match of PATTERN (a sed -n regex with one group) in FILE.
wait_line() {
  local i
  for i in $(seq 1 600); do
    local m
    m=$(sed -nE "s|^.*$2.*$|\1|p" "$1" | sed -n 1p)
    if [ -n "$m" ]; then echo "$m"; return 0; fi
    sleep 0.1
  done
  die "no line matching '$2' in $1 after 60 s: $(tail -n 5 "$1")"
}

declare -A URL PID TOOL AUTHZ
NAMES=()

start_listening() { # NAME CMD...: a server that prints "listening URL", serving `echo`
  local name=$1; shift
  "${SRV[@]}" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!); PID[$name]=$!
  URL[$name]=$(wait_line "$WORK/$name.out" 'listening (http://[^ ]+)')
  TOOL[$name]=echo; NAMES+=("$name")
}

start_fixture() { # NAME BIN
  start_listening "$1" "$2" fixture --catalog "$CATALOG" --http 127.0.0.1:0
}

start_toolgate() { # NAME BIN [TOML]: TOML appended to the configuration (this row's own)
  cat >"$WORK/$1.toml" <<EOF
[gateway]
mode = "direct"
[upstreams.bench]
command = "${FIXTURE[0]}"
args = ["fixture", "--catalog", "$CATALOG"]
EOF
  [ -z "${3:-}" ] || printf '%s\n' "$3" >>"$WORK/$1.toml"
  # The memory table opens $SESSIONS sessions without a key: above the default session caps
  # (gateway.limits). A binary from before those caps (BENCH_BEFORE) refuses the table.
  [ -z "${BENCH_TOML:-}" ] || printf '%s\n' "$BENCH_TOML" >>"$WORK/$1.toml"
  cp "$WORK/$1.toml" "$WORK/$1.base.toml"
  printf '[gateway.limits]\nmax_sessions = %d\nmax_sessions_per_principal = %d\n' \
    $((SESSIONS * 2 + 100)) $((SESSIONS * 2 + 100)) >>"$WORK/$1.toml"
  if ! XDG_STATE_HOME="$WORK/state-$1" "$2" check --config "$WORK/$1.toml" >/dev/null 2>&1; then
    cp "$WORK/$1.base.toml" "$WORK/$1.toml"
  fi
  # Each gateway its own embedded store, in the work folder (not the user's state folder).
  XDG_STATE_HOME="$WORK/state-$1" "${SRV[@]}" "$2" serve --config "$WORK/$1.toml" --http 127.0.0.1:0 >/dev/null 2>"$WORK/$1.err" &
  PIDS+=($!); PID[$1]=$!
  URL[$1]=$(wait_line "$WORK/$1.err" 'MCP endpoint: (http://[^ ]+)')
  TOOL[$1]=bench_echo; NAMES+=("$1")
}

start_relay() { # NAME: the bare relay in front of the fixture over stdio
  start_listening "$1" "$BENCH_RELAY" 0 "${FIXTURE[@]}"
}

start_proxy() { # NAME
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "${SRV[@]}" node "$MCP_PROXY" --host 127.0.0.1 --port "$port" --server stream -- "${FIXTURE[@]}" \
    >"$WORK/$1.out" 2>&1 &
  PIDS+=($!); PID[$1]=$!
  URL[$1]="http://127.0.0.1:$port/mcp"
  local i
  for i in $(seq 1 300); do
    python3 "$HELPER" session "${URL[$1]}" echo legacy >/dev/null 2>&1 && break
    [ "$i" -lt 300 ] || die "mcp-proxy did not answer in 30 s: $(tail -n 5 "$WORK/$1.out")"
    sleep 0.1
  done
  TOOL[$1]=echo; NAMES+=("$1")
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# CPU time (user + system, clock ticks) of a process, and of its children (the upstream).
TICK=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
child_ticks() {
  local sum=0 c
  for c in $(pgrep -P "$1"); do sum=$((sum + $(ticks "$c"))); done
  echo "$sum"
}

# settle: waits until the machine is idle (under a tenth of its CPU busy over 200 ms; at
# most 5 s), so that what one row leaves running (mcp-proxy still answering its backlog
# after wrk has gone, a runtime's collector) does not fall into the next row's figures.
# Adds the time waited to SETTLED_MS, and notes a wait that ran out.
SETTLED_MS=0 UNSETTLED=0
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat; }
settle() {
  local i busy0 idle0 busy1 idle1
  for i in $(seq 1 25); do
    read -r busy0 idle0 < <(cpu_ticks)
    sleep 0.2
    read -r busy1 idle1 < <(cpu_ticks)
    SETTLED_MS=$((SETTLED_MS + 200))
    (( (busy1 - busy0) * 10 < (busy1 - busy0) + (idle1 - idle0) )) && return
  done
  UNSETTLED=$((UNSETTLED + 1))
}

# wrk_run NAME ERA CONNS -> "requests/s p50_us p99_us bad" (bad: errors + wrong answers)
wrk_run() {
  local name=$1 era=$2 conns=$3 lua="$WORK/$1.$2.lua"
  if [ ! -f "$lua" ]; then
    local headers body
    headers=$(BENCH_AUTHORIZATION="${AUTHZ[$name]:-}" python3 "$HELPER" session "${URL[$name]}" "${TOOL[$name]}" "$era") || return 1
    body=$(python3 "$HELPER" body "${TOOL[$name]}" "$era")
    {
      echo 'wrk.method = "POST"'
      echo 'wrk.headers["Content-Type"] = "application/json"'
      echo 'wrk.headers["Accept"] = "application/json, text/event-stream"'
      while IFS= read -r h; do
        echo "wrk.headers[\"${h%%: *}\"] = \"${h#*: }\""
      done <<<"$headers"
      # A JSON-RPC id must be unique among a session's requests in flight: each request
      # gets "<thread>-<n>" in place of the helper's id.
      printf 'local head, tail = [[%s]], [[%s]]\n' "${body%%\"__ID__\"*}" "${body#*\"__ID__\"}"
      cat <<'EOF'
local threads, n = {}, 0
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end
function request()
  n = n + 1
  return wrk.format(nil, nil, nil, head .. '"' .. tid .. '-' .. n .. '"' .. tail)
end
function init(args) bad = 0 end
function response(status, headers, body)
  if status ~= 200 or not body:find('"result"', 1, true) or body:find('"isError":true', 1, true) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do bad = bad + t:get("bad") end
  local e = summary.errors
  bad = bad + e.connect + e.read + e.write + e.timeout
  io.write(string.format("RESULT %.1f %d %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), bad))
end
EOF
    } >"$lua"
  fi
  local threads=$((conns < 2 ? conns : 2))
  "${LOAD[@]}" wrk -t "$threads" -c "$conns" -d "${SECS}s" --timeout 10s -s "$lua" "${URL[$name]}" \
    | awk '/^RESULT/ {print $2, $3, $4, $5}'
}

# b64url: base64url without padding, of stdin.
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }

# start_issuer: an OAuth issuer that is only files (RFC 8414 metadata and a JWKS) served by
# python3's http.server, with a fresh RS256 key; sets ISSUER and TOKEN (a JWT for audience
# "toolgate-bench", valid for a day).
start_issuer() {
  command -v openssl >/dev/null || die "BENCH_AUTH needs openssl"
  local dir="$WORK/issuer" port n now head body sig i
  mkdir -p "$dir/.well-known"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/issuer.pem" 2>/dev/null
  n=$(openssl rsa -in "$WORK/issuer.pem" -noout -modulus | cut -d= -f2 \
    | python3 -c 'import sys, base64; print(base64.urlsafe_b64encode(bytes.fromhex(sys.stdin.read().strip())).rstrip(b"=").decode())')
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  ISSUER="http://127.0.0.1:$port"
  printf '{"issuer":"%s","jwks_uri":"%s/jwks.json"}' "$ISSUER" "$ISSUER" >"$dir/.well-known/oauth-authorization-server"
  printf '{"keys":[{"kty":"RSA","kid":"bench","use":"sig","alg":"RS256","n":"%s","e":"AQAB"}]}' "$n" >"$dir/jwks.json"
  "${SRV[@]}" python3 -m http.server --bind 127.0.0.1 --directory "$dir" "$port" >"$WORK/issuer.out" 2>&1 &
  PIDS+=($!)
  now=$(date +%s)
  head=$(printf '{"alg":"RS256","typ":"at+jwt","kid":"bench"}' | b64url)
  body=$(printf '{"iss":"%s","sub":"bench","aud":"toolgate-bench","iat":%d,"exp":%d,"scope":"mcp"}' \
    "$ISSUER" "$now" $((now + 86400)) | b64url)
  sig=$(printf '%s.%s' "$head" "$body" | openssl dgst -sha256 -sign "$WORK/issuer.pem" | b64url)
  TOKEN="$head.$body.$sig"
  for i in $(seq 1 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('$ISSUER/jwks.json')" 2>/dev/null && return
    sleep 0.1
  done
  die "the bench issuer did not answer"
}

# Run order within each block: mcp-proxy and the fixture first, for the ratios.
start_proxy mcp-proxy
start_fixture fixture "$TOOLGATE_BIN"
start_toolgate toolgate "$TOOLGATE_BIN"
[ "$BENCH_RELAY" = none ] || start_relay bare-relay
if [ "${BENCH_AUTH:-}" = 1 ]; then
  key=$("$TOOLGATE_BIN" key new bench 2>/dev/null | sed -n 1p)
  keyhash=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)
  start_toolgate toolgate-key "$TOOLGATE_BIN" \
    "$(printf '[policy.keys.bench]\nhash = "sha256:%s"\nscopes = ["*"]\ntier = "destructive"' "$keyhash")"
  AUTHZ[toolgate-key]="Bearer $key"
  start_issuer
  start_toolgate toolgate-jwt "$TOOLGATE_BIN" \
    "$(printf '[auth.oauth]\nissuer = "%s"\nresource = "http://127.0.0.1:1/mcp"\naudience = "toolgate-bench"\nrequired_scopes = ["mcp"]\n[auth.oauth.default]\ntier = "destructive"' "$ISSUER")"
  AUTHZ[toolgate-jwt]="Bearer $TOKEN"
fi
if [ -n "${BENCH_BEFORE:-}" ]; then
  start_fixture fixture-before "$BENCH_BEFORE"
  start_toolgate toolgate-before "$BENCH_BEFORE"
fi

# The rows of the rate table: fixture-stdio is the fixture over stdio, called directly by
# bench_mcp.py one call at a time (1 connection only); it has no endpoint and no memory row.
ROWS=()
for n in "${NAMES[@]}"; do
  ROWS+=("$n")
  [ "$n" != fixture ] || ROWS+=(fixture-stdio)
done

declare -A IDLE
for n in "${NAMES[@]}"; do
  BENCH_AUTHORIZATION="${AUTHZ[$n]:-}" python3 "$HELPER" session "${URL[$n]}" "${TOOL[$n]}" legacy >/dev/null
  IDLE[$n]=$(rss_kib "${PID[$n]}")
done

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS=$RUNS is not a positive whole number"
runs_said="wrk ${SECS} s per row"
[ "$RUNS" -eq 1 ] || runs_said="wrk ${SECS} s per run, $RUNS runs per row (targets taking turns), each figure their median"
echo "toolgate: $TOOLGATE_BIN${BENCH_BEFORE:+ (before: $BENCH_BEFORE)}; mcp-proxy $PROXY_VERSION; $runs_said, keep-alive; $(nproc) cores${BENCH_CPUS:+ (servers on CPUs ${BENCH_CPUS%%/*}, wrk on ${BENCH_CPUS#*/})}, load average $(cut -d" " -f1-3 /proc/loadavg)"
echo "upstream: the fixture's echo tool over stdio behind each proxy; the fixture rows call its own HTTP endpoint; fixture-stdio calls it over stdio, one call at a time, no HTTP; bare-relay is hyper in front of it over stdio, ids rewritten, nothing else"
# median N...: the median of the numbers given.
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
declare -A RPS P50 P99
BAD=0 ALLOWED_BAD=0
for era in $ERAS; do
  echo
  echo "era $era"
  echo
  echo "| target | connections | requests/s | p50 | p99 | p99/p50 | requests/s vs mcp-proxy | p50 vs fixture | CPU per call: server + upstream | bad |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for c in $CONNS; do
    # Each run's figures, per target: requests/s, p50, p99, and CPU µs per call.
    declare -A L_RPS=() L_P50=() L_P99=() L_CS=() L_CU=() L_BAD=() SKIP=()
    for _ in $(seq 1 "$RUNS"); do
      for n in "${ROWS[@]}"; do
        [ -z "${SKIP[$n]:-}" ] || continue
        [ "$n" != fixture-stdio ] || [ "$c" = 1 ] || continue
        settle
        if [ "$n" = fixture-stdio ]; then
          # The helper reports the fixture's own CPU per call (it is the server here).
          out=$("${LOAD[@]}" python3 "$HELPER" stdio "$SECS" echo "${SRV[@]}" "${FIXTURE[@]}" \
            2>"$WORK/$n.why" | awk '/^RESULT/ {print $2, $3, $4, $5, $6, 0}') ||
            die "fixture-stdio: $(tail -n 3 "$WORK/$n.why")"
          [ -n "$out" ] || die "fixture-stdio: no result: $(tail -n 3 "$WORK/$n.why")"
          read -r rps p50 p99 bad cs cu <<<"$out"
        else
          s0=$(ticks "${PID[$n]}") u0=$(child_ticks "${PID[$n]}")
          if ! out=$(wrk_run "$n" "$era" "$c" 2>"$WORK/$n.$era.why"); then
            SKIP[$n]=$(tail -n 1 "$WORK/$n.$era.why" | cut -c1-120)
            continue
          fi
          s1=$(ticks "${PID[$n]}") u1=$(child_ticks "${PID[$n]}")
          read -r rps p50 p99 bad <<<"$out"
          # CPU microseconds per call, from the processes' own counters: steadier than
          # requests/s on a shared machine, and it shows where a call's time goes.
          read -r cs cu < <(awk -v s=$((s1 - s0)) -v u=$((u1 - u0)) -v t="$TICK" -v n="$rps" -v d="$SECS" \
            'BEGIN { k = 1e6 / t / (n * d); printf "%.1f %.1f\n", s * k, u * k }')
        fi
        if [[ " ${BENCH_ALLOW_BAD:-} " == *" $n "* ]]; then
          ALLOWED_BAD=$((ALLOWED_BAD + bad))
        else
          BAD=$((BAD + bad))
        fi
        L_RPS[$n]+=" $rps" L_P50[$n]+=" $p50" L_P99[$n]+=" $p99" L_CS[$n]+=" $cs" L_CU[$n]+=" $cu"
        L_BAD[$n]=$(( ${L_BAD[$n]:-0} + bad ))
      done
    done
    for n in "${ROWS[@]}"; do
      [ "$n" != fixture-stdio ] || [ "$c" = 1 ] || continue
      if [ -n "${SKIP[$n]:-}" ]; then
        echo "| $n | $c | skipped: ${SKIP[$n]} | | | | | | | |"
        continue
      fi
      # shellcheck disable=SC2086 # the lists are space-separated numbers
      rps=$(median ${L_RPS[$n]}) p50=$(median ${L_P50[$n]}) p99=$(median ${L_P99[$n]})
      # shellcheck disable=SC2086
      cs=$(median ${L_CS[$n]}) cu=$(median ${L_CU[$n]})
      cpu=$(awk -v s="$cs" -v u="$cu" 'BEGIN { if (u > 0) printf "%.0f + %.0f µs", s, u; else printf "%.0f µs", s }')
      RPS[$n.$era.$c]=$rps P50[$n.$era.$c]=$p50 P99[$n.$era.$c]=$p99
      vs_proxy=$(awk -v a="$rps" -v b="${RPS[mcp-proxy.$era.$c]:-}" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "–" }')
      base=fixture; [[ $n == *-before ]] && base=fixture-before
      # The ratio and what the proxy adds to the fixture's own p50, in µs.
      vs_fix=$(awk -v a="$p50" -v b="${P50[$base.$era.$c]:-}" -v n="$n" \
        'BEGIN { if (b > 0 && n ~ /^fixture/) printf "%.2f×", a / b; else if (b > 0) printf "%.2f× (+%d µs)", a / b, a - b; else print "–" }')
      printf '| %s | %s | %s | %.0f µs | %.0f µs | %s | %s | %s | %s | %s |\n' "$n" "$c" \
        "$(printf '%.0f' "$rps")" "$p50" "$p99" \
        "$(awk -v a="$p99" -v b="$p50" 'BEGIN { printf "%.2f", a / b }')" "$vs_proxy" "$vs_fix" "$cpu" "${L_BAD[$n]:-0}"
    done
    unset L_RPS L_P50 L_P99 L_CS L_CU L_BAD SKIP
  done
  # What toolgate adds at one connection above the least a stdio hop costs, and the least
  # any HTTP-to-stdio gateway costs here (the bare relay).
  floor=${P50[fixture-stdio.$era.1]:-} own=${P50[toolgate.$era.1]:-}
  if [ -n "$floor" ] && [ -n "$own" ]; then
    echo
    awk -v a="$own" -v f="$floor" -v h="${P50[fixture.$era.1]:-0}" -v r="${P50[bare-relay.$era.1]:-0}" 'BEGIN {
      printf "one connection: toolgate p50 %.0f µs = fixture-stdio %.0f µs + %.0f µs; fixture-stdio alone is %.2f× the fixture'"'"'s own HTTP p50\n", a, f, a - f, (h > 0 ? f / h : 0)
      if (r > 0 && h > 0) printf "one connection: bare-relay p50 %.0f µs, %.2f× the fixture'"'"'s own HTTP p50: the least an HTTP front and a stdio hop cost here; toolgate is %.2f× the bare relay\n", r, r / h, a / r }'
  fi
done

unsettled=""
[ "$UNSETTLED" -eq 0 ] || unsettled="; $UNSETTLED runs started after 5 s without it (the figures are noisier)"
echo
echo "before each run the machine was let settle (under 10% of its CPU busy over 200 ms): $((SETTLED_MS / 1000)).$((SETTLED_MS % 1000 / 100)) s in all$unsettled"

# The memory table leaves the bare relay out: it keeps no sessions.
MEM=()
for n in "${NAMES[@]}"; do [ "$n" = bare-relay ] || MEM+=("$n"); done
declare -A AFTER MANY AGAIN
for n in "${MEM[@]}"; do AFTER[$n]=$(rss_kib "${PID[$n]}"); done
for n in "${MEM[@]}"; do
  BENCH_AUTHORIZATION="${AUTHZ[$n]:-}" python3 "$HELPER" sessions "${URL[$n]}" "$SESSIONS" >/dev/null
  MANY[$n]=$(rss_kib "${PID[$n]}")
done
for n in "${MEM[@]}"; do
  wrk_run "$n" legacy 8 >/dev/null
  AGAIN[$n]=$(rss_kib "${PID[$n]}")
done

echo
echo "resident memory of the serving process (KiB; toolgate and mcp-proxy without their upstream child)"
echo
echo "| target | idle | after the load | with $SESSIONS more sessions open | per session | after a second load (8 connections) |"
echo "|---|---|---|---|---|---|"
for n in "${MEM[@]}"; do
  if [ -n "${MANY[$n]:-}" ]; then
    many=${MANY[$n]}
    per=$(awk -v a="$many" -v b="${AFTER[$n]}" -v s="$SESSIONS" 'BEGIN { printf "%.1f KiB", (a - b) / s }')
  else
    many="not measured" per="–"
  fi
  echo "| $n | ${IDLE[$n]} | ${AFTER[$n]} | $many | $per | ${AGAIN[$n]} |"
done

# Figures from a run with errors or wrong answers are not figures.
[ "$ALLOWED_BAD" -eq 0 ] ||
  printf 'bench-load: note: %s requests of %s failed or were answered wrongly (column bad): those rows are not figures\n' "$ALLOWED_BAD" "$BENCH_ALLOW_BAD" >&2
[ "$BAD" -eq 0 ] || die "$BAD requests failed or were answered wrongly (column bad)"
