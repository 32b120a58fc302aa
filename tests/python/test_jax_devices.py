# SPDX-License-Identifier: Apache-2.0
"""dlstream.jax on every device XLA runs a call on (interop/xla/devices.c): a kernel given once (a built-in's name,
a function of the device, dlstream.jax.source/image) under shard_map, pmap and jit with sharded inputs, each device
running its own Function; a Function bound to one device refused on another, saying how to give one per device.

On the CPU: JAX's CPU platform with two host devices (XLA_FLAGS=--xla_force_host_platform_device_count=2) and two
dlstream CPU devices (DLSTREAM_CPU_DEVICES=2), in a fresh interpreter (both are read at start-up). The GPU version,
with kernels from source and the compiled program checked for all-gathers: tests/python/test_jax_gpu_devices.py."""
import json

import pytest

from conftest import JAX_UNDER_TSAN, UNDER_TSAN, run_python

pytest.importorskip("jax", reason="JAX is not installed (.ci/run installs its CPU wheel)")
pytestmark = pytest.mark.skipif(UNDER_TSAN, reason=JAX_UNDER_TSAN)

TWO = {"DLSTREAM_CPU_DEVICES": "2", "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
       "JAX_PLATFORMS": "cpu"}

PRELUDE = r"""
import json
import jax, jax.numpy as jnp, numpy as np
import dlstream, dlstream.jax as dj
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
assert len(jax.devices()) == 2 and dlstream.device_count("cpu") == 2, (jax.devices(), dlstream.device_count("cpu"))
mesh = Mesh(np.array(jax.devices()), ("d",))
n = 1000
x = jnp.arange(2 * n, dtype=jnp.float32)
y = jnp.ones(2 * n, jnp.float32)
want = 2 * x + 1
asked = []
def of_device(d):
    asked.append(d)
    return dlstream.builtin_function("dls_axpy_f32", d)
grid = lambda n, a, x, y: (n + 255) // 256
def axpy_of(k):
    return dj.kernel(k, in_place=[3], grid=grid, block=256)
def shard_mapped(axpy):
    return jax.jit(jax.shard_map(lambda x, y: axpy(x.size, 2.0, x, y), mesh=mesh, in_specs=(P("d"), P("d")),
                                 out_specs=P("d")))
out = {}
"""


def run(body, env=TWO):
    r = run_python(PRELUDE + body + "\nprint(json.dumps(out))\n", env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_shard_map_with_a_builtin_by_name():
    got = run(r"""
f = shard_mapped(axpy_of("dls_axpy_f32"))
out["ok"] = bool(jnp.array_equal(f(x, y), want))
out["again"] = bool(jnp.array_equal(f(x + 1, y), 2 * (x + 1) + 1))
stats = dlstream._dlstream._xla_stats()
out["executions"] = stats["executions"]
""")
    assert got["ok"] and got["again"]
    assert got["executions"] == 4  # two runs, each on both devices


def test_pmap_with_a_function_of_the_device():
    got = run(r"""
axpy = axpy_of(of_device)
g = jax.pmap(lambda x, y: axpy(x.size, 2.0, x, y))
r = g(x.reshape(2, n), y.reshape(2, n))
out["ok"] = bool(jnp.array_equal(r.reshape(-1), want))
out["asked"] = sorted(set(asked))
""")
    assert got["ok"]
    assert got["asked"] == ["cpu:0", "cpu:1"], "each device's Function is its own"


def test_jit_with_sharded_inputs():
    got = run(r"""
axpy = axpy_of("dls_axpy_f32")
s = NamedSharding(mesh, P("d"))
xs, ys = jax.device_put(x, s), jax.device_put(y, s)
f = jax.jit(lambda x, y: axpy(x.size, 2.0, x, y))            # the whole array on each device
out["whole"] = bool(jnp.array_equal(f(xs, ys), want))
g = shard_mapped(axpy)                                      # each device its shard
r = g(xs, ys)
out["sharded"] = bool(jnp.array_equal(r, want))
out["sharding"] = r.sharding.spec == P("d")
out["all_gather"] = "all-gather" in g.lower(xs, ys).compile().as_text()
""")
    assert got["whole"] and got["sharded"]
    assert got["sharding"] and not got["all_gather"]


def test_kernels_of_device_functions_and_images_need_what_the_device_takes():
    got = run(r"""
try:  # a function of the device that fails there: refused when the kernel is made, with its reason
    dj.kernel(lambda d: (_ for _ in ()).throw(RuntimeError("no kernel here")), in_place=[3])
except dlstream.InvalidArgumentError as e:
    out["bad"] = str(e)
try:
    dj.kernel(lambda d: 42)
except TypeError as e:
    out["not_function"] = str(e)
out["source_is_callable"] = callable(dj.source("extern \"C\" __global__ void k() {}", "k"))
""")
    assert "no function for cpu:0: RuntimeError: no kernel here" in got["bad"]
    assert "returned 42 for cpu:0, not a dlstream.Function" in got["not_function"]
    assert got["source_is_callable"]


def test_a_function_bound_to_one_device_is_refused_on_another():
    got = run(r"""
bound = axpy_of(dlstream.builtin_function("dls_axpy_f32", "cpu:0"))
try:
    shard_mapped(bound)(x, y).block_until_ready()
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
single = jax.jit(lambda x, y: bound(x.size, 2.0, x, y))
out["single"] = bool(jnp.array_equal(single(x, y), want))   # on cpu:0 alone it runs
""")
    assert "the function is bound to cpu:0, but XLA runs this call on cpu:1" in got["error"], got
    assert "give dlstream.jax.kernel a kernel for each device" in got["error"]
    assert got["single"]


def test_more_jax_devices_than_dlstream_ones():
    r = run_python(r"""
import jax, jax.numpy as jnp, numpy as np
import dlstream, dlstream.jax as dj
from jax.sharding import Mesh, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("d",))
axpy = dj.kernel("dls_axpy_f32", in_place=[3], grid=1, block=256)
f = jax.jit(jax.shard_map(lambda x, y: axpy(x.size, 2.0, x, y), mesh=mesh, in_specs=(P("d"), P("d")),
                          out_specs=P("d")))
try:
    f(jnp.ones(8, jnp.float32), jnp.ones(8, jnp.float32)).block_until_ready()
    print("no error")
except Exception as e:
    print("error:", e)
""", env={**TWO, "DLSTREAM_CPU_DEVICES": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "XLA runs this call on cpu:1, for which the kernel has no function" in r.stdout, r.stdout
