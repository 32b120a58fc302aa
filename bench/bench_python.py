# SPDX-License-Identifier: Apache-2.0
"""dlstream from Python beside its anchors (docs/benchmarks.md), in one run: host time per call, median of
repetitions after warm-up. Prints a Markdown table (with ratios) and writes JSON with --json FILE.

  python3 bench/bench_python.py [--json out.json] [--reps 9] [--calls 10000] [--pairs 300] [--pair-calls 500]
                                [--cpu] [--smoke]

The launch rows above the C floor (cuLaunchKernel of the same kernel looped in C in this process) are measured in
pairs (gpubench.measure_pairs): --pairs pairs of a loop of --pair-calls launches and a loop of as many floor
launches, back to back, the order alternating, the device drained after each outside its timing; the row is the
median of the pairs' differences, printed after the table with its IQR and the 95 % confidence interval of that
median. Needs torch with CUDA; CuPy, cuda.core and cuda.bindings add their rows when present. Without CUDA or torch it
prints "skipped: <reason>" and exits 0. --cpu measures dlstream's own CPU-side cost with the CPU backend. --smoke
(CI: scripts/bench-smoke) runs the CPU rows with a few calls, then the GPU rows likewise: on the GPU where torch has
CUDA, else on the null CUDA driver (bench/null_driver.c on LD_LIBRARY_PATH) with fake tensors, else it says it
skipped them. With the null driver on LD_LIBRARY_PATH the GPU rows run on it without --smoke too (dlstream's host
cost beside the null driver's: how the paired method's spread is checked without a GPU)."""
import ctypes
import json
import statistics
import sys
import time

from gpubench import (arguments, fmt_spread, measure, measure_interleaved, measure_loop, measure_loop_few,
                      measure_paired, paired_row, slope)
from launch_anchors import AXPY_SRC, cuda_core_row, cupy_stream_rows, empty_ptx, raw_launch_row




class GpuKit:
    """What the GPU rows take from torch: CUDA tensors, the device's sync, the current stream's pointer. Without
    torch (--smoke on the null CUDA driver, bench/null_driver.c: scripts/bench-smoke), FakeTensors of the test
    suite's _dls_fake_exchange at made-up CUDA addresses (they publish the DLPack exchange API, as torch's do) and
    dlstream's sync: every dlstream call of the rows runs, nothing runs on a GPU, the rows that need torch itself
    are skipped, and the figures mean nothing."""

    def __init__(self, torch):
        self.torch = torch
        self._ptrs = {}
        self.spreads = {}  # the paired rows' spreads (gpubench.spread), by tag

    def tensor(self, n, value):
        if self.torch is not None:
            return self.torch.full((n,), value, device="cuda")
        import _dls_fake_exchange as fx
        ptr = 0x7f0000000000 + len(self._ptrs) * 0x100000
        t = fx.FakeTensor(None, ptr, (n,), device_type=2)
        self._ptrs[id(t)] = (t, ptr)
        return t

    def ptr(self, t):
        return t.data_ptr() if self.torch is not None else self._ptrs[id(t)][1]

    def sync(self):
        if self.torch is not None:
            self.torch.cuda.synchronize()
        else:
            import dlstream
            dlstream.synchronize("cuda:0")

    def current_stream(self):
        return self.torch.cuda.current_stream().cuda_stream if self.torch is not None else 0


