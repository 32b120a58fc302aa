# SPDX-License-Identifier: Apache-2.0
"""The end of `make test` (scripts/test-summary): each skip reason once, with how many tests gave it and where, for
the C and Python suites together, and one line with both suites' passed, failed and skipped."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBCUDA = ("no CUDA device: cuda backend unavailable: libcuda.so.1 not found (dlopen: libcuda.so.1: cannot open "
           "shared object file: No such file or directory). Install the NVIDIA driver, or use the CPU backend.")

CTEST = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="3" failures="0" skipped="1">
  <testcase name="status" classname="status" status="run"><system-out>ok</system-out></testcase>
  <testcase name="stream" classname="stream" status="run"><system-out>ok</system-out></testcase>
  <testcase name="hip_decls" classname="hip_decls" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>SKIPPED: ROCm headers (hip/hip_runtime_api.h) not found at configure time
</system-out></testcase>
</testsuite>
"""


def _pytest_xml(failed=False):
    cases = [f'<testcase classname="tests.python.test_gpu" name="t{i}"><skipped type="pytest.skip" '
             f'message="{LIBCUDA}">tests/python/test_gpu.py:{10 + i}: {LIBCUDA}</skipped></testcase>'
             for i in range(15)]
    cases += [f'<testcase classname="tests.python.test_jax_gpu" name="j{i}"><skipped type="pytest.skip" '
              f'message="{LIBCUDA}">x</skipped></testcase>' for i in range(2)]
    cases += ['<testcase classname="" name="tests.python.test_torch_op"><skipped message="collection skipped">'
              '(\'/src/tests/python/test_torch_op.py\', 8, "Skipped: torch is not installed")</skipped></testcase>']
    cases += [f'<testcase classname="tests.python.test_tensor" name="p{i}"/>' for i in range(5)]
    if failed:
        cases += ['<testcase classname="tests.python.test_tensor" name="bad"><failure message="boom"/></testcase>']
    return f'<testsuites><testsuite name="pytest">{"".join(cases)}</testsuite></testsuites>'


def _summary(tmp_path, pytest_xml, *extra):
    (tmp_path / "ctest.xml").write_text(CTEST)
    if pytest_xml is not None:
        (tmp_path / "pytest.xml").write_text(pytest_xml)
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "test-summary"), str(tmp_path / "ctest.xml"),
                           str(tmp_path / "pytest.xml"), "103", *extra], capture_output=True, text=True)


def test_identical_skip_reasons_come_once_and_one_line_ends_it(tmp_path):
    r = _summary(tmp_path, _pytest_xml())
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "== skipped: 19 tests, 3 reasons =="
    assert lines[1].startswith("    17 x Python: no CUDA device: cuda backend unavailable") and lines[1].endswith(
        "[test_gpu, test_jax_gpu]"), lines[1]
    assert sum("libcuda" in line for line in lines) == 1
    assert any("1 x Python: torch is not installed  [test_torch_op]" in line for line in lines)
    assert any("1 x C: ROCm headers (hip/hip_runtime_api.h) not found" in line for line in lines)
    assert lines[-1] == ("make test: 7 passed, 0 failed, 19 skipped (C 2/0/1, Python 5/0/18; passed/failed/skipped) "
                         "in 103 s")


def test_a_failure_or_a_suite_without_results_fails_the_summary(tmp_path):
    r = _summary(tmp_path, _pytest_xml(failed=True))
    assert r.returncode == 1 and r.stdout.splitlines()[-1].startswith("make test: 7 passed, 1 failed, 19 skipped")
    (tmp_path / "none").mkdir()
    r = _summary(tmp_path / "none", None)
    assert r.returncode == 1 and "Python: no results (the suite did not finish)" in r.stdout


def test_a_python_suite_not_run_says_why(tmp_path):
    r = _summary(tmp_path, None, "the extension was not built in build/x")
    assert r.returncode == 0
    assert r.stdout.splitlines()[-1] == ("make test: 2 passed, 0 failed, 1 skipped (C 2/0/1, Python not run: the "
                                         "extension was not built in build/x; passed/failed/skipped) in 103 s")
