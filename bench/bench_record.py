# SPDX-License-Identifier: Apache-2.0
"""The record of foreign memory's cost per tensor (issue 32: at most 30 ns per foreign tensor argument on another
stream), on dlstream's CPU backend, in one run beside its anchor: a launch on NumPy arrays (foreign memory: each is a
use of its record, looked up by address range, ordered and noted) against the very same launch with the record off
(dlstream._dlstream._test_foreign(False): nothing looked up, nothing noted), interleaved repetitions, medians; the
cost per tensor is the difference over the tensors of the call. The same arrays on the same stream call after call
is the record's quick way (docs/hazard-rule.md, "Uses noted as they are ordered": the stream is already each record's
only writer). The host time of a call is what is measured (the
work is queued on a CPU stream, drained outside the timing). On an H200 the same figure for torch tensors comes from
bench/bench_parallel.py (record_ns_per_tensor).

Where torch with CUDA is importable, a second table: 8 dlstream.fill calls on 8 torch tensors inside
`use_stream(s)` (the block carries torch: its current stream is s, so each call is a use of its tensor's record on
s, the tensor kept in the block's list: interop/python/call/block.h), once with the block entered around all the
calls and once with a block around each 8, beside the anchor: the same 8 calls on torch's current stream outside any
block (the fast path). The anchor runs in the same process after blocks were used, as a program that uses both does.

  python3 bench/bench_record.py [--json out.json] [--reps 15] [--calls 20000] [--smoke]"""
import json
import statistics
import sys

import numpy as np

import gpubench

N = 256  # elements: small, so that the host's cost is what is measured


def rows(dlstream, s):
    """(label, anchor label or None, loop, tensors of the call) for the rows."""
    x, y = np.ones(N, np.float32), np.zeros(N, np.float32)
    z = np.zeros(N, np.float32)
    axpy, fill = dlstream.axpy, dlstream.fill

    def off(fn):
        def run(n):
            was = dlstream._dlstream._test_foreign(False)
            try:
                fn(n)
            finally:
                dlstream._dlstream._test_foreign(was)
        return run

    def axpy_loop(n):
        for _ in range(n):
            axpy(0.5, x, y, stream=s)

    def fill_loop(n):
        for _ in range(n):
            fill(z, 1.0, stream=s)

    a2 = "axpy(a, x, y, stream=s) on 2 NumPy arrays, the record off"
    a1 = "fill(z, v, stream=s) on 1 NumPy array, the record off"
    return [(a2, None, off(axpy_loop), 2),
            ("the same, the record on (2 uses of records)", a2, axpy_loop, 2),
            (a1, None, off(fill_loop), 1),
            ("the same, the record on (1 use of a record)", a1, fill_loop, 1)]


def torch_rows(dlstream, torch, dev):
    """(label, anchor label or None, loop, calls of an iteration) for the torch rows (issue 32: a call on a framework
    tensor inside a block at near the fast path's cost)."""
    xs = [torch.zeros(N, device=dev) for _ in range(8)]
    s = dlstream.Stream(dev)
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

    a = "8 fill calls on 8 torch tensors, torch's current stream, no block (the fast path)"
    return [(a, None, current, 8),
            ("the same 8 calls inside one use_stream(s) block (torch carried: its current stream is s)", a,
             one_block, 8),
            ("the same 8 calls, a use_stream(s) block around each 8 (its entry and exit included)", a, blocks, 8)], s


def table_of(title, table, samples, per_tensor):
    """Prints a table of rows (label, anchor, loop, n) with their samples; returns the rows as dicts."""
    by_name = {r[0]: sm for r, sm in zip(table, samples)}
    print(title)
    unit = "ns per tensor above the anchor" if per_tensor else "ns per call above the anchor"
    print(f"| call | µs per {'call' if per_tensor else 'iteration (8 calls)'} | × anchor | {unit} |\n"
          "| --- | ---: | ---: | ---: |")
    results = []
    for name, anchor, _, n in table:
        med = statistics.median(by_name[name])
        ratio = per = None
        if anchor is not None:
            ratio = statistics.median(a / b for a, b in zip(by_name[name], by_name[anchor]))
            per = (med - statistics.median(by_name[anchor])) * 1e3 / n
        print(f"| {name} | {med:.3f} | {'anchor' if ratio is None else f'{ratio:.3f}'} | "
              f"{'' if per is None else f'{per:.0f}'} |")
        results.append({"name": name, "us": med, "anchor": anchor, "ratio": ratio,
                        "ns_per_tensor" if per_tensor else "ns_per_call": per})
    return results


def run_torch(args, dlstream):
    """The torch rows, or None (a line says why) without torch with CUDA."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("\n(the torch rows need torch with CUDA: skipped)")
        return None
    dev = f"cuda:{torch.cuda.current_device()}"
    table, s = torch_rows(dlstream, torch, dev)
    samples = gpubench.measure_interleaved([r[2] for r in table], 20 if args.smoke else max(200, args.calls // 8),
                                           args.reps, torch.cuda.synchronize)
    results = table_of(f"\n# Calls on torch tensors inside a block, {torch.cuda.get_device_name()}, {args.reps} "
                       "interleaved repetitions\n", table, samples, False)
    torch.cuda.synchronize()
    s.close()
    return results


def main():
    args = gpubench.arguments(__doc__, 15, 20000, "(the default: this benchmark runs on the CPU backend)")
    import dlstream
    s = dlstream.Stream("cpu")
    table = rows(dlstream, s)
    samples = gpubench.measure_interleaved([r[2] for r in table], args.calls, args.reps, s.synchronize)
    results = table_of(f"# The record of foreign memory, CPU backend, {args.reps} interleaved repetitions of "
                       f"{args.calls} calls\n", table, samples, True)
    s.synchronize()
    s.close()
    worst = max(r["ns_per_tensor"] for r in results if r["ns_per_tensor"] is not None)
    print(f"\nthe record per foreign tensor: {worst:.0f} ns at most over the rows (target <= 30)")
    block = run_torch(args, dlstream)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": "cpu", "reps": args.reps, "calls": args.calls, "rows": results, "torch_block": block},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
