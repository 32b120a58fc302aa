# SPDX-License-Identifier: Apache-2.0
"""The record of foreign memory's cost per tensor (issue 32: at most 30 ns per foreign tensor argument on another
stream), each row beside its anchor in one run: a call with the record on against the very same call with it off
(dlstream._dlstream._test_foreign(False): nothing looked up, nothing noted; the switch is flipped outside the timed
loops), measured in pairs (gpubench.measure_pairs): a short loop of each, back to back in the same warm state, the
order alternating from pair to pair, the device drained after each loop outside its timing. A row gives the median of
the pairs' differences per tensor, their interquartile range and the 95 % confidence interval of that median (which
says what the run can resolve); an A/A row (the same loop on both sides) shows the method's own zero. The host time of
a call is what is measured.

- GPU (torch with CUDA): an empty kernel launched on 4 torch tensors with `stream=` a stream other than torch's (each
  joins torch's stream and is a use of its record), and the same 4 on torch's current stream (the framework's fast
  path, which must not move); without torch but on the null CUDA driver (bench/null_driver.c on LD_LIBRARY_PATH, as
  scripts/callgrind-python runs), the same rows on the test suite's fake exchange-API tensors: dlstream's own host
  cost, nothing run on a GPU.
- CPU backend: axpy and fill on NumPy arrays (foreign memory whose only ordering is the record) with `stream=`.
- torch with CUDA: 8 dlstream.fill calls on 8 torch tensors inside `use_stream(s)` (the block carries torch: each call
  a use of its tensor's record on s, the tensor kept in the block's list: interop/python/call/block.h), with the block
  entered around all the calls and around each 8, beside the same 8 calls on torch's current stream outside any block.

  python3 bench/bench_record.py [--json out.json] [--pairs 400] [--calls 250] [--cpu] [--smoke]

--calls: calls in each loop of a pair; --pairs: pairs per row. --cpu: the CPU-backend rows only."""
import argparse
import json
import sys

import numpy as np

import gpubench
from launch_anchors import empty_ptx

N = 256  # elements: small, so that the host's cost is what is measured


def switched_off(dlstream, fn):
    """fn(n) with the record of foreign memory off (the switch flipped around the loop, outside nothing timed but
    two calls of a loop of n)."""
    def run(n):
        was = dlstream._dlstream._test_foreign(False)
        try:
            fn(n)
        finally:
            dlstream._dlstream._test_foreign(was)
    return run


def report(title, rows, unit):
    """Prints a table of paired rows (label, gpubench.paired_row result, tensors) and returns them as dicts."""
    print(title)
    print(f"| row | on, µs per call | anchor, µs per call | {unit}: median of the pairs | IQR | 95 % CI of the median |"
          "\n| --- | ---: | ---: | ---: | ---: | ---: |")
    out = []
    for label, r, k in rows:
        d = r["diff"]
        scale = 1e3 / k  # µs per call -> ns per tensor (or per call: k = 1)
        print(f"| {label} | {r['a']:.3f} | {r['b']:.3f} | {d['median'] * scale:.1f} | "
              f"{d['q1'] * scale:.1f}..{d['q3'] * scale:.1f} | {d['lo'] * scale:.1f}..{d['hi'] * scale:.1f} |")
        out.append({"name": label, "us": r["a"], "anchor_us": r["b"], "per": k,
                    "ns_median": d["median"] * scale, "ns_q1": d["q1"] * scale, "ns_q3": d["q3"] * scale,
                    "ns_ci_lo": d["lo"] * scale, "ns_ci_hi": d["hi"] * scale, "pairs": d["n"]})
    return out


def cpu_rows(dlstream, args):
    """The CPU backend: NumPy arrays with stream=, record on against off."""
    s = dlstream.Stream("cpu")
    x, y, z = np.ones(N, np.float32), np.zeros(N, np.float32), np.zeros(N, np.float32)
    axpy, fill = dlstream.axpy, dlstream.fill

    def axpy_loop(n):
        for _ in range(n):
            axpy(0.5, x, y, stream=s)

    def fill_loop(n):
        for _ in range(n):
            fill(z, 1.0, stream=s)

    rows = []
    for label, fn, k in (("axpy(a, x, y, stream=s), 2 NumPy arrays: record on - off", axpy_loop, 2),
                         ("fill(z, v, stream=s), 1 NumPy array: record on - off", fill_loop, 1),
                         ("A/A: fill with the record on on both sides (the method's zero)", None, 1)):
        fa, fb = (fn, switched_off(dlstream, fn)) if fn is not None else (fill_loop, fill_loop)
        rows.append((label, gpubench.paired_row(fa, fb, args.calls, args.pairs, s.synchronize), k))
    out = report(f"# The record of foreign memory, CPU backend, {args.pairs} pairs of {args.calls} calls\n", rows,
                 "ns per tensor")
    s.synchronize()
    s.close()
    return out


