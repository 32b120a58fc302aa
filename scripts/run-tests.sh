#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every suite of a build: the C suites through CTest, then the Python
# suite (when the extension was built) with the build's package on PYTHONPATH,
# listing why each skipped test skipped.
set -euo pipefail
BUILD_DIR="$1"
PYTHON="${2:-python3}"
SANITIZE="${3:-}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

echo "== C suites ($BUILD_DIR) =="
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)")

pkg="$BUILD_DIR/python"
if [ -d "$pkg/dlstream" ] && ls "$pkg"/dlstream/_dlstream*.so >/dev/null 2>&1; then
  if [ -n "$SANITIZE" ]; then
    # A sanitized extension needs the sanitizer runtime loaded first.
    rt=$(gcc -print-file-name=lib$([ "$SANITIZE" = thread ] && echo tsan || echo asan).so)
    if ! bash -c 'LD_PRELOAD="$1" "$2" -c pass; exit $?' _ "$rt" "$PYTHON" >/dev/null 2>&1; then
      echo "== Python suite: skipped under SANITIZE=$SANITIZE: this CPython does not start with $(basename "$rt")"
      echo "   preloaded (\`LD_PRELOAD=$rt $PYTHON -c pass\` fails before any dlstream code runs)."
      echo "   The C suites ran under it above; the Python suite runs in the plain and address builds. =="
      exit 0
    fi
    # libstdc++ right after it: ASan's __cxa_throw interceptor finds the real one only if it is loaded when ASan
    # starts, and C++ extensions loaded later (jaxlib) abort on their first throw otherwise.
    cxx=$(gcc -print-file-name=libstdc++.so.6)
    if [ "$SANITIZE" = address ] && [ -f "$cxx" ]; then
      rt="$rt $cxx"
    fi
    export LD_PRELOAD="$rt"
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"  # CPython keeps its arenas
  fi
  echo "== Python suite =="
  PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q -rs tests/python  # -rs: the reason of every skip
else
  echo "== Python suite: skipped (the extension was not built in $BUILD_DIR) =="
fi
