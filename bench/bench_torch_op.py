# SPDX-License-Identifier: Apache-2.0
"""dlstream.torch operators beside torch's own (issue 21), in one run: host time per call (queued, the device
drained outside the timing), interleaved repetitions, medians, and each row as a ratio of its anchor.

  python3 bench/bench_torch_op.py [--json out.json] [--reps 15] [--calls 5000] [--cpu] [--smoke]

Eager: the axpy built-in as a dlstream.torch operator against torch's own y.add_(x, alpha=a) on the same tensors
(target: at most 1.0 x), beside the same launch in torch.library.custom_op, in a hand-written Library.define + impl,
and alone. The probe (bench/torch_op_probe.c, compiled here with cc) registers boxed C implementations through
torch's stable C shim: what an implementation in C instead of Python would save. Compiled (fullgraph=True): a graph
of 10 dlstream operators against the same graph with 10 add_ (target: at most 1.2 x), default mode and
mode="reduce-overhead"; and the same graph against its 10 calls eager, with Inductor's generated call() alone between
them (eager -> call(): per operator; call() -> compiled: torch's per graph), beside the same rows for a no-op operator
of torch's own and (CUDA) torch's add_ (issue 34 item 4: what is dlstream's). Needs torch with CUDA (else
"skipped: <reason>", exit 0); --cpu runs the eager rows, the compiled-against-eager rows and the probe on torch's
CPU tensors and dlstream's CPU backend (whose CPU operators wait for a worker thread: only the dispatcher rows
compare). --smoke (CI): a few calls, --cpu where torch has no CUDA."""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile

import gpubench

N = 4096        # elements: small, so that the host's cost is what is measured
A = 0.5
K = 10          # operators in the compiled graphs
HERE = os.path.dirname(os.path.abspath(__file__))


def loop(fn, *args):
    """fn(n) making n calls fn(*args) (the same call for every row but the anchor's)."""
    def run(n):
        for _ in range(n):
            fn(*args)
    return run


