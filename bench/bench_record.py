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


def main():
    args = gpubench.arguments(__doc__, 15, 20000, "(the default: this benchmark runs on the CPU backend)")
    import dlstream
    s = dlstream.Stream("cpu")
    table = rows(dlstream, s)
    samples = gpubench.measure_interleaved([r[2] for r in table], args.calls, args.reps, s.synchronize)
    by_name = {r[0]: sm for r, sm in zip(table, samples)}
    print(f"# The record of foreign memory, CPU backend, {args.reps} interleaved repetitions of {args.calls} calls\n")
    print("| call | µs per call | × anchor | ns per tensor above the anchor |\n| --- | ---: | ---: | ---: |")
    results = []
    for name, anchor, _, tensors in table:
        med = statistics.median(by_name[name])
        ratio = per = None
        if anchor is not None:
            ratio = statistics.median(a / b for a, b in zip(by_name[name], by_name[anchor]))
            per = (med - statistics.median(by_name[anchor])) * 1e3 / tensors
        print(f"| {name} | {med:.3f} | {'anchor' if ratio is None else f'{ratio:.3f}'} | "
              f"{'' if per is None else f'{per:.0f}'} |")
        results.append({"name": name, "us": med, "anchor": anchor, "ratio": ratio, "ns_per_tensor": per})
    s.synchronize()
    s.close()
    worst = max(r["ns_per_tensor"] for r in results if r["ns_per_tensor"] is not None)
    print(f"\nthe record per foreign tensor: {worst:.0f} ns at most over the rows (target <= 30)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": "cpu", "reps": args.reps, "calls": args.calls, "rows": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
