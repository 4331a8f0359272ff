#!/bin/bash
# dump.sh OUTDIR [params]: eval --json for each set and split
out=$1; shift
mkdir -p $out
T=${T:-$CARGO_TARGET_DIR/release/toolgate}; D=${D:-../shared/datasets}
for s in metatool livemcpbench bfcl; do for sp in tune test; do
  $T eval route --catalog $D/$s/catalog.json --queries $D/$s/queries.jsonl --split $sp --json "$@" > $out/${s}_$sp.jsonl &
done; wait; done
for s in metatool livemcpbench bfcl; do for sp in tune test; do
  echo "$s $sp $(tail -1 $out/${s}_$sp.jsonl | python3 -c 'import json,sys; d=json.load(sys.stdin); print("P@1 %.3f R@5 %.3f sel %.3f right %.3f" % (d["p_at_1"], d["r_at_5"], 1-d["clarify_rate"], d["selection_precision"]))')"
done; done
