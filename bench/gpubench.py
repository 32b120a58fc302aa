# SPDX-License-Identifier: Apache-2.0
"""What the GPU benchmark scripts share: the skip when torch or CUDA is missing, the calibration of torch's sleep
kernel, and the wall-clock and host-time measurements (medians of repetitions, or interleaved samples)."""
import argparse
import statistics
import sys
import time


def torch_and_dlstream():
    """(torch, dlstream) when both can run on a CUDA device; otherwise prints "skipped: <reason>" and returns
    None (the scripts then exit 0)."""
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return None
    import dlstream
    if not torch.cuda.is_available():
        print("skipped: torch has no CUDA device")
        return None
    if dlstream.device_count("cuda") == 0:
        print("skipped: no CUDA device for dlstream (" + dlstream.backend_available("cuda")[1] + ")")
        return None
    return torch, dlstream


def sleep_cycles(torch, seconds):
    """The cycle count for which torch's sleep kernel runs about `seconds`, measured with device events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 1_000_000
    for _ in range(3):
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        cycles = int(cycles * (seconds * 1e3) / start.elapsed_time(end))
    return cycles


def _sync_of(torch_or_sync):
    """torch.cuda.synchronize for torch, else the callable given (a smoke run's dlstream.synchronize)."""
    return torch_or_sync.cuda.synchronize if hasattr(torch_or_sync, "cuda") else torch_or_sync


def wall_ms(torch, fn, reps):
    """Median wall time of fn() up to torch.cuda.synchronize() (or the sync callable given for torch), in ms,
    after one warm-up call."""
    sync = _sync_of(torch)
    fn()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def host_us(torch, fn, n, reps, warm=None):
    """Median host time of one of n calls, in µs: fn(n) makes the n calls, which are queued, not waited for
    (the device is synchronized outside the timing, by torch or the sync callable given). warm(): the warm-up
    (default fn(n))."""
    sync = _sync_of(torch)
    (warm or (lambda: fn(n)))()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(n)
        t1 = time.perf_counter()
        sync()
        out.append((t1 - t0) / n * 1e6)
    return statistics.median(out)


def measure_interleaved(fns, calls, reps, sync):
    """Loops fns[i](n), each making n calls (queued, not waited for), interleaved so that all see the same machine
    state: each repetition runs every one, starting one further along each time, and sync() drains outside the
    timing. Returns each loop's samples (µs per call), one per repetition."""
    for f in fns:
        f(max(200, calls // 10))
        sync()
    out = [[] for _ in fns]
    for r in range(reps):
        for k in range(len(fns)):
            i = (r + k) % len(fns)
            t0 = time.perf_counter()
            fns[i](calls)
            out[i].append((time.perf_counter() - t0) / calls * 1e6)
            sync()
    return out


SMOKE_HELP = "a smoke run (CI: scripts/bench-smoke): a few repetitions of a few calls, on the CPU backend where the " \
             "script has one; what needs a GPU here is skipped and said so"


def measure(fn, calls, reps, sync=None):
    """Median over `reps` of the mean host time of `calls` calls, in microseconds."""
    for _ in range(max(200, calls // 10)):
        fn()
    if sync:
        sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        if sync:
            sync()  # drain outside the timed loop so queues never fill
        out.append((t1 - t0) / calls * 1e6)
    return statistics.median(out)


def measure_paired(fa, fb, calls, reps, sync):
    """(median of a, median of b, median of the paired differences a - b), interleaved, in µs per call."""
    ta, tb = measure_interleaved([fa, fb], calls, reps, sync)
    return statistics.median(ta), statistics.median(tb), statistics.median(a - b for a, b in zip(ta, tb))


def measure_pairs(fa, fb, calls, pairs, sync):
    """Pairs of short loops, fa(calls) and fb(calls) back to back in the same warm state, the order alternating from
    pair to pair (a first, then b first), sync() draining after each loop outside its timing. Returns the two loops'
    samples and each pair's difference a - b, in µs per call, one per pair. What differs between two loops that run
    within a few ms of each other is what fa does that fb does not: the machine's slower drifts (clock, other
    processes, the device's queue) fall on both sides of a pair and leave its difference."""
    for f in (fa, fb):
        f(max(200, calls))
        sync()
    ta, tb, diffs = [], [], []
    for p in range(pairs):
        t = [0.0, 0.0]
        for i in ((0, 1) if p % 2 == 0 else (1, 0)):
            f = fa if i == 0 else fb
            t0 = time.perf_counter()
            f(calls)
            t[i] = (time.perf_counter() - t0) / calls * 1e6
            sync()
        ta.append(t[0])
        tb.append(t[1])
        diffs.append(t[0] - t[1])
    return ta, tb, diffs


def spread(samples):
    """{median, q1, q3 (the interquartile range), lo and hi (a 95 % confidence interval of the median: the order
    statistics a binomial count puts around it, which needs no assumption about the samples' distribution), n} of a
    list of samples."""
    xs = sorted(samples)
    n = len(xs)
    q = statistics.quantiles(xs, n=4) if n > 1 else [xs[0]] * 3
    k = max(0, int((n - 1.96 * n ** 0.5) / 2) - 1)  # the CI's lower order statistic (0-based)
    return {"median": statistics.median(xs), "q1": q[0], "q3": q[2], "lo": xs[k], "hi": xs[n - 1 - k], "n": n}


def paired_row(fa, fb, calls, pairs, sync, scale=1.0):
    """measure_pairs summed up: {"a", "b": medians of the loops, "diff": spread() of the pairs' differences}, every
    figure in µs per call times `scale` (1e3 / tensors: ns per tensor)."""
    ta, tb, diffs = measure_pairs(fa, fb, calls, pairs, sync)
    d = spread([x * scale for x in diffs])
    return {"a": statistics.median(ta) * scale, "b": statistics.median(tb) * scale, "diff": d}


def fmt_spread(d, unit="", digits=0):
    """A spread() as "median [q1, q3], 95 % CI of the median lo..hi"."""
    f = f"{{:.{digits}f}}"
    return (f"{f.format(d['median'])}{unit} (IQR {f.format(d['q1'])}..{f.format(d['q3'])}, 95 % CI of the median "
            f"{f.format(d['lo'])}..{f.format(d['hi'])}, {d['n']} pairs)")


def slope(xs, ys):
    """The least-squares slope of ys over xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def measure_loop(fn, calls, reps, sync=None):
    """Like measure, but fn(calls) runs its own loop (saves a Python call per iteration)."""
    return host_us(sync or (lambda: None), fn, calls, reps, warm=lambda: fn(max(200, calls // 10)))


def measure_loop_few(fn, calls, reps):
    """measure_loop for slow calls: one warm-up call, `reps` repetitions of `calls` calls."""
    fn(1)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(calls)
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def add_smoke(parser):
    """The --smoke option every benchmark script has."""
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)


def smoke(args, reps=1, calls=20):
    """With --smoke, at most `reps` repetitions and `calls` calls; returns args."""
    if getattr(args, "smoke", False):
        args.reps = min(args.reps, reps)
        if hasattr(args, "calls"):
            args.calls = min(args.calls, calls)
    return args


def arguments(doc, reps, calls, cpu_help, pairs=None):
    """The options the Python benchmarks share: --json FILE, --reps, --calls, --cpu, --smoke; with `pairs` (its
    default), --pairs and --pair-calls for the rows measured in pairs (measure_pairs; --smoke: 3 pairs of 20)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--reps", type=int, default=reps)
    p.add_argument("--calls", type=int, default=calls)
    if pairs is not None:
        p.add_argument("--pairs", type=int, default=pairs, help="pairs of the paired rows (default: %(default)s)")
        p.add_argument("--pair-calls", type=int, default=500,
                       help="calls in each loop of a pair (default: %(default)s)")
    p.add_argument("--cpu", action="store_true", help=cpu_help)
    add_smoke(p)
    args = smoke(p.parse_args())
    if pairs is not None and args.smoke:
        args.pairs, args.pair_calls = min(args.pairs, 3), min(args.pair_calls, 20)
    return args


def main():
    """--smoke: the helpers that need no GPU, on two trivial loops (the torch helpers run inside the scripts)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_smoke(p)
    if not p.parse_args().smoke:
        p.error("gpubench.py is the benchmarks' shared module; run it only with --smoke")
    count = [0, 0]

    def loop(i):
        def run(n):
            count[i] += n
        return run

    samples = measure_interleaved([loop(0), loop(1)], 10, 3, lambda: None)
    assert [len(s) for s in samples] == [3, 3] and count == [230, 230], (samples, count)  # 200 warm-up calls each
    ta, tb, diffs = measure_pairs(loop(0), loop(1), 10, 4, lambda: None)
    assert len(ta) == len(tb) == len(diffs) == 4 and count == [470, 470], (ta, tb, diffs, count)
    d = spread([3.0, 1.0, 2.0, 5.0, 4.0])
    assert d["median"] == 3.0 and d["lo"] <= d["q1"] <= d["median"] <= d["q3"] <= d["hi"] and d["n"] == 5, d
    assert wall_ms(lambda: None, lambda: loop(0)(1), 2) >= 0 and host_us(lambda: None, loop(1), 5, 2) >= 0
    print("gpubench: measure_interleaved, measure_pairs, spread, wall_ms and host_us ok on trivial loops; skipped: sleep_cycles (torch with "
          "CUDA: it runs inside the GPU benchmarks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