def gpu_rows(args, kit):
    import dlstream
    torch = kit.torch

    rows = []
    N = 1024
    calls, reps = args.calls, args.reps
    x = kit.tensor(N, 1.0)
    y = kit.tensor(N, 0.0)
    sync = kit.sync
    axpy = dlstream.builtin_function("dls_axpy_f32", "cuda:0")  # u64,f32,cp,p
    launch = axpy.launch

    def dl_loop(n):
        for _ in range(n):
            launch(4, 256, N, 1.0, x, y)

    # the floor: cuLaunchKernel of the same kernel with the same arguments, looped in C in this process,
    # interleaved with the launch loop (the overhead target is their paired difference)
    cur = kit.current_stream()
    raw_c = dlstream._dlstream._bench_raw_axpy

    def raw_c_loop(n):
        raw_c(cur, kit.ptr(x), kit.ptr(y), N, n)

    # each launch-above-the-floor row: pairs of short loops (gpubench.measure_pairs), the median of the pairs'
    # differences with its spread (kit.spreads: printed after the table, and in the JSON)
    def paired(fa, fb, tag):
        r = paired_row(fa, fb, args.pair_calls, args.pairs, sync)
        kit.spreads[tag] = r["diff"]
        return r["a"], r["b"], r["diff"]["median"]

    t_launch, t_raw, t_over = paired(dl_loop, raw_c_loop, "over")
    rows.append(("dlstream launch: axpy, 2 torch tensors + 2 scalars, torch's current stream", t_launch, "launch"))
    rows.append(("raw cuLaunchKernel from C, same kernel and arguments (the floor)", t_raw, "raw"))
    rows.append(("the launch above the floor (median of the paired loops' differences)", t_over, "over"))

    # the same launches looped from C (dlstream._dlstream._bench_loop, what scripts/callgrind-python counts): the
    # interpreter's `for` around each launch left out, its call of the launch kept
    bench_loop = dlstream._dlstream._bench_loop
    launch_args = (4, 256, N, 1.0, x, y)

    def dl_cloop(n):
        bench_loop(launch, launch_args, n)

    t_cl, _, t_over_cl = paired(dl_cloop, raw_c_loop, "over_cloop")
    rows.append(("the same launch looped from C (_bench_loop: no interpreter loop around it)", t_cl, "launch_cloop"))
    rows.append(("that launch above the floor (median of the paired loops' differences)", t_over_cl, "over_cloop"))

    # the same with other tensors at each call (two pairs in turn): a planned built-in checks its arguments again
    # whenever its tensors' pointers or extents differ from those that passed last
    x2, y2 = kit.tensor(N, 1.0), kit.tensor(N, 0.0)

    def dl_alt_loop(n):
        for _ in range(n // 2):
            launch(4, 256, N, 1.0, x, y)
            launch(4, 256, N, 1.0, x2, y2)

    t_alt, _, t_over_alt = paired(dl_alt_loop, raw_c_loop, "over_alt")
    rows.append(("dlstream launch as above, two pairs of tensors in turn (the argument check runs at each call)",
                 t_alt, "launch_alt"))
    rows.append(("that launch above the floor (median of the paired loops' differences)", t_over_alt,
                 "over_alt"))

    def raw_c_torch_loop(n):
        raw_c(0, x, y, N, n)

    # the same floor with torch's part of any launcher that takes torch tensors on torch's current stream: both
    # tensors read and the current stream asked through the DLPack exchange API at each launch
    t_launch2, t_raw_torch, t_over_torch = paired(dl_loop, raw_c_torch_loop, "over_torch")
    rows.append(("raw cuLaunchKernel from C, after reading both tensors and torch's current stream (exchange API)",
                 t_raw_torch, "raw_torch"))
    rows.append(("the launch above that floor (median of the paired loops' differences)", t_over_torch,
                 "over_torch"))

    if torch is not None:
        def torch_loop(n):
            for _ in range(n):
                y.add_(x)

        rows.append(("torch in-place add, 1,024 floats", measure_loop(torch_loop, calls, reps, sync), None))

        # the same through ctypes, for reference (ctypes adds its own call cost)
        raw = raw_launch_row(axpy, x, y, N, calls, reps, sync)
        if raw:
            rows.append((raw[0], raw[1], None))
        rows.extend(framework_rows(args, torch, x, y, N, sync))

    # import of a torch CUDA tensor
    from_dlpack = dlstream.from_dlpack

    def import_loop(n):
        for _ in range(n):
            from_dlpack(x).close()

    rows.append(("dlstream.from_dlpack(torch tensor) (capsule path, incl. close)",
                 measure_loop(import_loop, calls, reps, sync), None))
    if torch is not None:
        rows.append(("x.__dlpack__(stream=1) on a torch CUDA tensor",
                     measure(lambda: x.__dlpack__(stream=1), calls, reps), None))
        rows.append(("torch.from_dlpack(torch tensor)", measure(lambda: torch.from_dlpack(x), calls, reps), None))

    # the exchange-API import alone: an empty kernel launched with one torch tensor argument, minus one without
    none = dlstream.Module(empty_ptx(0).encode(), device="cuda:0").function("touch")
    one = dlstream.Module(empty_ptx(1).encode(), device="cuda:0").function("touch", "p")
    base = measure(lambda: none.launch(1, 1), calls, reps, sync)
    with1 = measure(lambda: one.launch(1, 1, x), calls, reps, sync)
    rows.append(("a launch's extra cost per torch tensor argument (launch with one - without)",
                 max(with1 - base, 0.0), None))
    bench_import = dlstream._dlstream._bench_exchange_import

    def import_c_loop(n):
        bench_import(x, n)

    rows.append(("import of a torch CUDA tensor via the exchange API (read + current stream, C loop)",
                 measure_loop(import_c_loop, calls * 10, reps), "import"))

    # scaling: launch cost against the number of torch tensor arguments (an empty kernel of N pointers)
    tensors = [kit.tensor(256, 0.0) for _ in range(16)]
    counts, loops = (1, 2, 4, 8, 16), []
    for n in counts:
        mod = dlstream.Module(empty_ptx(n).encode(), device="cuda:0")
        fn = mod.function("touch", ",".join(["p"] * n))

        def touch_loop(k, fn=fn, targs=tensors[:n]):
            for _ in range(k):
                fn.launch(1, 32, *targs)

        loops.append(touch_loop)
    # interleaved, and the slope taken in each repetition: its median is the cost of one more tensor
    samples = measure_interleaved(loops, calls, max(reps, 15), sync)
    for n, ts in zip(counts, samples):
        rows.append((f"scaling: launch of an empty kernel with {n} torch tensor argument{'s' if n > 1 else ''}",
                     statistics.median(ts), f"args{n}"))
    rows.append(("each extra torch tensor argument (median of the repetitions' slopes over 1 to 16 tensors)",
                 statistics.median(slope(counts, rep) for rep in zip(*samples)), "slope"))

    # events
    s1, s2 = dlstream.Stream("cuda:0"), dlstream.Stream("cuda:0")
    ev = dlstream.Event(device="cuda:0")
    rec, wait = ev.record, s2.wait

    def ev_loop(n):
        for _ in range(n):
            rec(s1)
            wait(ev)

    rows.append(("dlstream event record + cross-stream wait", measure_loop(ev_loop, calls, reps, sync), "event"))
    if torch is not None:
        rows.append(("torch.cuda.Event().record()", measure(lambda: torch.cuda.Event().record(), calls, reps, sync),
                     None))
        rows.append(("torch.cuda.current_stream()", measure(torch.cuda.current_stream, calls, reps), None))
        ptr = s1.ptr
        rows.append(("torch.cuda.ExternalStream(ptr)", measure(lambda: torch.cuda.ExternalStream(ptr), calls, reps),
                     None))
        rows.append(("dlstream.Stream.wrap(torch stream) + close",
                     measure(lambda: dlstream.Stream.wrap(torch.cuda.current_stream()).close(), calls, reps), None))
    sync()
    ev.close()
    s1.close()
    s2.close()
    rows.extend(alloc_rows(args, torch, sync))
    rows.extend(source_rows(args, kit, x, y, N, sync))
    return rows


def alloc_rows(args, torch, sync):
    """The caching allocator beside torch's: 1 MiB allocated and freed again at once on cuda:0's current stream
    (dlstream's legacy default stream, torch's default stream), interleaved; torch's is the anchor."""
    import dlstream
    empty, n_floats = dlstream.empty, 1 << 18

    def dls_loop(n):
        for _ in range(n):
            empty(n_floats, "float32", device="cuda:0").close()

    if torch is None:
        return [("dlstream.empty(1 MiB) + close (the caching allocator)",
                 measure_loop(dls_loop, args.calls, args.reps, sync), "alloc")]

    def torch_loop(n):
        for _ in range(n):
            t = torch.empty(n_floats, dtype=torch.float32, device="cuda")
            del t

    t_dls, t_torch, t_over = measure_paired(dls_loop, torch_loop, args.calls, max(args.reps, 15), sync)
    return [("dlstream.empty(1 MiB) + close (the caching allocator)", t_dls, "alloc"),
            ("torch.empty(1 MiB) + del (torch's caching allocator, the anchor)", t_torch, "torch_alloc"),
            ("dlstream's above torch's (median of the interleaved pairs' differences; <= 0 meets the target)", t_over,
             "alloc_over")]


def framework_rows(args, torch, x, y, N, sync):
    """CuPy's RawKernel (on its arrays, inside its stream, on torch tensors) and cuda.core's launch, where present."""
    rows = []
    calls, reps = args.calls, args.reps
    try:
        import cupy
        k = cupy.RawKernel(AXPY_SRC, "axpy")
        cx = cupy.ones(N, dtype=cupy.float32)
        cy = cupy.zeros(N, dtype=cupy.float32)
        a32, n64 = cupy.float32(1.0), cupy.uint64(N)

        def cupy_loop(n):
            for _ in range(n):
                k((4,), (256,), (n64, a32, cx, cy))

        rows.append(("CuPy RawKernel, CuPy arrays", measure_loop(cupy_loop, calls, reps, cupy.cuda.Device().synchronize),
                     None))
        rows.extend(cupy_stream_rows(args, k, cx, cy, N))

        def cupy_torch_loop(n):
            for _ in range(n):
                with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                    k((4,), (256,), (n64, a32, x.data_ptr(), y.data_ptr()))

        rows.append(("CuPy RawKernel on torch tensors via data_ptr() in ExternalStream",
                     measure_loop(cupy_torch_loop, calls, reps, sync), None))
    except Exception as e:  # noqa: BLE001
        print(f"note: CuPy rows skipped: {e}", file=sys.stderr)

    try:
        rows.append(cuda_core_row(x, y, N, calls, reps, sync))
    except Exception as e:  # noqa: BLE001
        print(f"note: cuda.core row skipped: {e}", file=sys.stderr)
    return rows


def source_rows(args, kit, x, y, N, sync):
    """Kernels from source beside CuPy (cache hit, first compile), Triton's launcher on the same axpy, and a
    torch.library custom op whose body is one dlstream launch. Rows whose framework is missing are skipped."""
    import dlstream
    rows = []
    calls, reps = args.calls, args.reps
    grid, block = (N + 255) // 256, 256

    # compile-cache hit, side by side: make the kernel object from the same source again, then launch it once
    def dls_hit(n):
        for _ in range(n):
            dlstream.Module.from_source(AXPY_SRC, device="cuda:0").function("axpy", "u64,f32,cp,p").launch(
                grid, block, N, 1.0, x, y)

    dls_hit(1)  # the first call compiles (or reads the disk cache)
    rows.append(("compile-cache hit + first launch: dlstream Module.from_source(src).function().launch()",
                 measure_loop(dls_hit, max(calls // 10, 200), reps, sync), "src_hit"))
    rows.append(("compile-cache hit: dlstream.compile(src, 'sm_XY') (in-process image cache, no GPU work)",
                 measure(lambda: dlstream.compile(AXPY_SRC, "sm_80"), max(calls // 10, 200), reps), None))
    try:
        import cupy
        cx, cy = cupy.ones(N, dtype=cupy.float32), cupy.zeros(N, dtype=cupy.float32)
        a32, n64 = cupy.float32(1.0), cupy.uint64(N)

        def cupy_hit(n):
            for _ in range(n):
                cupy.RawKernel(AXPY_SRC, "axpy")((grid,), (block,), (n64, a32, cx, cy))

        cupy_hit(1)
        rows.append(("compile-cache hit + first launch: CuPy RawKernel(src, 'axpy')(...)",
                     measure_loop(cupy_hit, max(calls // 10, 200), reps, cupy.cuda.Device().synchronize), "cupy_hit"))
    except Exception as e:  # noqa: BLE001
        print(f"note: CuPy compile-cache row skipped: {e}", file=sys.stderr)

    # first compile (no cache can help: a new source each time), in µs; a few repetitions
    few = 1 if args.smoke else 5
    counter = [0]

    def fresh_src():
        counter[0] += 1
        return AXPY_SRC + f"// {time.time_ns()} {counter[0]}\n"

    def dls_first(n):
        for _ in range(n):
            dlstream.Module.from_source(fresh_src(), device="cuda:0").function("axpy")

    rows.append(("first compile + load: dlstream Module.from_source (NVRTC, new source)",
                 measure_loop_few(dls_first, few, min(reps, 5)), None))
    try:
        import cupy

        def cupy_first(n):
            for _ in range(n):
                k = cupy.RawKernel(fresh_src(), "axpy")
                k((1,), (1,), (cupy.uint64(0), cupy.float32(0), cx, cy))

        rows.append(("first compile + load: CuPy RawKernel (new source)",
                     measure_loop_few(cupy_first, few, min(reps, 5)), None))
    except Exception as e:  # noqa: BLE001
        print(f"note: CuPy first-compile row skipped: {e}", file=sys.stderr)

    if kit.torch is None:
        return rows
    # Triton's launcher on the same axpy
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def tri_axpy(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(y_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

        def tri_loop(n):
            for _ in range(n):
                tri_axpy[(grid,)](x, y, 1.0, N, BLOCK=256)

        rows.append(("Triton launch of the same axpy (kernel[(grid,)](x, y, a, n, BLOCK=256))",
                     measure_loop(tri_loop, calls, reps, sync), None))
    except Exception as e:  # noqa: BLE001
        print(f"note: Triton row skipped: {e}", file=sys.stderr)

    # a torch.library custom op whose body is one dlstream launch
    try:
        import torch
        launch = dlstream.builtin_function("dls_axpy_f32", "cuda:0").launch

        @torch.library.custom_op("dlstream_bench::axpy", mutates_args=("yt",))
        def dls_op(a: float, xt: torch.Tensor, yt: torch.Tensor) -> None:
            launch(grid, block, xt.numel(), a, xt, yt)

        def op_loop(n):
            for _ in range(n):
                dls_op(1.0, x, y)

        rows.append(("torch.library.custom_op whose body is one dlstream launch",
                     measure_loop(op_loop, calls, reps, sync), None))
    except Exception as e:  # noqa: BLE001
        print(f"note: torch.library custom-op row skipped: {e}", file=sys.stderr)
    return rows


def cpu_rows(args):
    """dlstream's own CPU-side cost, CPU backend: NumPy arrays (capsule path) and the fake exchange-API type."""
    import numpy as np

    import dlstream
    rows = []
    calls, reps = args.calls, args.reps
    axpy = dlstream.builtin_function("dls_axpy_f32", "cpu")
    x = np.ones(1024, np.float32)
    y = np.zeros(1024, np.float32)
    s = dlstream.current_stream("cpu")
    try:
        import _dls_fake_exchange as fx
        fxx, fyy = fx.FakeTensor(x, x.ctypes.data, x.shape), fx.FakeTensor(y, y.ctypes.data, y.shape)
        launch = axpy.launch

        def fast(n):
            for _ in range(n):
                launch(4, 256, 1024, 0.0, fxx, fyy)

        rows.append(("CPU backend: launch, 2 exchange-API tensors + 2 scalars", measure_loop(fast, calls, reps,
                                                                                              s.synchronize), None))
    except ImportError:
        print("note: build the tests to get _dls_fake_exchange (PYTHONPATH=<build>/python)", file=sys.stderr)
    spin = dlstream.builtin_function("dls_spin", "cpu", signature="u64")
    rows.append(("CPU backend: launch, 1 scalar (queueing cost of the CPU backend)",
                 measure(lambda: spin.launch(1, 1, 0), calls, reps, s.synchronize), None))
    rows.append(("CPU backend: launch, 2 NumPy arrays + 2 scalars (capsule path)",
                 measure(lambda: axpy.launch(4, 256, 1024, 0.0, x, y), max(calls // 10, 500), reps, s.synchronize),
                 None))
    a, b = dlstream.Stream("cpu"), dlstream.Stream("cpu")
    ev = dlstream.Event(device="cpu")
    rows.append(("CPU backend: event record + cross-stream wait",
                 measure(lambda: (ev.record(a), b.wait(ev)), calls, reps, b.synchronize), None))
    rows.append(("dlstream.from_dlpack(numpy) + close", measure(lambda: dlstream.from_dlpack(x).close(), calls, reps),
                 None))
    b.synchronize()
    for o in (ev, a, b):
        o.close()
    return rows


def table(rows, title):
    raw = next((t for _, t, tag in rows if tag == "raw"), None)
    print(f"### {title}\n")
    print("| operation | µs per call | × raw cuLaunchKernel |" if raw else "| operation | µs per call |")
    print("| --- | --- | --- |" if raw else "| --- | --- |")
    for name, t, _ in rows:
        print(f"| {name} | {t:.2f} | {t / raw:.2f} |" if raw else f"| {name} | {t:.3f} |")
    print()


def launch_targets(tags):
    """The launch targets of issues 13 and 12 (docs/benchmarks.md), met or missed in this run; printed, and returned
    for the JSON as {key: {"what", "value", "limit", "met"}}: overhead above the C floor for 2 torch tensors + 2
    scalars, each extra torch tensor, and a launch on CuPy arrays inside `with cupy.cuda.Stream()` against CuPy's
    RawKernel on the same arrays and stream."""
    checks = {}
    if "over" in tags:
        checks["launch_overhead_us"] = ("overhead above raw cuLaunchKernel, axpy, 2 torch tensors + 2 scalars, µs",
                                        tags["over"], 0.4)
    if "over_torch" in tags:
        checks["launch_overhead_torch_us"] = ("the same above the floor that reads the tensors and the stream from "
                                              "torch (dlstream's own part), µs", tags["over_torch"], 0.4)
    if "slope" in tags:
        checks["per_tensor_us"] = ("each extra torch tensor argument (slope of the scaling rows), µs", tags["slope"],
                                   0.1)
    if "cupy_stream" in tags and "cupy_stream_raw" in tags:
        checks["cupy_over_rawkernel"] = ("CuPy arrays in `with cupy.cuda.Stream()`: dlstream / CuPy RawKernel",
                                         tags["cupy_stream"] / tags["cupy_stream_raw"], 1.0)
    out = {}
    if checks:
        print("\n### Launch targets\n")
        print("| target | measured | limit | |")
        print("| --- | ---: | ---: | --- |")
        for key, (what, value, limit) in checks.items():
            out[key] = {"what": what, "value": value, "limit": limit, "met": value <= limit}
            print(f"| {what} | {value:.3f} | {limit} | {'met' if value <= limit else 'MISSED'} |")
        print()
    return out


def null_driver():
    """Whether the libcuda.so.1 this process loads is the null CUDA driver (bench/null_driver.c)."""
    try:
        return hasattr(ctypes.CDLL("libcuda.so.1"), "dls_null_stats")
    except OSError:
        return False


def gpu_kit(dlstream, smoke, result):
    """The GPU rows' kit: torch's with CUDA; for --smoke on the null CUDA driver without it, the fakes; else None,
    saying why."""
    try:
        import torch
        why = None if torch.cuda.is_available() and dlstream.device_count("cuda") > 0 else \
            "no CUDA device for torch (" + (dlstream.backend_available("cuda")[1] or "torch has no CUDA") + ")"
    except ImportError:
        why = "torch is not installed"
    if why is None:
        result["device"] = torch.cuda.get_device_name()
        result["torch"] = torch.__version__
        return GpuKit(torch)
    if null_driver() and dlstream.device_count("cuda") > 0:
        try:
            import _dls_fake_exchange  # noqa: F401
            print(f"{'smoke: ' if smoke else ''}{why}: the GPU rows run on the null CUDA driver with fake tensors "
                  "(nothing runs on a GPU; the figures are dlstream's host cost beside the null driver's; the rows "
                  "that need torch are skipped)")
            result["device"] = "null CUDA driver (smoke)"
            return GpuKit(None)
        except ImportError:
            why += "; no _dls_fake_exchange (build the tests, PYTHONPATH=<build>/python)"
    print(("smoke: skipped the GPU rows: " if smoke else "skipped: ") + why)
    return None


def gpu_summary(rows, result):
    """The GPU rows' table, the ratios to their anchors and the launch targets (into result too)."""
    table(rows, f"dlstream beside the anchors on {result['device']}")
    tags = {tag: t for _, t, tag in rows if tag}
    if "raw" in tags and "launch" in tags:
        ratio = tags["launch"] / tags["raw"]
        print(f"launch / raw cuLaunchKernel = {ratio:.2f}")
        result["launch_over_raw"] = ratio
    if "import" in tags:
        print(f"exchange-API import = {tags['import']:.3f} µs (target <= 0.15)")
    if "event" in tags:
        print(f"event record + wait = {tags['event']:.3f} µs (target <= 1)")
    if "alloc" in tags and "torch_alloc" in tags:
        ratio = tags["alloc"] / tags["torch_alloc"]
        print(f"dlstream.empty + close / torch.empty + del = {ratio:.2f} (target <= 1)")
        result["alloc_over_torch"] = ratio
    if "src_hit" in tags and "cupy_hit" in tags:
        print(f"compile-cache hit: dlstream {tags['src_hit']:.2f} µs, CuPy {tags['cupy_hit']:.2f} µs "
              f"(target: dlstream <= CuPy)")
    result["targets"] = launch_targets(tags)


def main():
    args = arguments(__doc__, 9, 10000, "measure the CPU backend (no GPU needed)", pairs=300)
    try:
        import dlstream
    except ImportError as e:
        print(f"skipped: dlstream is not importable ({e}); set PYTHONPATH=<build>/python")
        return 0
    result = {"reps": args.reps, "calls": args.calls, "rows": []}
    rows = []
    if args.cpu or args.smoke:
        rows = cpu_rows(args)
        table(rows, "dlstream, CPU backend")
    if not args.cpu:
        kit = gpu_kit(dlstream, args.smoke, result)
        if kit is not None:
            gpu = gpu_rows(args, kit)
            gpu_summary(gpu, result)
            print(f"\n### The paired rows ({args.pairs} pairs of {args.pair_calls} calls): the pairs' differences, "
                  "µs per call\n")
            for tag, d in kit.spreads.items():
                print(f"- {tag}: {fmt_spread(d, ' µs', 3)}")
            result["paired"] = kit.spreads
            rows += gpu
    result["rows"] = [{"name": n, "us": t, "tag": tag} for n, t, tag in rows]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
