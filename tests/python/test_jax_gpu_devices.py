# SPDX-License-Identifier: Apache-2.0
"""dlstream.jax on every GPU of the machine (2 or more): shard_map, pmap and jit with sharded inputs, with a built-in
by name and a kernel from source (dlstream.jax.source), checked against jnp, the compiled programs free of
all-gathers where the shards stay put; command buffers on every device; a Function bound to one GPU refused on
another. Each case runs in a fresh interpreter (JAX with CUDA, its memory not preallocated); on a machine without two
GPUs that JAX and dlstream both see, each says why it skips. The CPU version: tests/python/test_jax_devices.py."""
import json
import re

import pytest

from conftest import run_python

pytest.importorskip("jax", reason="JAX is not installed")

PRELUDE = r"""
import json, sys
out = {}
try:
    import jax
    gpus = jax.devices("gpu")
except Exception as e:
    gpus, why = [], f"JAX has no GPU backend ({type(e).__name__}: {e})"
import dlstream
if len(gpus) < 2 or dlstream.device_count("cuda") < 2:
    out["skip"] = why if not gpus else f"needs 2 GPUs; JAX sees {len(gpus)}, dlstream {dlstream.device_count('cuda')}"
    print(json.dumps(out)); sys.exit(0)
import jax.numpy as jnp, numpy as np
import dlstream.jax as dj
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
D = len(gpus)
mesh = Mesh(np.array(gpus), ("d",))
n = 1 << 20
x = jnp.arange(D * n, dtype=jnp.float32) / 7.0
y = jnp.ones(D * n, jnp.float32)
SRC = r'''
extern "C" __global__ void scale2(unsigned long long n, const float *x, float *y) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
'''
axpy = dj.kernel("dls_axpy_f32", in_place=[3], grid=lambda n, a, x, y: (n + 255) // 256, block=256)
scale2 = dj.kernel(dj.source(SRC, "scale2", "u64,cp,p"), out_shapes=lambda n, x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                   grid=lambda n, x: (n + 255) // 256, block=256)
def step(x, y):                      # per device: its shard
    y = axpy(x.size, 2.0, x, y)      # y = 2 x + 1
    return scale2(x.size, y)         # 4 x + 2
want = 4 * x + 2
def close(a, b):
    return bool(jnp.allclose(a, b, rtol=1e-6))
def gathers(f, *args):
    return "all-gather" in f.lower(*args).compile().as_text()
out["devices"] = D
"""
ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "NCCL_NVLS_ENABLE": "0"}


def run(body, env=None):
    r = run_python(PRELUDE + body + "\nprint(json.dumps(out))\n", env={**ENV, **(env or {})}, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if "skip" in got:
        pytest.skip(got["skip"])
    return got


def test_shard_map_on_every_gpu():
    got = run(r"""
f = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d")))
r = f(x, y)
out["ok"] = close(r, want)
out["all_gather"] = gathers(f, x, y)
out["on"] = sorted(str(s.device) for s in r.addressable_shards)
""")
    assert got["ok"] and not got["all_gather"], got
    assert len(got["on"]) == got["devices"]


def test_pmap_on_every_gpu():
    got = run(r"""
g = jax.pmap(step)
r = g(x.reshape(D, n), y.reshape(D, n))
out["ok"] = close(r.reshape(-1), want)
out["all_gather"] = "all-gather" in g.lower(x.reshape(D, n), y.reshape(D, n)).compile().as_text()
""")
    assert got["ok"] and not got["all_gather"], got


def test_jit_with_sharded_inputs():
    got = run(r"""
s = NamedSharding(mesh, P("d"))
xs, ys = jax.device_put(x, s), jax.device_put(y, s)
f = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d")), in_shardings=(s, s),
            out_shardings=s)
r = f(xs, ys)
out["ok"] = close(r, want) and r.sharding.spec == P("d")
out["all_gather"] = gathers(f, xs, ys)
whole = jax.jit(step)(xs, ys)        # without shard_map: each device runs the whole call (XLA gathers the inputs)
out["whole"] = close(whole, want)
""")
    assert got["ok"] and not got["all_gather"] and got["whole"], got


def test_command_buffers_on_every_gpu():
    got = run(r"""
def ten(x, y):
    for _ in range(10):
        y = axpy(x.size, 1.0, x, y)
    return y
f = jax.jit(jax.shard_map(ten, mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d")))
before = dlstream._dlstream._xla_stats()["executions"]
r = y
for _ in range(5):
    r = f(x, r)
out["ok"] = close(r, y + 50 * x)
out["executions"] = dlstream._dlstream._xla_stats()["executions"] - before
out["launches"] = 5 * 10 * D
""", env={"XLA_FLAGS": "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"})
    assert got["ok"], got
    assert got["executions"] < got["launches"], "the handler ran at every launch: no command buffer replayed it"


def test_a_function_bound_to_one_gpu_is_refused_on_another():
    got = run(r"""
bound = dj.kernel(dlstream.builtin_function("dls_axpy_f32", "cuda:0"), in_place=[3],
                  grid=lambda n, a, x, y: (n + 255) // 256, block=256)
f = jax.jit(jax.shard_map(lambda x, y: bound(x.size, 2.0, x, y), mesh=mesh, in_specs=(P("d"), P("d")),
                          out_specs=P("d")))
try:
    f(x, y).block_until_ready()
except Exception as e:
    out["error"] = str(e)
""")
    assert re.search(r"the function is bound to cuda:0, but XLA runs this call on cuda:[1-9]", got.get("error", "")), got
