# SPDX-License-Identifier: Apache-2.0
"""The built-ins at memory bandwidth (issue 34 item 5), in one run: GB/s of dls_fill, dls_axpy_f32/f64, dls_copy
(dls_copy_strided, contiguous), strided copies and dls_convert on 2^26 and 2^20 elements, each beside torch's own
operator on the same tensors (fill_, add_, copy_) and beside the device's measured copy bandwidth (torch's copy_ of
2^26 float32: cudaMemcpyAsync device to device). Then, in a child process with XLA's command buffers on,
dls_axpy_f32 through dlstream.jax against XLA's own unfused elementwise op (a * x + y in jnp, one kernel per call).

  python3 bench/bench_bandwidth.py [--json out.json] [--reps 15] [--smoke]

Device time per call: each repetition holds torch's stream with its sleep kernel while the host queues CALLS calls
between two CUDA events, so the events time the calls back to back on the device, not the host's launches; the rows
take turns in every repetition (drift lands on all of them). A figure is the median of the repetitions; the spread
is (max - min) / median. GB/s counts the bytes each call must read and write (a copy of n float32: 8n; an axpy:
12n; a fill: 4n). Targets: on 2^26 elements every built-in at >= 0.9 x the copy bandwidth; on 2^20 elements at
most 1.05 x the time of torch's kernel (and of XLA's, under jax.jit with command buffers).

Without torch's CUDA it prints "skipped: <reason>" and exits 0. --smoke (CI: scripts/bench-smoke): 2^12 elements,
2 repetitions; without CUDA the rows run on dlstream's CPU backend beside NumPy, and the JAX child on JAX's CPU
platform (no command buffers there)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CALLS = 20
SLEEP_S = 0.004
A = 0.5
CMD_BUFFERS = "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"


class Row:
    """One operation: `run()` queues one call; `bytes` it reads and writes; `anchor`: the row it is measured beside."""

    def __init__(self, name, size, nbytes, run, anchor=None, target=None):
        self.name, self.size, self.bytes, self.run, self.anchor, self.target = name, size, nbytes, run, anchor, target
        self.us = []


def gpu_rows(torch, dlstream, n, label):
    """The rows of one size on the GPU: each dlstream call beside torch's own operator on the same tensors."""
    dev = "cuda"
    f32 = torch.rand(n, device=dev)
    y32 = torch.rand(n, device=dev)
    f64, y64 = f32.double(), y32.double()
    h16 = torch.empty(n, dtype=torch.float16, device=dev)
    b16 = torch.empty(n, dtype=torch.bfloat16, device=dev)
    i32 = torch.randint(-1000, 1000, (n,), dtype=torch.int32, device=dev)
    side = int(round(n ** 0.5))
    m2 = f32[:side * side].view(side, side)
    t2 = torch.empty(side, side, device=dev)
    half = torch.empty(n // 2, device=dev)
    r = []

    def pair(name, nbytes, ours, theirs, target):
        anchor = Row(f"torch {name}", label, nbytes, theirs)
        r.append(anchor)
        r.append(Row(f"dlstream {name}", label, nbytes, ours, anchor, target))

    tgt = "bandwidth" if n >= 1 << 26 else "anchor"
    r.append(Row("copy bandwidth: torch copy_ (cudaMemcpyAsync D2D) float32", label, 8 * n,
                 lambda: y32.copy_(f32)))
    pair("fill float32 (fill_)", 4 * n, lambda: dlstream.fill(y32, 1.5), lambda: y32.fill_(1.5), tgt)
    pair("axpy float32 (add_ alpha)", 12 * n, lambda: dlstream.axpy(A, f32, y32), lambda: y32.add_(f32, alpha=A), tgt)
    pair("axpy float64 (add_ alpha)", 24 * n, lambda: dlstream.axpy(A, f64, y64), lambda: y64.add_(f64, alpha=A), tgt)
    pair("copy float32 (copy_)", 8 * n, lambda: dlstream.copy(y32, f32), lambda: y32.copy_(f32), tgt)
    pair("convert float32 -> float16 (copy_)", 6 * n, lambda: dlstream.copy(h16, f32), lambda: h16.copy_(f32), tgt)
    pair("convert float16 -> float32 (copy_)", 6 * n, lambda: dlstream.copy(y32, h16), lambda: y32.copy_(h16), tgt)
    pair("convert float32 -> bfloat16 (copy_)", 6 * n, lambda: dlstream.copy(b16, f32), lambda: b16.copy_(f32), tgt)
    pair("convert int32 -> float32 (copy_)", 8 * n, lambda: dlstream.copy(y32, i32), lambda: y32.copy_(i32), tgt)
    pair("strided copy: every other float32 (copy_)", 8 * (n // 2), lambda: dlstream.copy(half, f32[::2]),
         lambda: half.copy_(f32[::2]), None)
    pair(f"strided copy: transpose {side}x{side} float32 (copy_)", 8 * side * side,
         lambda: dlstream.copy(t2, m2.t()), lambda: t2.copy_(m2.t()), None)
    if n <= 1 << 20:
        r += grid_rows(torch, dlstream, r, n, label, f32, y32)
    return r


# 16-byte vectors a thread of the fast paths moves (plugin/kernels/layout.h: DLS__FILL_VECS, DLS__MOVE_VECS); the
# core's grid gives a block a tile of that many for each of its threads: 256 a block for a fill, 128 for an axpy and
# a contiguous copy (plugin/core/builtin.c: BLOCK, MOVE_BLOCK).
FILL_VECS, MOVE_VECS, CORE_BLOCK, MOVE_BLOCK = 8, 2, 256, 128


def grid_rows(torch, dlstream, rows, n, label, x, y):
    """Small calls are a few microseconds of launch, ramp and tail: fill and axpy through dls_launch on the core's
    grid (a block a tile: 256 threads, each with FILL_VECS or MOVE_VECS 16-byte vectors) and on blocks of 128 and
    512 threads with as many vectors a thread, and on the grid the core used before (a thread per 16 bytes, at most
    what the device holds: 1024 blocks of 256 at 2^20 float32, most of them idle now), each beside torch's kernel,
    to show which launch shape the core should pick."""
    anchors = {row.name: row for row in rows}
    fill, axpy, empty = (dlstream.builtin_function(k, "cuda:0") for k in ("dls_fill", "dls_axpy_f32", "dls_empty"))
    pattern = 0x3fc00000  # 1.5f
    items = n // 4  # 16-byte items of n float32
    core = -(-items // (MOVE_VECS * MOVE_BLOCK))
    # The floor under any kernel of the core's axpy grid: launch, ramp and tail of blocks that do nothing.
    out = [Row(f"dlstream empty kernel, grid {core}x{MOVE_BLOCK} (the floor of the core's axpy grid)", label, 0,
               lambda g=core: empty.launch(g, MOVE_BLOCK), anchors["torch fill float32 (fill_)"], None)]
    shapes = []  # (kernel, grid, block, label)
    for name, per in (("fill", FILL_VECS), ("axpy", MOVE_VECS)):
        for block in (128, CORE_BLOCK, 512):
            grid = -(-items // (per * block))
            core_s = " (the core's)" if block == (CORE_BLOCK if name == "fill" else MOVE_BLOCK) else ""
            shapes.append((name, grid, block, f"grid {grid}x{block}{core_s}, {per} x 16 bytes a thread"))
        before = max(1, items // 256)
        shapes.append((name, before, 256, f"grid {before}x256 (the core's before: a thread per 16 bytes)"))
    for name, grid, block, shape in shapes:
        if name == "fill":
            out.append(Row(f"dlstream fill float32 (fill_), {shape}", label, 4 * n,
                           lambda g=grid, b=block: fill.launch(g, b, y, n, 4, pattern),
                           anchors["torch fill float32 (fill_)"], "anchor"))
        else:
            out.append(Row(f"dlstream axpy float32 (add_ alpha), {shape}", label, 12 * n,
                           lambda g=grid, b=block: axpy.launch(g, b, n, A, x, y),
                           anchors["torch axpy float32 (add_ alpha)"], "anchor"))
    return out


def cpu_rows(dlstream, np, n, label):
    """Smoke without CUDA: the same calls on dlstream's CPU backend beside NumPy."""
    x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    h = np.empty(n, np.float16)
    r = [Row("copy bandwidth: np.copyto float32", label, 8 * n, lambda: np.copyto(y, x))]

    def pair(name, nbytes, ours, theirs):
        anchor = Row(f"numpy {name}", label, nbytes, theirs)
        r.extend([anchor, Row(f"dlstream {name}", label, nbytes, ours, anchor, None)])

    pair("fill float32", 4 * n, lambda: dlstream.fill(y, 1.5), lambda: y.fill(1.5))
    pair("axpy float32", 12 * n, lambda: dlstream.axpy(A, x, y), lambda: np.add(y, A * x, out=y))
    pair("copy float32", 8 * n, lambda: dlstream.copy(y, x), lambda: np.copyto(y, x))
    pair("convert float32 -> float16", 6 * n, lambda: dlstream.copy(h, x), lambda: np.copyto(h, x))
    return r


def measure_gpu(torch, rows, reps):
    from gpubench import sleep_cycles
    cycles = sleep_cycles(torch, SLEEP_S)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for row in rows:  # warm-up: loads every kernel, settles the clocks
        for _ in range(3):
            row.run()
    torch.cuda.synchronize()
    for _ in range(reps):
        for row in rows:
            torch.cuda._sleep(cycles)  # the device waits while the host queues the calls
            e0.record()
            for _ in range(CALLS):
                row.run()
            e1.record()
            e1.synchronize()
            row.us.append(e0.elapsed_time(e1) * 1e3 / CALLS)


def measure_cpu(dlstream, rows, reps):
    for _ in range(reps + 1):
        for row in rows:
            t0 = time.perf_counter()
            for _ in range(CALLS):
                row.run()
            dlstream.synchronize("cpu")
            row.us.append((time.perf_counter() - t0) * 1e6 / CALLS)
    for row in rows:
        row.us = row.us[1:]  # the first round warmed up


def stats(rows, copy_gbps):
    out = []
    for row in rows:
        med = statistics.median(row.us)
        d = {"name": row.name, "size": row.size, "bytes": row.bytes, "us": row.us, "median_us": med,
             "spread": (max(row.us) - min(row.us)) / med if med else 0.0, "GBps": row.bytes / med / 1e3 if med else 0,
             "of_copy_bandwidth": (row.bytes / med / 1e3) / copy_gbps if med and copy_gbps else None}
        if row.anchor is not None:
            am = statistics.median(row.anchor.us)
            d["anchor"] = row.anchor.name
            d["x_anchor_time"] = med / am if am else None
            d["target"] = row.target
        out.append(d)
    return out


# ---- XLA: a chain of calls under jax.jit, in a child with command buffers ----

def jax_child(n, reps, smoke):
    import jax
    import jax.numpy as jnp

    import dlstream
    import dlstream.jax as dj

    gpu = any(d.platform == "gpu" for d in jax.devices())
    dev = "cuda:0" if gpu else "cpu"
    fn = dlstream.builtin_function("dls_axpy_f32", dev)
    calls = 4 if smoke else 100
    # grid=None: the handler runs the built-in as dlstream's own calls do (its vector twin here); the grid of the
    # built-in's tiles in dlstream's own calls (a block a tile: MOVE_BLOCK threads, each with MOVE_VECS vectors of 4
    # floats); a thread per element (most blocks find no tile): (grid, block).
    grids = {"grid=None": None, "core grid": (-(-n // (4 * MOVE_VECS * MOVE_BLOCK)), MOVE_BLOCK),
             "a thread per element": (-(-n // 256), 256)}
    kernels = {k: dj.kernel(fn, in_place=[3], grid=None) if gb is None else
               dj.kernel(fn, in_place=[3], grid=gb[0], block=gb[1]) for k, gb in grids.items()}

    def dls_chain(k):
        def chain(x, y):
            for _ in range(calls):
                y = k(n, A, x, y)
            return y
        return chain

    def jnp_chain(x, y):  # XLA's own op, one kernel a call: the barrier keeps XLA from fusing the chain
        for _ in range(calls):
            y = A * x + y
            x, y = jax.lax.optimization_barrier((x, y))
        return y

    chains = {f"dlstream.jax dls_axpy_f32 ({k})": dls_chain(kern) for k, kern in kernels.items()}
    chains["XLA a * x + y (jnp, unfused)"] = jnp_chain
    x = jnp.linspace(0, 1, n, dtype=jnp.float32)
    res = {"jax": jax.__version__, "device": jax.devices()[0].device_kind, "xla_flags": os.environ.get("XLA_FLAGS", ""),
           "grids": grids, "rows": {}}
    runs = 2 if smoke else 20
    steps = {name: jax.jit(chain, donate_argnums=1) for name, chain in chains.items()}
    ys = {name: jnp.zeros(n, jnp.float32) for name in steps}
    for name, step in steps.items():
        for _ in range(3):
            ys[name] = step(x, ys[name])
        jax.block_until_ready(ys[name])
    samples = {name: [] for name in steps}
    for _ in range(reps):
        for name, step in steps.items():
            y = ys[name]
            t0 = time.perf_counter()
            for _ in range(runs):
                y = step(x, y)
            jax.block_until_ready(y)
            samples[name].append((time.perf_counter() - t0) * 1e6 / (runs * calls))
            ys[name] = y
    for name, us in samples.items():
        med = statistics.median(us)
        res["rows"][name] = {"us": us, "median_us": med, "spread": (max(us) - min(us)) / med, "GBps": 12 * n / med / 1e3}
    want = jax.jit(jnp_chain)(x, jnp.zeros(n, jnp.float32))
    res["dlstream_matches_jnp"] = all(bool(jnp.allclose(jax.jit(dls_chain(k))(x, jnp.zeros(n, jnp.float32)), want,
                                                        rtol=1e-5)) for k in kernels.values())
    res["handler_executions"] = dlstream._dlstream._xla_stats()["executions"]
    return res


def run_jax_child(n, reps, smoke, cpu):
    env = dict(os.environ, XLA_FLAGS=CMD_BUFFERS, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if cpu:
        env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.abspath(__file__), "--jax-child", str(n), "--reps", str(reps)]
    cmd += ["--smoke"] if smoke else []
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        return {"error": f"rc {r.returncode}: {r.stderr[-3000:]}"}
    return json.loads(lines[-1][len("RESULT "):])


# ---- the report ----

def table(rows, jax_results):
    lines = ["| size | operation | µs per call | GB/s | × copy bandwidth | × anchor's time | spread |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for d in rows:
        ofc = "—" if d["of_copy_bandwidth"] is None else f"{d['of_copy_bandwidth']:.3f}"
        xa = "—" if d.get("x_anchor_time") is None else f"{d['x_anchor_time']:.3f}"
        lines.append(f"| {d['size']} | {d['name']} | {d['median_us']:.3f} | {d['GBps']:.1f} | {ofc} | {xa} | "
                     f"{d['spread'] * 100:.0f}% |")
    out = ["\n".join(lines), ""]
    for d in rows:
        if d.get("target") == "bandwidth":
            ok = d["of_copy_bandwidth"] >= 0.9
            out.append(f"- {d['size']} {d['name']}: {d['of_copy_bandwidth']:.3f} x the copy bandwidth (target >= 0.9: "
                       f"{'met' if ok else 'MISSED'})")
        elif d.get("target") == "anchor":
            ok = d["x_anchor_time"] <= 1.05
            out.append(f"- {d['size']} {d['name']}: {d['x_anchor_time']:.3f} x {d['anchor']}'s time (target <= 1.05: "
                       f"{'met' if ok else 'MISSED'})")
    for size, res in jax_results.items():
        if "error" in res:
            out.append(f"- jax {size}: the child failed: {res['error']}")
            continue
        xla = res["rows"].get("XLA a * x + y (jnp, unfused)")
        out.append(f"\nXLA ({res['device']}, JAX {res['jax']}, {res['xla_flags'] or 'no flags'}), {size} float32, "
                   f"grids {res['grids']}; handler executions {res['handler_executions']}; results match jnp: "
                   f"{res['dlstream_matches_jnp']}")
        for name, r in res["rows"].items():
            ratio = f", {r['median_us'] / xla['median_us']:.3f} x XLA's time (target <= 1.05)" \
                if xla and name != "XLA a * x + y (jnp, unfused)" else ""
            out.append(f"- {name}: {r['median_us']:.3f} µs per call, {r['GBps']:.1f} GB/s, spread "
                       f"{r['spread'] * 100:.0f}%{ratio}")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here (bench/results/ for a run on the reference GPU)")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--smoke", action="store_true", help="a smoke run (CI: scripts/bench-smoke): 2^12 elements, 2 "
                    "repetitions; dlstream's CPU backend beside NumPy where torch has no CUDA")
    ap.add_argument("--jax-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--no-jax", action="store_true", help="skip the XLA rows")
    args = ap.parse_args()
    if args.smoke:
        args.reps = min(args.reps, 2)
    if args.jax_child:
        print("RESULT " + json.dumps(jax_child(args.jax_child, args.reps, args.smoke)), flush=True)
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np

    import dlstream
    try:
        import torch
        cuda = torch.cuda.is_available() and dlstream.device_count("cuda") > 0
    except ImportError:
        torch, cuda = None, False
    if not cuda and not args.smoke:
        print("skipped: torch with CUDA and a CUDA device for dlstream are needed (--smoke runs on the CPU)")
        return 0
    sizes = {"2^12": 1 << 12} if args.smoke else {"2^26": 1 << 26, "2^20": 1 << 20}
    rows = []
    for label, n in sizes.items():
        rows += gpu_rows(torch, dlstream, n, label) if cuda else cpu_rows(dlstream, np, n, label)
    if cuda:
        measure_gpu(torch, rows, args.reps)
        device = torch.cuda.get_device_name()
    else:
        print("smoke: no CUDA here: dlstream's CPU backend beside NumPy; JAX on its CPU platform")
        measure_cpu(dlstream, rows, args.reps)
        device = "cpu"
    copy_row = rows[0]
    copy_gbps = copy_row.bytes / statistics.median(copy_row.us) / 1e3
    result = {"device": device, "calls_per_sample": CALLS, "reps": args.reps, "copy_GBps": copy_gbps,
              "rows": stats(rows, copy_gbps)}
    jax_results = {}
    if not args.no_jax:
        try:
            import jax  # noqa: F401 - only whether it is there
            for label, n in ({"2^12": 1 << 12} if args.smoke else {"2^20": 1 << 20, "2^26": 1 << 26}).items():
                jax_results[label] = run_jax_child(n, args.reps, args.smoke, not cuda)
        except ImportError:
            print("skipped: the XLA rows (JAX is not installed)")
    result["xla"] = jax_results
    print(f"{device}: measured copy bandwidth {copy_gbps:.1f} GB/s (bytes read and written)\n")
    print(table(result["rows"], jax_results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