def eager_rows(torch, dlstream, dt, dev):
    """(label, anchor label or None, loop) for the eager rows."""
    x = torch.ones(N, device=dev)
    y = torch.zeros(N, device=dev)
    k = dlstream.builtin_function("dls_axpy_f32", dev)
    launch = k.launch
    decl = dict(params="n, a, x, y", compute={"n": dt.numel("x")}, grid=dt.cdiv("n", 256), block=256)
    op = dt.op("dls_bench::axpy_", k, dtypes={"x": torch.float32, "y": torch.float32}, **decl)
    plain = dt.op("dls_bench::axpy_plain", k, contiguous=False, **decl)
    packet = torch.ops.dls_bench.axpy_

    @torch.library.custom_op("dls_bench::axpy_custom_op", mutates_args=("y",))
    def custom(a: float, x: torch.Tensor, y: torch.Tensor) -> None:
        n = x.numel()
        launch((n + 255) // 256, 256, n, a, x, y)

    lib = torch.library.Library("dls_bench", "FRAGMENT")
    lib.define("axpy_hand(float a, Tensor x, Tensor(a!) y) -> ()")

    def hand(a, x, y):
        n = x.numel()
        launch((n + 255) // 256, 256, n, a, x, y)

    lib.impl("axpy_hand", hand, "CPU" if dev == "cpu" else "CUDA")
    hand_packet, hand_default = torch.ops.dls_bench.axpy_hand, torch.ops.dls_bench.axpy_hand.default
    grid = (N + 255) // 256

    def add_(n):  # written out: a keyword argument through loop() would cost the anchor more than the rest
        for _ in range(n):
            y.add_(x, alpha=A)

    anchor = "torch's own y.add_(x, alpha=a)"
    rows = [(anchor, None, add_),
            ("y.add_(x) through the loop the rows below use (fn(*args))", anchor, loop(y.add_, x)),
            ("dlstream.torch.op axpy_(a, x, y): the OpOverload op() returns (dtypes and layout checked)", anchor,
             loop(op, A, x, y)),
            ("the same through the packet, torch.ops.dls_bench.axpy_(a, x, y)", anchor, loop(packet, A, x, y)),
            ("dlstream.torch.op with nothing to check (contiguous=False, no dtypes)", anchor, loop(plain, A, x, y)),
            ("torch.library.custom_op whose body is the launch", anchor, loop(custom, A, x, y)),
            ("Library.define + impl by hand, the launch as body, through torch.ops (packet)", anchor,
             loop(hand_packet, A, x, y)),
            ("the same, .default", anchor, loop(hand_default, A, x, y)),
            ("the launch alone: Function.launch(grid, 256, n, a, x, y)", anchor, loop(launch, grid, 256, N, A, x, y))]
    return rows, lib


def probe_rows(torch, dev, notes):
    """Boxed C implementations through torch's stable C shim beside a Python one: the dispatcher's own cost."""
    lib = torch.library.Library("dls_bench_probe", "FRAGMENT")
    for name in ("noop_py", "noop_c", "axpy_c"):
        lib.define(f"{name}(float a, Tensor x, Tensor(a!) y) -> ()")
    key = "CPU" if dev == "cpu" else "CUDA"
    lib.impl("noop_py", lambda a, x, y: None, key)
    tmp = tempfile.mkdtemp(prefix="dls_probe_")
    so = os.path.join(tmp, "torch_op_probe.so")
    cc = os.environ.get("CC", "cc")
    build = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", so, os.path.join(HERE, "torch_op_probe.c"), "-ldl"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rows = []
    x = torch.ones(N, device=dev)
    y = torch.zeros(N, device=dev)
    anchor = "torch's own y.add_(x, alpha=a)"
    rows.append(("probe: define + impl, a Python body that does nothing (.default): the dispatcher alone", anchor,
                 loop(torch.ops.dls_bench_probe.noop_py.default, A, x, y)))
    if build.returncode != 0:
        notes.append(f"probe's C rows skipped: {cc} failed: {build.stdout[-500:]}")
        return rows, lib, None
    probe = ctypes.CDLL(so)
    tlib = os.path.join(os.path.dirname(torch.__file__), "lib")
    err = ctypes.create_string_buffer(512)
    cuda_lib = None if dev == "cpu" else os.path.join(tlib, "libtorch_cuda.so").encode()
    rc = probe.dls_probe_register(os.path.join(tlib, "libtorch_cpu.so").encode(), cuda_lib, b"dls_bench_probe",
                                  key.encode(), err, len(err))
    if rc != 0:
        notes.append("probe's C rows skipped: " + err.value.decode())
        return rows, lib, None
    rows.append(("probe: the same with a boxed C body through the stable C shim that reads both tensors' pointers",
                 anchor, loop(torch.ops.dls_bench_probe.noop_c.default, A, x, y)))
    if dev != "cpu":
        rows.append(("probe: a boxed C axpy (numel, pointers, torch's current stream, cuLaunchKernel): a C body's "
                     "floor", anchor, loop(torch.ops.dls_bench_probe.axpy_c.default, A, x, y)))
    return rows, lib, probe


def compiled_rows(torch, dlstream, dt, dev, notes):
    """K operators in one compiled graph: dlstream's against add_, default mode and reduce-overhead."""
    k = dlstream.builtin_function("dls_axpy_f32", dev)
    op = dt.op("dls_bench::axpy_g", k, params="n, a, x, y", compute={"n": dt.numel("x")}, grid=dt.cdiv("n", 256),
               block=256, dtypes={"x": torch.float32, "y": torch.float32})
    xs = [torch.ones(N, device=dev) for _ in range(K)]
    ys = [torch.zeros(N, device=dev) for _ in range(K)]

    def pairs_dls(*t):  # K independent pairs: nothing for Inductor to fuse
        for i in range(K):
            op(A, t[i], t[K + i])

    def pairs_add(*t):
        for i in range(K):
            t[K + i].add_(t[i], alpha=A)

    def chain_dls(y, *t):  # K updates of one tensor: Inductor fuses the add_ into one kernel
        for i in range(K):
            op(A, t[i], y)

    def chain_add(y, *t):
        for i in range(K):
            y.add_(t[i], alpha=A)

    def fresh_dls(y, *t):  # no input written (reduce-overhead skips graphs that write their inputs)
        z = y.clone()
        chain_dls(z, *t)
        return z

    def fresh_add(y, *t):
        z = y.clone()
        chain_add(z, *t)
        return z

    rows = []
    for mode, graphs in ((None, (("10 independent pairs", pairs_dls, pairs_add, xs + ys),
                                 ("10 updates of one tensor", chain_dls, chain_add, [ys[0]] + xs))),
                         ("reduce-overhead", (("10 updates of a clone of the input", fresh_dls, fresh_add,
                                               [ys[0]] + xs),))):
        for what, g_dls, g_add, args in graphs:
            kw = {"fullgraph": True} if mode is None else {"fullgraph": True, "mode": mode}
            c_dls, c_add = torch.compile(g_dls, **kw), torch.compile(g_add, **kw)
            for c in (c_dls, c_add):
                for _ in range(3):
                    c(*args)
            m = "default mode" if mode is None else mode
            anchor = f"compiled ({m}), {what}: {K} x add_"

            rows.append((anchor, None, loop(c_add, *args)))
            rows.append((f"compiled ({m}), {what}: {K} x dlstream axpy_", anchor, loop(c_dls, *args)))
            if mode is None:
                notes.append(f"{m}, {what}: Inductor's code launches {kernels(torch, g_add, args)} kernel(s) for "
                             f"the add_ graph")
    from torch._dynamo.utils import counters
    if counters["inductor"]["cudagraph_skips"]:
        notes.append(f"CUDA graphs skipped {counters['inductor']['cudagraph_skips']} time(s)")
    return rows


def compiled_vs_eager_rows(torch, dlstream, dt, dev, notes):
    """Issue 34 item 4: a compiled graph (fullgraph=True) of K in-place dlstream operators against the same K calls
    eager (target: at most 1.1 x), beside the same pair for an operator that is torch's alone (Library.define + impl
    of a body that does nothing, and a fake) and for torch's own add_: what torch.compile costs any in-place operator,
    dlstream's or not. Each compiled graph also runs as Inductor's generated call() alone (the code that calls the
    operators, without Dynamo's guards and AOTAutograd's runtime wrappers around it): eager -> call() is what the
    generated code adds per operator, call() -> compiled what torch adds per graph. The difference between the
    dlstream and no-op rows' overheads is dlstream's."""
    k = dlstream.builtin_function("dls_axpy_f32", dev)
    op = dt.op("dls_bench::axpy_ce", k, params="n, a, x, y", compute={"n": dt.numel("x")}, grid=dt.cdiv("n", 256),
               block=256, dtypes={"x": torch.float32, "y": torch.float32})
    lib = torch.library.Library("dls_bench_ce", "FRAGMENT")
    lib.define("noop_(float a, Tensor x, Tensor(a!) y) -> ()")
    lib.impl("noop_", lambda a, x, y: None, "CPU" if dev == "cpu" else "CUDA")
    torch.library.register_fake("dls_bench_ce::noop_", lambda a, x, y: None, lib=lib)
    noop = torch.ops.dls_bench_ce.noop_.default
    args = [torch.ones(N, device=dev) for _ in range(K)] + [torch.zeros(N, device=dev) for _ in range(K)]

    def graph(o):
        def g(*t):
            for i in range(K):
                o(A, t[i], t[K + i])
        return g

    def add_graph(*t):
        for i in range(K):
            t[K + i].add_(t[i], alpha=A)

    graphs = [("dlstream axpy_", graph(op)), ("torch's own no-op custom operator (define + impl)", graph(noop))]
    if dev != "cpu":  # on the CPU, Inductor's add_ is a C++ kernel on OpenMP threads: not the host cost of a call
        graphs.append(("torch's own add_", add_graph))
    rows = []
    for what, eager in graphs:
        compiled = torch.compile(eager, fullgraph=True)
        call, source = generated(torch, compiled, args)
        anchor = f"eager: {K} x {what}"
        rows.append((anchor, None, loop(eager, *args)))
        if call is None:
            notes.append(f"compiled {K} x {what}: Inductor's generated module not found (no call() row)")
        else:
            rows.append((f"Inductor's generated call() alone, the same {K} x {what}", anchor, call_loop(call, args)))
            if eager is not add_graph:
                notes.append(f"compiled {K} x {what}: the generated call() {code_counts(source)}")
        rows.append((f"compiled (fullgraph=True): the same {K} x {what}", anchor, loop(compiled, *args)))
    return rows, lib


def call_loop(call, args):
    """Inductor's call(args) n times (it empties the list it is given: a new one each time)."""
    def run(n):
        for _ in range(n):
            call(list(args))
    return run


def generated(torch, compiled, args):
    """Runs compiled(*args) (compiling it, warm) and returns (Inductor's generated call, its source), or (None, None)
    where this torch keeps them elsewhere."""
    try:
        from torch._inductor.codecache import PyCodeCache
        before = {id(m) for m in PyCodeCache.modules}
    except (ImportError, AttributeError):
        before = None
    for _ in range(3):
        compiled(*args)
    if before is None:
        return None, None
    new = [m for m in PyCodeCache.modules if id(m) not in before and callable(getattr(m, "call", None))]
    if not new:
        return None, None
    with open(new[-1].__file__) as f:
        return new[-1].call, f.read()


def code_counts(source):
    """What the generated wrapper of a graph of operators does besides calling them: copies and clones of the
    written inputs (Inductor's reinplacing failed if there are any), allocations, kernels of its own, layout
    assertions (Inductor's size_asserts)."""
    start = source.find("def call")
    ends = [e for e in (source.find("\nrunner = ", start), source.find("\ndef benchmark_compiled_module", start))
            if e > 0]
    body = source[max(start, 0):min(ends, default=len(source))]
    counts = {"operator calls": body.count("torch.ops."), "kernel launches": body.count(".run("),
              "clones/copies": body.count("clone") + body.count("copy_"), "allocations": body.count("empty_strided"),
              "auto_functionalized left": body.count("auto_functionalized"),
              "layout assertions": body.count("assert_size_stride")}
    return ", ".join(f"{k}: {v}" for k, v in counts.items())


def kernels(torch, fn, args):
    """How many kernels Inductor's code for fn launches (its '.run(' calls), or '?'."""
    try:
        from torch._inductor.utils import run_and_get_code
        _, code = run_and_get_code(torch.compile(fn, fullgraph=True), *args)
        return sum(c.count(".run(") for c in code)
    except Exception:  # noqa: BLE001 - a count for the notes only
        return "?"


def main():
    args = gpubench.arguments(__doc__, 15, 5000, "torch's CPU tensors on dlstream's CPU backend (no GPU)")
    if args.smoke and not args.cpu:
        try:
            import torch
            if not torch.cuda.is_available():
                print("smoke: torch has no CUDA: the CPU rows (--cpu); skipped: the CUDA rows and the compiled graphs")
                args.cpu = True
        except ImportError:
            pass
    if args.cpu:
        try:
            import torch
        except ImportError:
            print("skipped: torch is not installed")
            return 0
        import dlstream
        dev, sync = "cpu", dlstream.Stream.legacy("cpu").synchronize
    else:
        found = gpubench.torch_and_dlstream()
        if found is None:
            return 0
        torch, dlstream = found
        dev, sync = "cuda:0", torch.cuda.synchronize
    import dlstream.torch as dt
    notes = []
    eager, _lib = eager_rows(torch, dlstream, dt, dev)
    probes, _plib, probe = probe_rows(torch, dev, notes)
    sections = [("eager", eager + probes)]
    if not args.smoke:
        ce, _celib = compiled_vs_eager_rows(torch, dlstream, dt, dev, notes)
        sections.append(("compiled against eager", ce))
    if not args.cpu:
        sections.append(("compiled", compiled_rows(torch, dlstream, dt, dev, notes)))
    if probe is not None and probe.dls_probe_failures():
        notes.append(f"the probe's C bodies failed {probe.dls_probe_failures()} time(s): its rows do not count")
    device = "CPU (dlstream's CPU backend)" if args.cpu else torch.cuda.get_device_name(0)
    print(f"# dlstream.torch operators, {device}, torch {torch.__version__}, {N} float32 elements, "
          f"{args.reps} interleaved repetitions")
    results = []
    for section, rows in sections:
        calls = args.calls if section == "eager" else max(args.calls // 10, 100)
        samples = gpubench.measure_interleaved([r[2] for r in rows], calls, args.reps, sync)
        med = {r[0]: statistics.median(s) for r, s in zip(rows, samples)}
        by_name = dict(zip([r[0] for r in rows], samples))
        print(f"\n## {section} (µs per call; ratio: median of the per-repetition ratios to the anchor)\n")
        print("| call | µs | × anchor |\n| --- | ---: | ---: |")
        for name, anchor, _ in rows:
            ratio = None
            if anchor is not None:
                ratio = statistics.median(a / b for a, b in zip(by_name[name], by_name[anchor]))
            print(f"| {name} | {med[name]:.2f} | {'anchor' if ratio is None else f'{ratio:.2f}'} |")
            results.append({"section": section, "name": name, "us": med[name], "anchor": anchor, "ratio": ratio})
    for n in notes:
        print("note:", n)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "elements": N, "reps": args.reps,
                       "rows": results, "notes": notes}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
