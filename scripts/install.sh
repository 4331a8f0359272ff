#!/usr/bin/env bash
# Installs the `toolgate` command from this checkout:
#   cargo install --locked --path crates/toolgate-cli
# (the release profile: optimised, no debug info), after checking the prerequisites and
# saying what is missing. Extra arguments go to `cargo install` (e.g. `--root DIR`,
# `--features embed`).
#
#   scripts/install.sh                 # -> ~/.cargo/bin/toolgate
#   scripts/install.sh --root ~/.local # -> ~/.local/bin/toolgate
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

NEED_RUST=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
command -v cargo >/dev/null ||
  die "cargo is not installed: get Rust $NEED_RUST or newer from https://rustup.rs"
have=$(rustc --version | cut -d' ' -f2)
if [ "$(printf '%s\n%s\n' "$NEED_RUST" "$have" | sort -V | head -n1)" != "$NEED_RUST" ]; then
  die "rustc $have is older than $NEED_RUST: run \`rustup update\`"
fi
# QuickJS (code mode), aws-lc (TLS for HTTPS upstreams) and jemalloc are compiled from C.
CC_BIN=${CC:-cc}
command -v "$CC_BIN" >/dev/null ||
  die "no C compiler ($CC_BIN): install one (Debian/Ubuntu: apt-get install build-essential; Fedora: dnf install gcc make)"
# jemalloc (the allocator) is configured and built with make.
command -v make >/dev/null ||
  die "no make: install it (Debian/Ubuntu: apt-get install build-essential; Fedora: dnf install make), or build with --no-default-features --features code-mode,redis for glibc's allocator"
# The release build writes about 0.8 GB (measured); the installed binary is about 63 MB (8 MB of it route's built-in vectors).
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt $((1024 * 1024)) ]; then
  die "less than 1 GB free here ($((free_kb / 1024)) MB): the release build needs about 0.8 GB"
fi

echo "building toolgate (release) with rustc $have; this takes a few minutes"
cargo install --locked --path crates/toolgate-cli "$@"

bin=$(command -v toolgate || true)
if [ -z "$bin" ]; then
  echo "installed, but \`toolgate\` is not on PATH: add cargo's bin folder (e.g. ~/.cargo/bin, or <root>/bin with --root) to PATH"
else
  echo "installed $("$bin" --version) at $bin"
  echo "try it:  toolgate serve        (the built-in demo on http://127.0.0.1:8377/mcp)"
fi
