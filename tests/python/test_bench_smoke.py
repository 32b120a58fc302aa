# SPDX-License-Identifier: Apache-2.0
"""No benchmark can rot unseen: scripts/bench-smoke (run by .ci/run and make bench-smoke) runs every benchmark in
bench/ in its smoke mode. This checks that it does: every benchmark source (every .py and .c file of bench/) is
covered by one of its steps, and every Python benchmark (a script that runs as __main__; a module a benchmark
imports is covered by that benchmark's step) takes --smoke."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench")
SMOKE = os.path.join(ROOT, "scripts", "bench-smoke")


def covered():
    """The sources the smoke steps cover, as bench-smoke --list prints them."""
    out = subprocess.run([sys.executable, SMOKE, "--list"], capture_output=True, text=True, timeout=60, check=True)
    return {src for line in out.stdout.splitlines() for src in line.split("\t")[0].split()}


def test_every_benchmark_is_a_step_of_the_smoke_run():
    sources = {"bench/" + f for f in os.listdir(BENCH) if f.endswith((".py", ".c"))}
    missing = sorted(sources - covered())
    assert not missing, f"benchmarks that scripts/bench-smoke does not run (add a step with --smoke): {missing}"


def scripts():
    """The Python files of bench/ that run as scripts."""
    out = []
    for f in sorted(os.listdir(BENCH)):
        if f.endswith(".py"):
            with open(os.path.join(BENCH, f)) as src:
                if 'if __name__ == "__main__":' in src.read():
                    out.append(f)
    return out


@pytest.mark.parametrize("script", scripts())
def test_every_python_benchmark_takes_smoke(script):
    r = subprocess.run([sys.executable, os.path.join(BENCH, script), "--help"], capture_output=True, text=True,
                       timeout=60, cwd=BENCH)
    assert r.returncode == 0 and "--smoke" in r.stdout, f"{script} --help:\n{r.stdout}{r.stderr}"
