# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the Python suite: the package, the fake exchange-API framework, leak checks, framework skips; on GPU
machines, JAX without preallocation, torch on cuda:0 at each test's start, and (DLSTREAM_TEST_EAGER_FAILURES=1) each
failure's traceback printed the moment it happens."""
import gc
import importlib
import os
import sys
import time

# Before anything imports JAX: its CUDA client would take 75% of each GPU's memory in every process that starts it
# (every xdist worker imports the JAX test modules), and the other workers' allocations would then fail.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import pytest  # noqa: E402

dlstream = pytest.importorskip("dlstream", reason="the dlstream extension is not built (PYTHONPATH=<build>/python)")
# scripts/wheel-check names the installed package under test: a dlstream from anywhere else (the build or source
# tree) must not be tested silently in its place.
_WANT = os.environ.get("DLSTREAM_TESTS_PACKAGE")
if _WANT and os.path.dirname(os.path.abspath(dlstream.__file__)) != os.path.abspath(_WANT):
    pytest.exit(f"dlstream was imported from {dlstream.__file__}, not from DLSTREAM_TESTS_PACKAGE={_WANT}", 4)


def pytest_report_header(config):
    return f"dlstream {dlstream.__version__} from {os.path.dirname(os.path.abspath(dlstream.__file__))}"


# ---- failures printed as they happen (DLSTREAM_TEST_EAGER_FAILURES=1) ----
# A GPU run cut short by its time limit prints no summary: each failure's or error's traceback (and what the test
# printed) goes to the terminal when its report arrives (under xdist: in the controller, as the workers report),
# between lines ">>>>> " and "<<<<< " that scripts/gpu-check picks out of the log.

EAGER = os.environ.get("DLSTREAM_TEST_EAGER_FAILURES", "") not in ("", "0")
_config = None


def pytest_configure(config):
    global _config
    _config = config


def _eager_text(report):
    when = {"setup": "ERROR at setup", "teardown": "ERROR at teardown"}.get(report.when, "FAILED")
    where = getattr(report, "node", None)
    worker = getattr(where, "gateway", None)
    head = f">>>>> {when} {report.nodeid}" + (f" [{worker.id}]" if worker is not None else "") + \
        f" ({report.duration:.1f} s, {time.strftime('%H:%M:%S')})"
    parts = [head, report.longreprtext.rstrip()]
    for title, content in report.sections:
        if content.strip():
            parts.append(f"----- {title} (last 3000 characters) -----")
            parts.append(content[-3000:].rstrip())
    parts.append(f"<<<<< end {report.nodeid}")
    return "\n".join(parts)


def pytest_runtest_logreport(report):
    if not EAGER or not report.failed or _config is None or hasattr(_config, "workerinput"):
        return  # in an xdist worker the controller prints it
    tr = _config.pluginmanager.get_plugin("terminalreporter")
    text = _eager_text(report)
    if tr is not None:
        tr.ensure_newline()
        tr.write_line(text)
        tr._tw.flush()
    else:
        print(text, file=sys.stderr, flush=True)


def _optional(name):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure means "not here"
        return None


torch = _optional("torch")
cupy = _optional("cupy")
HAVE_CUDA = dlstream.device_count("cuda") > 0
TORCH_CUDA = torch is not None and HAVE_CUDA and torch.cuda.is_available()
CUPY_CUDA = cupy is not None and HAVE_CUDA

needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device: " + dlstream.backend_available("cuda")[1])
needs_torch_cuda = pytest.mark.skipif(
    not TORCH_CUDA, reason="torch with CUDA is not installed" if torch is None else "torch sees no CUDA device")
needs_cupy_cuda = pytest.mark.skipif(not CUPY_CUDA, reason="CuPy with CUDA is not installed")

CPU = "cpu"


def pytest_collection_finish(session):
    """JAX's CUDA client, started while the test modules were imported, may leave another GPU's context current in
    this thread, which torch then takes for its current device: torch starts on cuda:0 here."""
    _torch_on_device_0()


