# SPDX-License-Identifier: Apache-2.0
"""dlstream.jax on an H100 in one run: a jitted chain of 100 dlstream axpy calls on 2^20 floats, without and with
XLA's command buffers, beside the same chain in jnp (which XLA fuses) and the floor: 100 jax.ffi calls to a C
handler that only launches the same kernel (bench/jax_floor.c). Prints a Markdown table with the ratios the issue
asks for, and writes JSON with --json FILE.

  python3 bench/bench_jax.py --floor <build>/bench/libdls_jax_floor.so [--json out.json] [--reps 9] [--smoke]

Each mode runs in a child process of its own (XLA reads XLA_FLAGS once):
  off: --xla_gpu_enable_command_buffer=                   every call runs its handler
  on:  --xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1

Host cost per call: the chain's program starts with a kernel that holds XLA's stream for 20 ms, so the device
runs nothing while the host enqueues the 100 calls; the time from the jitted call until the handler has run its
100th execution (its counter), over 100. It includes JAX's dispatch of the program (amortized over the 100
calls). The raw row is cuLaunchKernel of the same kernel looped in C on a held stream.
Time per call: 20 chained executions of a donated state, device-bound, wall time over 2,000 calls.
Kernel device time: CUDA events around a replayed dlstream graph of 100 launches of the kernel, over 100.
Without JAX with CUDA it prints "skipped: <reason>" and exits 0. --smoke (CI): 4 calls a chain on 4,096 floats, a
few repetitions; without JAX's CUDA, both children run on JAX's CPU platform with dlstream's CPU backend, and the
floor, the held-device host rows and the kernel's device time are skipped (they need CUDA)."""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

N = 1 << 20
CALLS = 100
SPIN_NS = 20_000_000
A = 1e-6
MODES = {"off": "--xla_gpu_enable_command_buffer=",
         "on": "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"}
