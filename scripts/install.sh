#!/usr/bin/env bash
# Installs the `toolgate` command, in the first of two ways that fits (docs/install.md; the
# container image is a third):
#
#   1. prebuilt: the release archive for this machine (Linux x86_64/aarch64, static;
#      macOS x86_64/arm64) from the project's GitHub releases, checked against its SHA-256,
#      into ~/.local/bin (or --dir). Seconds; no Rust.
#   2. source: `cargo install --locked --path crates/toolgate-cli` from this checkout (the
#      release profile), after checking the prerequisites. About 12 minutes on 2 cores.
#
#   scripts/install.sh                            # prebuilt if this machine has one, else source
#   scripts/install.sh --prebuilt [--version v0.2.0] [--dir DIR] [--repo OWNER/NAME]
#   scripts/install.sh --source [CARGO INSTALL ARGS...]   # e.g. --root ~/.local, --features embed
#
# Any argument it does not know goes to `cargo install` (and means --source).
# Environment: TOOLGATE_REPO (OWNER/NAME on GitHub; default: this checkout's origin),
# TOOLGATE_RELEASE_URL (where the archives are, instead of GitHub: a mirror or a file:// folder).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

mode=auto version=latest dir="$HOME/.local/bin" repo="${TOOLGATE_REPO:-}"
cargo_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --prebuilt) mode=prebuilt ;;
    --source) mode=source ;;
    --version) version=${2:?--version needs a tag, e.g. v0.2.0}; shift ;;
    --dir) dir=${2:?--dir needs a folder}; shift ;;
    --repo) repo=${2:?--repo needs OWNER/NAME}; shift ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) cargo_args+=("$1") ;;
  esac
  shift
done
if [ ${#cargo_args[@]} -gt 0 ]; then
  [ "$mode" != prebuilt ] || die "${cargo_args[0]} is for cargo install; it does not go with --prebuilt"
  mode=source
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The release archive's target name for this machine, or nothing.
target() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo x86_64-unknown-linux-musl ;;
    Linux-aarch64 | Linux-arm64) echo aarch64-unknown-linux-musl ;;
    Darwin-x86_64) echo x86_64-apple-darwin ;;
    Darwin-arm64) echo aarch64-apple-darwin ;;
  esac
}

# Where the archives are: TOOLGATE_RELEASE_URL, else GitHub releases of the repository.
release_url() {
  if [ -n "${TOOLGATE_RELEASE_URL:-}" ]; then echo "${TOOLGATE_RELEASE_URL%/}"; return; fi
  if [ -z "$repo" ]; then
    local origin
    origin=$(git remote get-url origin 2>/dev/null || true)
    case $origin in
      *github.com[:/]*) repo=${origin#*github.com[:/]}; repo=${repo%.git} ;;
    esac
  fi
  [ -n "$repo" ] || return 1
  if [ "$version" = latest ]; then
    echo "https://github.com/$repo/releases/latest/download"
  else
    echo "https://github.com/$repo/releases/download/$version"
  fi
}

prebuilt() {
  local t url sum
  t=$(target) || true
  [ -n "$t" ] || { echo "no prebuilt binary for $(uname -s) $(uname -m)"; return 1; }
  url=$(release_url) || { echo "no release to download from: pass --repo OWNER/NAME or set TOOLGATE_REPO"; return 1; }
  command -v curl >/dev/null || { echo "curl is not installed"; return 1; }
  echo "downloading toolgate-$t.tar.gz from $url"
  curl -fsSL --retry 2 -o "$work/toolgate.tar.gz" "$url/toolgate-$t.tar.gz" \
    || { echo "could not download $url/toolgate-$t.tar.gz"; return 1; }
  curl -fsSL --retry 2 -o "$work/toolgate.tar.gz.sha256" "$url/toolgate-$t.tar.gz.sha256" \
    || { echo "could not download its checksum ($url/toolgate-$t.tar.gz.sha256)"; return 1; }
  if command -v sha256sum >/dev/null; then
    sum=$(sha256sum "$work/toolgate.tar.gz" | cut -d' ' -f1)
  else
    sum=$(shasum -a 256 "$work/toolgate.tar.gz" | cut -d' ' -f1)
  fi
  # A mismatch is never a reason to build from source instead: stop.
  [ "$sum" = "$(cut -d' ' -f1 "$work/toolgate.tar.gz.sha256")" ] \
    || die "toolgate-$t.tar.gz does not match its SHA-256: not installed (a damaged download, or not the release's file)"
  tar -C "$work" -xzf "$work/toolgate.tar.gz"
  [ -f "$work/toolgate-$t/toolgate" ] || die "toolgate-$t.tar.gz holds no toolgate-$t/toolgate"
  mkdir -p "$dir"
  install -m 0755 "$work/toolgate-$t/toolgate" "$dir/toolgate"
  "$dir/toolgate" --version >/dev/null || die "$dir/toolgate does not run here"
  bin="$dir/toolgate"
}

source_install() {
  local need have cc_bin free_kb
  need=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
  command -v cargo >/dev/null ||
    die "cargo is not installed: get Rust $need or newer from https://rustup.rs (or use a prebuilt binary or the container image: docs/install.md)"
  have=$(rustc --version | cut -d' ' -f2)
  if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
    die "rustc $have is older than $need: run \`rustup update\`"
  fi
  # QuickJS (code mode), aws-lc (TLS for HTTPS upstreams) and jemalloc are compiled from C.
  cc_bin=${CC:-cc}
  command -v "$cc_bin" >/dev/null ||
    die "no C compiler ($cc_bin): install one (Debian/Ubuntu: apt-get install build-essential; Fedora: dnf install gcc make)"
  # jemalloc (the allocator) is configured and built with make.
  command -v make >/dev/null ||
    die "no make: install it (Debian/Ubuntu: apt-get install build-essential; Fedora: dnf install make), or build with --no-default-features --features code-mode,redis for glibc's allocator"
  # The release build writes about 1 GB (measured: docs/install.md).
  free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
  if [ "${free_kb:-0}" -lt $((1200 * 1024)) ]; then
    die "less than 1.2 GB free here ($((free_kb / 1024)) MB): the release build writes about 1 GB"
  fi
  echo "building toolgate (release) with rustc $have; this takes a few minutes"
  cargo install --locked --path crates/toolgate-cli ${cargo_args[@]+"${cargo_args[@]}"}
  bin=$(command -v toolgate || true)
}

bin=""
case $mode in
  prebuilt) prebuilt || die "no prebuilt binary installed (above); try --source" ;;
  source) source_install ;;
  auto)
    if ! prebuilt; then
      echo "building from source instead"
      source_install
    fi
    ;;
esac

if [ -z "$bin" ]; then
  echo "installed, but \`toolgate\` is not on PATH: add cargo's bin folder (e.g. ~/.cargo/bin, or <root>/bin with --root) to PATH"
else
  echo "installed $("$bin" --version) at $bin"
  case ":$PATH:" in *":$(dirname "$bin"):"*) ;; *) echo "add $(dirname "$bin") to PATH" ;; esac
  echo "try it:  toolgate serve        (the built-in demo on http://127.0.0.1:8377/mcp)"
fi