def _torch_on_device_0():
    if TORCH_CUDA and torch.cuda.device_count() > 1 and (
            not torch.cuda.is_initialized() or torch.cuda.current_device() != 0):
        torch.cuda.set_device(0)


@pytest.fixture(autouse=True)
def _earlier_objects_frozen():
    """Every test starts with what earlier tests left collected, and what still lives moved out of the collector's
    sight (gc.freeze): the leak checks' gc.collect() then walks the objects this test made, not the million that JAX,
    torch and hypothesis keep once imported (70 ms a collection with JAX loaded, three collections a test). Garbage
    is collected before the freeze, so nothing unreachable is kept; a frozen object freed later goes as always."""
    gc.collect()
    gc.freeze()
    yield


def pytest_unconfigure(config):
    """What the tests froze goes back to the collector before the interpreter's last collections, which never look
    at frozen objects: the cycles of extensions that check their own objects at exit (nanobind's, in Triton, which
    torch imports) are then collected, not reported as leaked."""
    gc.unfreeze()


@pytest.fixture(autouse=True)
def _torch_device_0_first():
    """Every test starts with torch's current device cuda:0 (tests that say "cuda" mean it): a previous test's JAX
    call or a dlstream call on another device, from a thread that had no context, may have made another device's
    context current. Only where torch sees several GPUs and has started (else nothing to fix)."""
    if TORCH_CUDA and torch.cuda.is_initialized() and torch.cuda.device_count() > 1 and \
            torch.cuda.current_device() != 0:
        torch.cuda.set_device(0)
    yield

# Under ThreadSanitizer (scripts/run-tests.sh preloads it) JAX's XLA runs its own uninstrumented threads, whose
# accesses TSan reports as races inside jaxlib (xla::cpu::ThunkEmitter), and it aborts the run: JAX's tests skip there.
UNDER_TSAN = "tsan" in os.environ.get("LD_PRELOAD", "")
JAX_UNDER_TSAN = "ThreadSanitizer is loaded: jaxlib's uninstrumented threads give false race reports"
# A negative control runs a child with the hazard rule off, where work races by design: there the test, not
# ThreadSanitizer, must notice (TSan would stop the child at the first race it sees).
RULE_OFF = {"DLSTREAM_TEST_NO_HAZARDS": "1", "TSAN_OPTIONS": "report_bugs=0"}


def fake_exchange():
    """tests/python/fake_exchange.c's module, or a skip saying why it is missing."""
    return pytest.importorskip("_dls_fake_exchange", reason="the fake exchange-API module (_dls_fake_exchange) is not "
                               "importable: CMake builds it into <build>/python (an installed dlstream: "
                               "scripts/wheel-check copies it beside the tests)")


@pytest.fixture
def stream_choice_only():
    """For tests that watch which stream a call picks: the hazard rule's waits (a framework's stream waiting for a
    call on another stream, among them) are off while they run."""
    was = dlstream._dlstream._test_hazards(False)
    yield
    dlstream._dlstream._test_hazards(was)


class FakeCarrier:
    """Blocks (use_stream, stream_parallel branches) carry the fake framework's current stream as they carry torch's
    (dlstream/_carry.py: a carrier names the module, and sets and restores the stream)."""
    module = "_dls_fake_exchange"

    def enter(self, mod, stream):
        prev = mod.current_stream()
        if not stream.device.startswith("cpu") or prev == stream.ptr:
            return None
        mod.set_current_stream(stream.ptr)
        return prev, prev

    def exit(self, token):
        sys.modules[self.module].set_current_stream(token[0])


@pytest.fixture
def carried():
    """Blocks carry the fake framework (the fixture's value is its module)."""
    mod = fake_exchange()
    mod.set_current_stream(0)
    carrier = FakeCarrier()
    dlstream._carry._CARRIERS.append(carrier)
    yield mod
    dlstream._carry._CARRIERS.remove(carrier)
    mod.set_current_stream(0)


