# SPDX-License-Identifier: Apache-2.0
"""Scenarios of test_jax_gpu.py that need a fresh process (XLA reads XLA_FLAGS at start-up):
`python jax_gpu_child.py ordering|command_buffers` prints one line "RESULT {json}"."""
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import dlstream  # noqa: E402
import dlstream.jax as dj  # noqa: E402

DEV = "cuda:0"
N = 1 << 20
TIMEOUT = 30.0


def axpy():
    return dj.kernel(dlstream.builtin_function("dls_axpy_f32", DEV), in_place=[3],
                     grid=lambda n, a, x, y: (n + 255) // 256, block=256)


def ordering():
    """XLA op (behind a latch) -> dlstream axpy reading it -> XLA op reading the axpy's result, in one program on
    XLA's stream; the host never waits until it opens the latch. Negative control: a latch that holds a stream
    other than XLA's does not hold the same program."""
    k = axpy()
    x = jnp.arange(N, dtype=jnp.float32) + 7777.0  # values no earlier run left in XLA's buffers
    ones = jnp.ones(N, jnp.float32)

    def prog(latch, x, ones):
        z = dj.latch_wait(latch, x, timeout=TIMEOUT) * 2.0  # XLA op, held behind the latch
        w = k(N, 1.0, z, ones)  # dlstream reads z: must run after it
        return w + 1.0          # XLA op reading w: must run after the launch

    warm = dlstream.Latch(DEV)
    warm.open()
    jax.block_until_ready(jax.jit(lambda x, o: prog(warm, x, o))(x + 1.0, ones))  # load every kernel first
    latch = dlstream.Latch(DEV)
    out = jax.jit(lambda x, o: prog(latch, x, o))(x, ones)
    dispatched_while_held = not out.is_ready()  # the call returned: the handler did not wait on the host
    # The legacy default stream is free (XLA's streams do not sync with it): the latch is not there.
    dlstream.current_stream(DEV).synchronize()
    still_held = not out.is_ready()
    latch.open()
    got = np.asarray(out)
    want = (np.arange(N, dtype=np.float32) + 7777.0) * 2.0 + 1.0 + 1.0
    # Negative control: the latch holds a dlstream stream; the program without a wait completes meanwhile.
    # Its program runs once first: CUDA loads a kernel lazily at its first launch, waiting for the whole device
    # to be idle, which a held latch never is (docs/semantics.md, "Latches").
    free_prog = jax.jit(lambda x, o: k(N, 1.0, x * 2.0, o) + 1.0)
    jax.block_until_ready(free_prog(x, ones))
    other = dlstream.Stream(DEV)
    control = dlstream.Latch(DEV)
    control.wait(other, timeout=TIMEOUT)
    free = free_prog(x, ones)
    jax.block_until_ready(free)
    control_finished_while_held = not control.timed_out
    control.open()
    other.synchronize()
    return {"dispatched_while_held": dispatched_while_held, "still_held_after_legacy_sync": still_held,
            "values_ok": bool(np.array_equal(got, want)), "latch_timed_out": latch.timed_out,
            "control_finished_while_held": control_finished_while_held,
            "control_values_ok": bool(np.array_equal(np.asarray(free), want))}


def command_buffers():
    """A donated state updated by 10 dlstream launches and an XLA fusion per run, run 20 times: with command
    buffers the handler runs when XLA records the calls, and replays run them without it."""
    k = axpy()
    c = jnp.full(N, 0.25, jnp.float32)
    step = jax.jit(lambda x, c: _ten(k, x, c) * 0.5, donate_argnums=0)
    x = jnp.zeros(N, jnp.float32)
    ref = np.zeros(N, np.float32)
    before = dlstream._dlstream._xla_stats()["executions"]
    ok = True
    runs = 20
    for _ in range(runs):
        x = step(x, c)
        ref = (ref + 10 * np.float32(0.25)) * np.float32(0.5)
        ok = ok and bool(np.allclose(np.asarray(x), ref, rtol=1e-6))
    handler_runs = dlstream._dlstream._xla_stats()["executions"] - before
    return {"xla_flags": os.environ.get("XLA_FLAGS", ""), "jax": jax.__version__, "launches": 10 * runs,
            "handler_runs": handler_runs, "values_ok": ok}


def _ten(k, x, c):
    for _ in range(10):
        x = k(N, 1.0, c, x)
    return x


if __name__ == "__main__":
    result = {"ordering": ordering, "command_buffers": command_buffers}[sys.argv[1]]()
    print("RESULT " + json.dumps(result), flush=True)
