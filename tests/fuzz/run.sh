#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds fuzz_import with clang (libFuzzer, ASan, UBSan) and fuzzes the DLPack importers for a bounded time.
#
# Usage: tests/fuzz/run.sh [SECONDS] [libFuzzer flags...]
#   SECONDS defaults to 60. New inputs go to tests/fuzz/corpus-run/ (ignored by
#   git); the seeds in tests/fuzz/corpus/ come from make_corpus.py.
# Environment: CC (default clang, else clang-14), DLS_FUZZ_BUILD_DIR
#   (default build-fuzz), DLS_FUZZ_JOBS (parallel fuzzing processes, default 1).
set -euo pipefail

secs="${1:-60}"
[ $# -gt 0 ] && shift
case "$secs" in
  ''|*[!0-9]*) echo "run.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${DLS_FUZZ_BUILD_DIR:-$root/build-fuzz}"
cc="${CC:-}"
if [ -z "$cc" ]; then
  if command -v clang >/dev/null; then cc=clang; elif command -v clang-14 >/dev/null; then cc=clang-14; else
    echo "run.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2
  fi
fi

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDLS_BUILD_FUZZ=ON -DDLS_SANITIZE=address -DDLS_CUDA_KERNELS=OFF \
  -DDLS_BUILD_TESTS=OFF -DDLS_BUILD_PYTHON=OFF -DDLS_BUILD_EXAMPLES=OFF -DDLS_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target fuzz_import -j"$(nproc)"

[ -d "$here/corpus" ] || python3 "$here/make_corpus.py"
mkdir -p "$here/corpus-run"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
jobs="${DLS_FUZZ_JOBS:-1}"
extra=()
if [ "$jobs" -gt 1 ]; then extra=(-fork="$jobs"); fi
cd "$build"
exec "$build/tests/fuzz/fuzz_import" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 "${extra[@]}" "$@" "$here/corpus-run" "$here/corpus"