HOLD_SRC = r"""
extern "C" __global__ void hold(unsigned long long ns, float *y) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


def child(mode, floor_path, reps, smoke, gpu):
    global N, CALLS
    import jax
    import jax.numpy as jnp
    import numpy as np

    import dlstream
    import dlstream.jax as dj

    if smoke:
        N, CALLS = 4096, 4
    dev = "cuda:0" if gpu else "cpu"
    axpy = dj.kernel(dlstream.builtin_function("dls_axpy_f32", dev), in_place=[3], grid=(N + 255) // 256,
                     block=256)
    if gpu:
        lib = ctypes.CDLL(floor_path)
        lib.dls_jax_floor_init.argtypes = [ctypes.c_int, ctypes.c_float]
        lib.dls_jax_floor_executions.restype = ctypes.c_uint64
        if lib.dls_jax_floor_init(0, A) != 0:
            raise SystemExit("jax_floor: init failed (see above)")
        jax.ffi.register_ffi_target("dls_bench_floor", jax.ffi.pycapsule(lib.dls_jax_floor_handler),
                                    platform="CUDA", api_version=1)
        spec = jax.ShapeDtypeStruct((N,), jnp.float32)
        floor = jax.ffi.ffi_call("dls_bench_floor", spec, input_output_aliases={1: 0})
        hold = dj.kernel(dlstream.Module.from_source(HOLD_SRC, device=dev).function("hold", signature="u64,p"),
                         in_place=[1])

    def dls_chain(x, y):
        for _ in range(CALLS):
            y = axpy(N, A, x, y)
        return y

    def floor_chain(x, y):
        for _ in range(CALLS):
            y = floor(x, y)
        return y

    def jnp_chain(x, y):
        for _ in range(CALLS):
            y = A * x + y
        return y

    chains = {"dlstream": dls_chain, "floor": floor_chain, "jnp": jnp_chain} if gpu else \
        {"dlstream": dls_chain, "jnp": jnp_chain}
    runs = 2 if smoke else 20
    x = jnp.linspace(0, 1, N, dtype=jnp.float32)
    result = {"mode": mode, "xla_flags": os.environ.get("XLA_FLAGS", ""), "jax": jax.__version__,
              "device": jax.devices()[0].device_kind}

    # Time per call, device-bound: 20 executions of each chain on a donated state.
    for name, chain in chains.items():
        step = jax.jit(chain, donate_argnums=1)
        y = jnp.zeros(N, jnp.float32)
        for _ in range(3):
            y = step(x, y)
        jax.block_until_ready(y)
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(runs):
                y = step(x, y)
            jax.block_until_ready(y)
            samples.append((time.perf_counter() - t0) / (runs * CALLS) * 1e6)
        result[f"{name}_us_per_call"] = statistics.median(samples)
    want = np.asarray(jax.jit(jnp_chain)(x, jnp.zeros(N, jnp.float32)))
    got = np.asarray(jax.jit(dls_chain)(x, jnp.zeros(N, jnp.float32)))
    result["dlstream_matches_jnp"] = bool(np.allclose(got, want, rtol=1e-4))

    if mode == "off" and gpu:
        held_rows(result, reps, x, chains, hold, lib, dev)
    result["stats"] = dlstream._dlstream._xla_stats()
    return result


def held_rows(result, reps, x, chains, hold, lib, dev):
    """Host cost per call with the device held, the raw loop's, and the kernel's device time (CUDA only)."""
    import jax
    import jax.numpy as jnp

    import dlstream

    # Host cost per call, device held: the handler's own execution counters say when the 100th call has run.
    counters = {"dlstream": (lambda: dlstream._dlstream._xla_stats()["executions"], CALLS + 1),
                "floor": (lib.dls_jax_floor_executions, CALLS)}
    for name in ("dlstream", "floor"):
        held = jax.jit(_held(chains[name], hold), donate_argnums=1)
        count, want_calls = counters[name]
        y = jax.block_until_ready(held(x, jnp.zeros(N, jnp.float32)))
        samples, held_ok = [], True
        for _ in range(reps):
            c0 = count()
            t0 = time.perf_counter()
            out = held(x, y)
            while count() - c0 < want_calls:
                if time.perf_counter() - t0 > 10:
                    raise SystemExit(f"{name}: the handler ran {count() - c0} of {want_calls} calls in 10 s")
            t1 = time.perf_counter()
            held_ok = held_ok and not out.is_ready()  # the device was still held: host cost alone
            y = jax.block_until_ready(out)
            samples.append((t1 - t0) / CALLS * 1e6)
        result[f"{name}_host_us_per_call"] = statistics.median(samples)
        result[f"{name}_host_held_ok"] = held_ok
    s = dlstream.Stream(dev)
    xs, ys = dlstream.empty(N, "float32", device=dev, stream=s), dlstream.empty(N, "float32", device=dev, stream=s)
    dlstream.fill(xs, 0.0, stream=s)
    dlstream.fill(ys, 0.0, stream=s)
    raw = dlstream._dlstream._bench_raw_axpy
    px, py = xs.data_ptr, ys.data_ptr
    raw(s.ptr, px, py, N, 200)
    s.synchronize()
    samples = []
    for _ in range(reps):
        dlstream.spin(SPIN_NS / 1e9, stream=s)
        samples.append(raw(s.ptr, px, py, N, CALLS) / CALLS * 1e6)
        s.synchronize()
    result["raw_host_us_per_call"] = statistics.median(samples)

    # The kernel's device time: events around a replayed graph of 100 launches on a dlstream stream.
    f = dlstream.builtin_function("dls_axpy_f32", dev)
    with dlstream.capture(s) as g:
        for _ in range(CALLS):
            f.launch((N + 255) // 256, 256, N, A, xs, ys, stream=s)
    g.replay()
    s.synchronize()
    e0, e1 = dlstream.Event(timing=True, device=dev), dlstream.Event(timing=True, device=dev)
    samples = []
    for _ in range(reps):
        e0.record(s)
        g.replay()
        e1.record(s)
        s.synchronize()
        samples.append(e0.elapsed_time(e1) * 1e3 / CALLS)
    result["kernel_device_us"] = statistics.median(samples)


def _held(chain, hold):
    """The chain behind a kernel that holds XLA's stream for SPIN_NS."""
    return lambda x, y: chain(x, hold(SPIN_NS, y))


