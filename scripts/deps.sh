#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what `make test` needs and is missing, saying what it installs: Criterion and pkg-config from Debian
# (apt-get), NumPy, pytest, hypothesis and mypy from PyPI (pip). `deps.sh PYTHON demo`: what `make demo` needs
# (the same configuration: cmake, pkg-config and Criterion; from PyPI only NumPy, which the Python tour uses).
set -euo pipefail
PYTHON="${1:-python3}"
MODE="${2:-test}"

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
want=(numpy)
"$PYTHON" -c "import numpy" 2>/dev/null || need_pip+=("numpy>=2")
if [ "$MODE" != demo ]; then
  want+=(pytest hypothesis)
  "$PYTHON" -c "import pytest" 2>/dev/null || need_pip+=(pytest)
  "$PYTHON" -c "import hypothesis" 2>/dev/null || need_pip+=(hypothesis)
fi
if [ ${#need_pip[@]} -gt 0 ]; then
  echo "deps: installing from PyPI: ${need_pip[*]}"
  "$PYTHON" -m pip install -q "${need_pip[@]}"
else
  echo "deps: Python packages present (${want[*]})"
fi
[ "$MODE" = demo ] && exit 0
# mypy checks the type stubs (CTest python_stubs). Optional: offline, the check is a visible skip instead.
if ! "$PYTHON" -c "import mypy" 2>/dev/null; then
  echo "deps: installing from PyPI: mypy (the type stubs' check)"
  "$PYTHON" -m pip install -q mypy ||
    echo "deps: could not install mypy: the type stubs' check (CTest python_stubs) will be skipped"
fi
