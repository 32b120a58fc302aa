#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every suite of a build: the C suites through CTest, then the Python
# suite (when the extension was built) with the build's package on PYTHONPATH,
# then scripts/test-summary: each skip reason once (with how many tests gave
# it and where) and one line for both suites, passed, failed and skipped.
# Both suites run even when the first fails; the exit status is non-zero if
# either failed.
set -uo pipefail
BUILD_DIR="$1"
PYTHON="${2:-python3}"
SANITIZE="${3:-}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
start=$(date +%s)
results="$(cd "$BUILD_DIR" && pwd)/test-results"
rm -rf "$results"
mkdir -p "$results"

echo "== C suites ($BUILD_DIR) =="
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" --output-junit "$results/ctest.xml")
c_rc=$?

py_rc=0
not_run=""
pkg="$BUILD_DIR/python"
if [ -d "$pkg/dlstream" ] && ls "$pkg"/dlstream/_dlstream*.so >/dev/null 2>&1; then
  preload=""
  if [ -n "$SANITIZE" ]; then
    # A sanitized extension needs the sanitizer runtime loaded first.
    rt=$(gcc -print-file-name=lib$([ "$SANITIZE" = thread ] && echo tsan || echo asan).so)
    if ! bash -c 'LD_PRELOAD="$1" "$2" -c pass; exit $?' _ "$rt" "$PYTHON" >/dev/null 2>&1; then
      not_run="this CPython does not start with $(basename "$rt") preloaded (\`LD_PRELOAD=$rt $PYTHON -c pass\` fails"
      not_run="$not_run before any dlstream code runs); the C suites ran under it, the Python suite runs in the plain"
      not_run="$not_run and address builds"
    else
      # libstdc++ right after it: ASan's __cxa_throw interceptor finds the real one only if it is loaded when ASan
      # starts, and C++ extensions loaded later (jaxlib) abort on their first throw otherwise.
      cxx=$(gcc -print-file-name=libstdc++.so.6)
      if [ "$SANITIZE" = address ] && [ -f "$cxx" ]; then
        rt="$rt $cxx"
      fi
      preload="$rt"
    fi
  fi
  if [ -z "$not_run" ]; then
    echo "== Python suite =="
    # Skip reasons are listed once each by scripts/test-summary below, not one line per test.
    if [ -n "$preload" ]; then
      # detect_leaks=0: CPython keeps its arenas.
      LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
        PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q --junitxml="$results/pytest.xml" tests/python
    else
      PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q --junitxml="$results/pytest.xml" tests/python
    fi
    py_rc=$?
  fi
else
  not_run="the extension was not built in $BUILD_DIR"
fi

echo
"$PYTHON" scripts/test-summary "$results/ctest.xml" "$results/pytest.xml" "$(( $(date +%s) - start ))" ${not_run:+"$not_run"}
sum_rc=$?
[ $c_rc -eq 0 ] && [ $py_rc -eq 0 ] && [ $sum_rc -eq 0 ]