@pytest.fixture
def foreign_record_off():
    """For tests of another ordering (a framework's stream) that write the same NumPy memory straight through dlstream
    calls: the record of foreign memory, which would order those uses too, is off while they run."""
    was = dlstream._dlstream._test_foreign(False)
    yield
    dlstream._dlstream._test_foreign(was)


@pytest.fixture
def fx():
    """The fake framework with the DLPack C exchange API (tests/python/fake_exchange.c)."""
    mod = fake_exchange()
    mod.set_current_stream(0)
    yield mod
    mod.set_current_stream(0)


def held(stream, **wait):
    """A CPU latch holding `stream`: work queued on it after this waits until the latch is opened (`wait`: the
    latch wait's keywords, such as timeout)."""
    latch = dlstream.Latch(CPU)
    latch.wait(stream, **wait)
    return latch


class Closes:
    """A hostile argument: whichever conversion a call asks of it (__bool__, __index__, __float__, __cuda_stream__,
    __dlpack_device__, __dlpack__) first closes `victim` (once), then answers like `value`; as a stream it names
    `stream` (a CPU stream's registry key; None: the legacy default stream), as a tensor it is `array`."""

    def __init__(self, victim, value=1, array=None, stream=None):
        self.victim, self.value, self.array, self.stream = victim, value, array, stream

    def _close(self):
        victim, self.victim = self.victim, None
        if victim is not None:
            try:
                victim.close()
            except dlstream.Error:
                pass

    def __bool__(self):
        self._close()
        return bool(self.value)

    def __index__(self):
        self._close()
        return int(self.value)

    def __float__(self):
        self._close()
        return float(self.value)

    def __cuda_stream__(self):
        self._close()
        return (0, self.stream.ptr if self.stream is not None else 0)

    def __dlpack_device__(self):
        self._close()
        return (dlstream.kDLCPU, 0)

    def __dlpack__(self, **kw):
        self._close()
        import numpy as np
        return (self.array if self.array is not None else np.zeros(4, np.float32)).__dlpack__()

    def __repr__(self):
        return "Closes()"


def passes(probe, spins=100000, seconds=10.0):
    """Whether probe() (an event's or a stream's query) turns true within `spins` yields and `seconds`, while a
    latch still holds some stream: what overlap looks like (bounded; never a sleep). The time bound keeps a held
    probe (a negative control) well inside the latches' 20-30 s timeouts on a loaded machine, where one yield can
    take milliseconds."""
    end = time.monotonic() + seconds
    for _ in range(spins):
        if probe():
            return True
        if time.monotonic() > end:
            return False
        os.sched_yield()
    return False


def settle():
    """Runs every release once its stream has passed: sync the CPU default stream, collect, and poll until no release
    is pending (bounded by passes()): a release may wait for a stream the test closed, whose last work the CPU
    backend's worker is still finishing."""
    dlstream.current_stream(CPU).synchronize()
    gc.collect()
    if dlstream._dlstream._deferred_poll():
        passes(lambda: dlstream._dlstream._deferred_poll() == 0)


def live():
    settle()
    return {k: v for k, v in dlstream._dlstream._live_handles().items()}


@pytest.fixture
def no_leaks():
    """Asserts that a test leaves no handle and no deferred release behind. The caches of stream wrappers (the
    module's, and the XLA CUDA handler's, kept for XLA's streams from a worker's first jit call on) are emptied on
    both sides: what they keep is reused, not leaked."""
    dlstream._dlstream._clear_caches()
    dlstream._dlstream._xla_release()
    before = live()
    yield
    dlstream._dlstream._clear_caches()
    dlstream._dlstream._xla_release()
    after = live()
    assert after == before, f"handles leaked: before {before}, after {after}"
    assert dlstream._dlstream._deferred_pending() == 0


def run_python(code, env=None, timeout=60):
    """Runs code in a fresh interpreter with this suite's PYTHONPATH; returns the CompletedProcess."""
    import subprocess
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=e)
