#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what `make demo` and `make test` need and is missing, saying what it installs:
# Criterion and pkg-config from Debian (apt-get), NumPy, pytest, hypothesis and mypy from PyPI (pip).
set -euo pipefail
PYTHON="${1:-python3}"

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
[ -e /usr/include/criterion/criterion.h ] || need_apt+=(libcriterion-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: installing from Debian: ${need_apt[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
else
  echo "deps: Debian packages present (cmake, pkg-config, libcriterion-dev)"
fi

need_pip=()
"$PYTHON" -c "import numpy" 2>/dev/null || need_pip+=("numpy>=2")
"$PYTHON" -c "import pytest" 2>/dev/null || need_pip+=(pytest)
"$PYTHON" -c "import hypothesis" 2>/dev/null || need_pip+=(hypothesis)
if [ ${#need_pip[@]} -gt 0 ]; then
  echo "deps: installing from PyPI: ${need_pip[*]}"
  "$PYTHON" -m pip install -q "${need_pip[@]}"
else
  echo "deps: Python packages present (numpy, pytest, hypothesis)"
fi
# mypy checks the type stubs (CTest python_stubs). Optional: offline, the check is a visible skip instead.
if ! "$PYTHON" -c "import mypy" 2>/dev/null; then
  echo "deps: installing from PyPI: mypy (the type stubs' check)"
  "$PYTHON" -m pip install -q mypy ||
    echo "deps: could not install mypy: the type stubs' check (CTest python_stubs) will be skipped"
fi
