# SPDX-License-Identifier: Apache-2.0
"""dlstream kernels inside jax.jit: a built-in (and, on CUDA, a kernel compiled from source) in one jitted
program between jnp operations, under vmap, and updating a donated state in place. On CUDA the launches run on
XLA's stream with no host sync; without a GPU the program runs on JAX's CPU platform."""
import sys

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    print("skipped: JAX is not installed (pip install jax: the CPU wheel is enough)")
    sys.exit(0)
try:
    import numpy as np
except ImportError:
    print("skipped: NumPy is not installed")
    sys.exit(0)

import dlstream
import dlstream.jax as dj

gpu = dlstream.device_count("cuda") > 0 and jax.default_backend() == "gpu"
dev = "cuda:0" if gpu else "cpu:0"

# y = a * x + y with the built-in's signature "u64,f32,cp,p": n and a are compile-time constants, x is read, y is
# updated in place (argument 3: its result aliases the input). The grid follows the size, at trace time.
axpy = dj.kernel(dlstream.builtin_function("dls_axpy_f32", dev), in_place=[3],
                 grid=lambda n, a, x, y: (n + 255) // 256, block=256)


@jax.jit
def step(x, y):
    y = axpy(x.size, 2.0, jnp.sin(x), y)  # XLA computes sin(x), then dlstream's kernel reads it
    return y, jnp.sum(y * y)              # XLA reads what the kernel wrote


x = jnp.linspace(0.0, 1.0, 1 << 16, dtype=jnp.float32)
y, norm = step(x, jnp.ones_like(x))
np.testing.assert_allclose(np.asarray(y), 2.0 * np.sin(np.asarray(x)) + 1.0, rtol=1e-5)

# vmap: the kernel runs once per row (vmap_method="sequential"), n is a row's size.
rows = jax.vmap(lambda x, y: axpy(x.size, 0.5, x, y))(x.reshape(4, -1), jnp.zeros((4, x.size // 4)))
np.testing.assert_allclose(np.asarray(rows), 0.5 * np.asarray(x).reshape(4, -1), rtol=1e-6)

# A donated state: the kernel writes into the input's own buffer, no copy.
state = jnp.zeros(1 << 16, jnp.float32)
update = jax.jit(lambda s: axpy(s.size, 1.0, x, s), donate_argnums=0)
for _ in range(3):
    state = update(state)
np.testing.assert_allclose(np.asarray(state), 3.0 * np.asarray(x), rtol=1e-6)

if gpu:  # a kernel from source: its output is allocated by XLA from out_shapes
    try:
        mod = dlstream.Module.from_source(r"""
        extern "C" __global__ void square(unsigned long long n, const float *x, float *out) {
          unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
          if (i < n) out[i] = x[i] * x[i];
        }""", device=dev)
        square = dj.kernel(mod.function("square", signature="u64,cp,p"),
                           lambda n, x: jax.ShapeDtypeStruct(x.shape, x.dtype), grid=lambda n, x: (n + 255) // 256,
                           block=256)
        sq = jax.jit(lambda x: square(x.size, x) + 1.0)(x)
        np.testing.assert_allclose(np.asarray(sq), np.asarray(x) ** 2 + 1.0, rtol=1e-6)
        print("from source: square ok")
    except dlstream.UnavailableError as e:
        print(f"from source: skipped ({e})")

print(f"jax_jit on {dev} (JAX {jax.__version__}, {jax.default_backend()}): |y|^2 = {float(norm):.1f}, "
      f"state = 3x after 3 donated updates: ok")