def table(off, on):
    rows = [
        "| chain of 100 axpy on 2^20 float32 | without command buffers | with command buffers |",
        "| --- | --- | --- |",
    ]

    def row(label, key, unit="µs"):
        a = off.get(key)
        b = on.get(key)
        fmt = (lambda v: "—" if v is None else f"{v:.3f} {unit}")
        rows.append(f"| {label} | {fmt(a)} | {fmt(b)} |")

    row("dlstream.jax: time per call (device-bound)", "dlstream_us_per_call")
    row("floor handler (jax.ffi, cuLaunchKernel only): time per call", "floor_us_per_call")
    row("jnp chain (XLA fuses it): time per axpy", "jnp_us_per_call")
    row("dlstream.jax: host cost per call (device held)", "dlstream_host_us_per_call")
    row("floor handler: host cost per call (device held)", "floor_host_us_per_call")
    row("raw cuLaunchKernel loop in C: host cost per launch", "raw_host_us_per_call")
    row("the kernel's device time (CUDA events, graph replay)", "kernel_device_us")
    out = "\n".join(rows)
    kernel = off.get("kernel_device_us")
    lines = []
    if "dlstream_host_us_per_call" in off:
        dls, floor, raw = (off[k] for k in ("dlstream_host_us_per_call", "floor_host_us_per_call",
                                             "raw_host_us_per_call"))
        lines.append(f"- host cost above raw cuLaunchKernel: dlstream {dls - raw:+.3f} µs (target <= 1 µs), floor "
                     f"{floor - raw:+.3f} µs; dlstream above the floor {dls - floor:+.3f} µs")
    if kernel:
        lines.append(f"- with command buffers, time per call / kernel device time: dlstream "
                     f"{on['dlstream_us_per_call'] / kernel:.3f} (target <= 1.1), floor "
                     f"{on['floor_us_per_call'] / kernel:.3f}, jnp (fused) {on['jnp_us_per_call'] / kernel:.3f}")
        lines.append(f"- without command buffers, time per call / kernel device time: dlstream "
                     f"{off['dlstream_us_per_call'] / kernel:.3f}, floor {off['floor_us_per_call'] / kernel:.3f}")
    lines.append(f"- handler executions: off {off['stats']['executions']}, on {on['stats']['executions']} "
                 "(with command buffers the replays run no handler)")
    lines.append(f"- results match jnp: off {off['dlstream_matches_jnp']}, on {on['dlstream_matches_jnp']}; host rows "
                 f"measured while the device was held: {off.get('dlstream_host_held_ok')} / "
                 f"{off.get('floor_host_held_ok')}")
    return out + "\n\n" + "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--floor", help="path of libdls_jax_floor.so (built in <build>/bench)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--smoke", action="store_true", help="a smoke run (CI: scripts/bench-smoke): a few calls; "
                    "JAX's CPU platform and dlstream's CPU backend where JAX has no CUDA")
    ap.add_argument("--child", choices=sorted(MODES), help=argparse.SUPPRESS)
    ap.add_argument("--cpu-platform", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.smoke:
        args.reps = min(args.reps, 2)
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.floor, args.reps, args.smoke, not args.cpu_platform)),
              flush=True)
        return 0
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the children need the GPU's memory
    try:
        import jax
        gpu = any(d.platform == "gpu" for d in jax.devices())
        why = None if gpu else "JAX sees no GPU"
    except Exception as e:  # noqa: BLE001 - any reason means "not here"
        gpu, why = False, str(e)
    if why is not None and not (args.smoke and "jax" in sys.modules):
        print(f"skipped: JAX with CUDA is not available ({why})")
        return 0
    if why is not None:
        print(f"smoke: {why}: both children on JAX's CPU platform and dlstream's CPU backend; skipped: the floor "
              "handler, the held-device host rows and the kernel's device time (CUDA)")
    elif not args.floor or not os.path.exists(args.floor):
        sys.exit("--floor <build>/bench/libdls_jax_floor.so is needed (cmake --build <build> --target dls_jax_floor)")
    results = {}
    for mode, flags in MODES.items():
        env = dict(os.environ, XLA_FLAGS=flags, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        cmd = [sys.executable, __file__, "--child", mode, "--reps", str(args.reps)]
        cmd += ["--floor", os.path.abspath(args.floor)] if gpu else ["--cpu-platform"]
        cmd += ["--smoke"] if args.smoke else []
        if not gpu:
            env["JAX_PLATFORMS"] = "cpu"
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        lines = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
        if r.returncode != 0 or not lines:
            sys.exit(f"mode {mode} failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        results[mode] = json.loads(lines[-1][len("RESULT "):])
    off, on = results["off"], results["on"]
    print(f"JAX {off['jax']} on {off['device']}; XLA_FLAGS per column: {MODES}\n")
    print(table(off, on))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
