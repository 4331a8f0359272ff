#!/usr/bin/env bash
# The official MCP conformance suite against toolgate; CI runs this.
#
#   scripts/conformance.sh            (from the repository root)
#
# 1. server scenarios, all active ones, against toolgate in direct mode with
#    `toolgate fixture --conformance` behind it (0 failures, no expected-failures file),
#    once as a stdio upstream and once as a Streamable HTTP upstream;
# 2. the name-independent server scenarios against the guided surface;
# 3. client scenarios `initialize` and `tools_call` against toolgate's upstream client
#    (`toolgate conformance-client`), in a private network namespace because the
#    suite's test server listens on every interface.
#
# Environment: TOOLGATE_BIN (default: build with cargo and use target/debug/toolgate),
# TOOLGATE_PEERS (default .peers; the suite is installed there, pinned, when missing).
# Prints each run's `Total:` / `Passed:` line; exits non-zero when any check failed.
set -euo pipefail

SUITE_VERSION=0.1.13 # the newest that runs on Node 20 (0.1.16 needs Node 22)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${TOOLGATE_PEERS:-$ROOT/.peers}
mkdir -p "$PEERS"
PEERS=$(cd "$PEERS" && pwd)
SUITE="$PEERS/node_modules/.bin/conformance"

installed=$(node -p "require('$PEERS/node_modules/@modelcontextprotocol/conformance/package.json').version" 2>/dev/null || true)
if [[ "$installed" != "$SUITE_VERSION" ]]; then
    echo "installing @modelcontextprotocol/conformance@$SUITE_VERSION into $PEERS" >&2
    npm install --silent --no-audit --no-fund --prefix "$PEERS" "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
fi

if [[ -z "${TOOLGATE_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --quiet -p toolgate-cli)
    TOOLGATE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolgate"
fi
TOOLGATE_BIN=$(realpath "$TOOLGATE_BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-conformance.XXXXXX")
GATEWAY_PID=
trap cleanup EXIT

FIXTURE_PID=
cleanup() {
    for pid in $GATEWAY_PID $FIXTURE_PID; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}

# Starts `toolgate serve` on 127.0.0.1:0 with upstream table $1 (an empty prefix keeps the
# suite's fixture names); sets URL to its endpoint, with `localhost` as the suite's
# DNS-rebinding scenario wants.
start_gateway() {
    if [[ -n "$GATEWAY_PID" ]]; then
        kill "$GATEWAY_PID" 2>/dev/null || true
        wait "$GATEWAY_PID" 2>/dev/null || true
    fi
    printf '[gateway]\nmode = "direct"\n[upstreams.conformance]\n%s\nprefix = ""\n' "$1" >"$WORK/toolgate.toml"
    : >"$WORK/gateway.log"
    "$TOOLGATE_BIN" serve --config "$WORK/toolgate.toml" --http 127.0.0.1:0 2>"$WORK/gateway.log" &
    GATEWAY_PID=$!
    URL=
    for _ in $(seq 100); do
        URL=$(grep -o 'MCP endpoint: http://[0-9.:]*/mcp' "$WORK/gateway.log" | head -1 | sed 's/MCP endpoint: //') || true
        [[ -n "$URL" ]] && break
        sleep 0.1
    done
    if [[ -z "$URL" ]]; then
        echo "toolgate did not start:" >&2
        cat "$WORK/gateway.log" >&2
        exit 1
    fi
    URL=${URL/127.0.0.1/localhost}
}

failed=0
run() { # label, then the suite's arguments
    local label=$1
    shift
    local out="$WORK/run.log"
    local rc=0
    (cd "$PEERS" && "$SUITE" "$@") >"$out" 2>&1 || rc=$?
    local totals
    totals=$(grep -E '^(Total:|Passed:)' "$out" || true)
    if [[ -z "$totals" ]]; then
        totals="no result line (exit $rc)"
    fi
    printf '%-34s %s\n' "$label" "$totals"
    if [[ $rc -ne 0 ]] || grep -qE '^Total: .* [1-9][0-9]* failed|^Passed: .* [1-9][0-9]* failed' "$out"; then
        failed=1
        grep -E '✗|FAILURE|Error' "$out" | head -20 >&2 || true
    fi
}

# The fixture as a stdio child of the gateway.
start_gateway "command = \"$TOOLGATE_BIN\"
args = [\"fixture\", \"--conformance\"]"
run "server, direct, stdio upstream" server --url "$URL/direct"
for scenario in server-initialize ping logging-set-level tools-list dns-rebinding-protection; do
    run "server, guided: $scenario" server --url "$URL/guided" --scenario "$scenario"
done

# The fixture as a Streamable HTTP upstream (server requests travel on call streams).
"$TOOLGATE_BIN" fixture --conformance --http 127.0.0.1:0 >"$WORK/fixture.out" 2>"$WORK/fixture.log" &
FIXTURE_PID=$!
FIXTURE_URL=
for _ in $(seq 100); do
    FIXTURE_URL=$(awk '/^listening /{print $2}' "$WORK/fixture.out")
    [[ -n "$FIXTURE_URL" ]] && break
    sleep 0.1
done
start_gateway "url = \"$FIXTURE_URL\""
run "server, direct, HTTP upstream" server --url "$URL/direct"

# The client scenarios' test server binds every interface: keep it off the network.
if [[ $(id -u) -eq 0 ]]; then ISOLATE=(unshare -n); else ISOLATE=(unshare -rn); fi
for scenario in initialize tools_call; do
    label="client: $scenario"
    out="$WORK/client.log"
    rc=0
    "${ISOLATE[@]}" sh -c 'ip link set lo up 2>/dev/null || true; cd "$1" && "$2" client --command "$3 conformance-client" --scenario "$4"' \
        _ "$PEERS" "$SUITE" "$TOOLGATE_BIN" "$scenario" >"$out" 2>&1 || rc=$?
    printf '%-34s %s\n' "$label" "$(grep -E '^Passed:' "$out" || echo "no result line (exit $rc)")"
    if [[ $rc -ne 0 ]] || ! grep -qE '^Passed: .*, 0 failed' "$out"; then
        failed=1
        tail -20 "$out" >&2
    fi
done

if [[ $failed -ne 0 ]]; then
    echo "conformance: FAILED" >&2
    exit 1
fi
echo "conformance: all passed"
