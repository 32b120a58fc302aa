#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the main examples of a build: the C extension example, then the Python tour.
set -euo pipefail
BUILD_DIR="$1"
PYTHON="${2:-python3}"
echo "== examples/c: a C extension receiving DLPack tensors and a stream =="
"$BUILD_DIR/examples/c/dls_example_extension"
pkg="$BUILD_DIR/python"
if [ -d "$pkg/dlstream" ] && [ -f examples/python/tour.py ]; then
  echo "== examples/python/tour.py =="
  PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" examples/python/tour.py
fi
