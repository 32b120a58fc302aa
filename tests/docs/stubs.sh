#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The type stubs, checked against the built extension: mypy.stubtest fails on a name the stubs lack, a name they
# have that the extension lacks, or a signature that differs; then mypy --strict type-checks, through the stubs,
# the Python examples of the docs that need no optional framework and examples/python/capture.py.
#   stubs.sh PYTHON PACKAGE_DIR WORK_DIR      (CTest python_stubs; run from the source tree)
set -euo pipefail
PYTHON="$1"
PKG="$2"
WORK="$3"
if ! "$PYTHON" -c "import mypy" 2>/dev/null; then
  why="mypy is not installed for $PYTHON ('make deps', i.e. scripts/deps.sh, installs it with pip)"
  if [ "${DLSTREAM_REQUIRE_MYPY:-0}" = 1 ]; then
    echo "python_stubs: failed: $why, and DLSTREAM_REQUIRE_MYPY=1 (CI) requires the check"
    exit 1
  fi
  echo "python_stubs: skipped: $why; perhaps offline"
  exit 77
fi
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
export MYPY_CACHE_DIR="$WORK/mypy_cache"
echo "== mypy.stubtest dlstream ($PKG/dlstream) =="
"$PYTHON" -m mypy.stubtest --mypy-config-file tests/docs/mypy.ini --allowlist tests/docs/stubtest-allowlist.txt --ignore-unused-allowlist dlstream
mapfile -t blocks < <("$PYTHON" tests/docs/doc_blocks.py python "$WORK/blocks" docs/python.md README.md |
                      awk '$1 == "run" { print $2 }' | xargs grep -L -E '^ *(import|from) +(torch|cupy|jax)\b')
echo "== mypy --strict: ${#blocks[@]} examples of docs/python.md and README.md, examples/python/capture.py =="
"$PYTHON" -m mypy --config-file tests/docs/mypy.ini "${blocks[@]}" examples/python/capture.py
echo "python_stubs: ok"