def gpu_kit(dlstream):
    """(torch or None, make a 1-D float tensor of n elements, sync, what it runs on) for the GPU rows: torch with
    CUDA, else fake exchange-API tensors on the null CUDA driver; None (a line says why) otherwise."""
    try:
        import torch
        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    if torch is not None:
        return (torch, lambda n: torch.zeros(n, device="cuda"), torch.cuda.synchronize,
                torch.cuda.get_device_name())
    import ctypes
    try:
        null = hasattr(ctypes.CDLL("libcuda.so.1"), "dls_null_stats")
        import _dls_fake_exchange as fx
    except (OSError, ImportError):
        null = False
    if not null or dlstream.device_count("cuda") == 0:
        print("\n(the GPU rows need torch with CUDA, or the null CUDA driver and the tests' _dls_fake_exchange: "
              "skipped)")
        return None
    fx.set_current_stream(0)
    made = []

    def fake(n):
        made.append(fx.FakeTensor(None, 0x7f0000000000 + len(made) * 0x100000, (n,), device_type=2))
        return made[-1]
    # The drain waits for dlstream's stream alone (the null driver runs nothing else): dlstream.synchronize() would
    # also sweep the records whose uses passed, which torch.cuda.synchronize() on a GPU does not.
    return None, fake, lambda: None, "the null CUDA driver (dlstream's host cost only)"


def gpu_rows(dlstream, args, kit):
    """An empty kernel on 4 tensors: stream= another stream (the record's cost); torch's current stream on tensors
    never used elsewhere (must not move) and on the first row's tensors, whose records stay (a use on the framework's
    stream asks them); record on against off; the A/A row."""
    torch, tensor, sync, where = kit
    xs = [tensor(N) for _ in range(4)]
    fresh = [tensor(N) for _ in range(4)]  # never used off the framework's stream: no record of theirs exists
    other = dlstream.Stream("cuda:0")
    touch4 = dlstream.Module(empty_ptx(4).encode(), device="cuda:0").function("touch", "p,p,p,p").launch

    def other_loop(n):
        for _ in range(n):
            touch4(1, 32, *xs, stream=other)

    def current_loop(n):
        for _ in range(n):
            touch4(1, 32, *xs)

    def fresh_loop(n):
        for _ in range(n):
            touch4(1, 32, *fresh)

    def drain():
        other.synchronize()
        sync()

    rows = []
    for label, fa, fb in (
            ("empty kernel, 4 tensors, stream= another stream: record on - off", other_loop,
             switched_off(dlstream, other_loop)),
            ("empty kernel, 4 tensors on the framework's current stream, never used on another: record on - off "
             "(must not move)", fresh_loop, switched_off(dlstream, fresh_loop)),
            ("empty kernel, 4 tensors on the framework's current stream, each with a finished record (used on another "
             "stream before): record on - off", current_loop, switched_off(dlstream, current_loop)),
            ("A/A: 4 tensors, stream= another stream, the record on on both sides (the method's zero)", other_loop,
             other_loop)):
        rows.append((label, gpubench.paired_row(fa, fb, args.calls, args.pairs, drain), 4))
    out = report(f"\n# The record of foreign memory per {'torch' if torch else 'fake'} tensor, {where}, "
                 f"{args.pairs} pairs of {args.calls} calls\n", rows, "ns per tensor")
    drain()
    other.close()
    return out


def block_rows(dlstream, args, torch):
    """8 fill calls on torch tensors inside use_stream(s) against the same 8 on torch's current stream."""
    xs = [torch.zeros(N, device="cuda") for _ in range(8)]
    s = dlstream.Stream("cuda:0")
    fill = dlstream.fill

    def current(n):
        for _ in range(n):
            for x in xs:
                fill(x, 1.0)

    def one_block(n):
        with dlstream.use_stream(s):
            current(n)

    def blocks(n):
        for _ in range(n):
            with dlstream.use_stream(s):
                for x in xs:
                    fill(x, 1.0)

    def drain():
        s.synchronize()
        torch.cuda.synchronize()

    calls = max(1, args.calls // 8)
    rows = [("8 fill calls on 8 torch tensors inside one use_stream(s) block - the same 8 on torch's current stream",
             gpubench.paired_row(one_block, current, calls, args.pairs, drain), 8),
            ("the same 8 calls, a use_stream(s) block around each 8 (entry and exit included) - the same anchor",
             gpubench.paired_row(blocks, current, calls, args.pairs, drain), 8)]
    out = report(f"\n# Calls on torch tensors inside a block, {torch.cuda.get_device_name()}, {args.pairs} pairs of "
                 f"{calls} iterations of 8 calls (µs per iteration)\n", rows, "ns per call")
    drain()
    s.close()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--pairs", type=int, default=400, help="pairs per row (default: %(default)s)")
    p.add_argument("--calls", type=int, default=250, help="calls in each loop of a pair (default: %(default)s)")
    p.add_argument("--cpu", action="store_true", help="only the CPU-backend rows")
    gpubench.add_smoke(p)
    args = p.parse_args()
    if args.smoke:
        args.pairs, args.calls = min(args.pairs, 3), min(args.calls, 20)
    import dlstream
    result = {"pairs": args.pairs, "calls": args.calls, "cpu": cpu_rows(dlstream, args)}
    if not args.cpu:
        kit = gpu_kit(dlstream)
        if kit is not None:
            result["device"] = kit[3]
            result["gpu"] = gpu_rows(dlstream, args, kit)
            on = result["gpu"][0]
            print(f"\nthe record per foreign tensor on another stream: {on['ns_median']:.1f} ns (95 % CI "
                  f"{on['ns_ci_lo']:.1f}..{on['ns_ci_hi']:.1f}; target <= 30)")
            if kit[0] is not None:
                result["torch_block"] = block_rows(dlstream, args, kit[0])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
