#!/bin/bash
# rank.sh SPLIT PARAMS: P@1 / R@5 / select / right per set
T=${T:-$CARGO_TARGET_DIR/release/toolgate}; D=${D:-../shared/datasets}
sp=$1; shift
line=""
for s in metatool livemcpbench bfcl; do
  r=$($T eval route --catalog $D/$s/catalog.json --queries $D/$s/queries.jsonl --split $sp --json "$@" | tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.3f/%.3f (sel %.3f/%.3f)" % (d["p_at_1"], d["r_at_5"], 1-d["clarify_rate"], d["selection_precision"]))')
  line="$line  $s $r"
done
echo "$sp $* :$line"
