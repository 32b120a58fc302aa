# SPDX-License-Identifier: Apache-2.0
"""Every example under examples/python runs to the end in a fresh interpreter: as this machine has it (it exits 0),
and with NumPy, torch, CuPy and JAX made unimportable, where it must say "skipped: <why>" and exit 0 instead of
dying with ModuleNotFoundError."""
import pathlib

import pytest

from conftest import JAX_UNDER_TSAN, UNDER_TSAN, run_python

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples" / "python").glob("*.py"))
# An entry of None in sys.modules makes `import name` raise ModuleNotFoundError.
WITHOUT_FRAMEWORKS = "import sys\nsys.modules.update(numpy=None, torch=None, cupy=None, jax=None)\n"
RUN = "import runpy\nrunpy.run_path({path!r}, run_name='__main__')\n"


def test_the_examples_are_found():
    assert len(EXAMPLES) >= 7, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs_or_skips(path):
    if UNDER_TSAN and "jax" in path.name:
        pytest.skip(JAX_UNDER_TSAN)
    r = run_python(RUN.format(path=str(path)), timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_without_its_framework_skips_with_the_reason(path):
    r = run_python(WITHOUT_FRAMEWORKS + RUN.format(path=str(path)), timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert last.startswith("skipped: ") and "not installed" in last, r.stdout[-2000:]
