#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (CPU only) from the llama.cpp source that the PyPI source
# distribution of llama-cpp-python carries, for scripts/bench-local-model.sh and CI's smoke
# run. The result is cached: a second call with the same pin prints the binary and builds
# nothing.
#
#   scripts/build-llama-server.sh [DIR]      # DIR defaults to .peers/llama
#   LLAMA_SERVER=$(scripts/build-llama-server.sh | tail -n 1)
#
# Also keeps the sdist's tool-capable chat template Qwen-Qwen2.5-7B-Instruct.jinja in
# DIR/templates (the benchmark's model has no tool template of its own).
# Prints the binary's absolute path on its last line. Needs pip, cmake, a C++ compiler and
# make (.ci/run installs cmake from Debian). The build runs `nice -n 10` on LLAMA_JOBS cores
# (default 2): 13 min of CPU, once (49 min of wall time on a 2-core machine that other builds
# kept at load 13-19; about 7 min on an idle one).
set -euo pipefail

# The pin: llama-cpp-python 0.3.36 vendors a llama.cpp whose server takes `--jinja` and
# builds a tool-call grammar from the request's tools (common/chat.cpp ->
# common/json-schema-to-grammar.cpp), the path the incident went through.
PKG=llama-cpp-python
VERSION=0.3.36

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-$repo/.peers/llama}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin="$dir/bin/llama-server"
stamp="$dir/.pin"
pin="$PKG==$VERSION cpu server-only"

TEMPLATE=Qwen-Qwen2.5-7B-Instruct.jinja

download() {  # the sdist into $dir/src
  local pip
  pip=$(command -v pip3 || command -v pip || true)
  [ -n "$pip" ] || { echo "$0: needs pip to download the $PKG source distribution" >&2; exit 1; }
  rm -rf "$dir/src"
  mkdir -p "$dir/src"
  # Only this package as source: `--no-binary :all:` would also build the sdist's build
  # requirements (cmake, ninja) from source just to read its metadata.
  "$pip" download --no-deps --no-binary "$PKG" --quiet -d "$dir/src" "$PKG==$VERSION" >&2
}

keep_template() {  # from the sdist in $dir/src
  mkdir -p "$dir/templates"
  tar -xzf "$dir/src/llama_cpp_python-$VERSION.tar.gz" -O \
    "llama_cpp_python-$VERSION/vendor/llama.cpp/models/templates/$TEMPLATE" >"$dir/templates/$TEMPLATE"
}

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pin" ]; then
  if [ ! -s "$dir/templates/$TEMPLATE" ]; then
    download
    keep_template
    rm -rf "$dir/src"
  fi
  echo "llama-server from $PKG $VERSION (cached)" >&2
  echo "$bin"
  exit 0
fi
for tool in cmake make c++; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is not installed (apt-get install cmake build-essential)" >&2; exit 1; }
done
src="$dir/src"
rm -rf "$dir/build" "$dir/bin"
download
tar -xzf "$src/llama_cpp_python-$VERSION.tar.gz" -C "$src"
keep_template
llama="$src/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$llama/tools/server/server.cpp" ] || { echo "$0: no tools/server/server.cpp in $PKG $VERSION's vendored llama.cpp" >&2; exit 1; }

# CPU only, no HTTPS (no model download), no web UI fetched at build time, only the server.
t0=$SECONDS
cmake -S "$llama" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >&2
nice -n 10 cmake --build "$dir/build" --target llama-server -j "${LLAMA_JOBS:-2}" >&2
mkdir -p "$dir/bin"
cp "$dir/build/bin/llama-server" "$bin"
"$bin" --version >&2 2>&1 || true
echo "$pin" >"$stamp"
# The source and objects are not needed again (about 1 GB); the binary is static.
rm -rf "$dir/build" "$src"
echo "built llama-server from $PKG $VERSION in $((SECONDS - t0)) s" >&2
echo "$bin"
