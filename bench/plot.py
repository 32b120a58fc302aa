# SPDX-License-Identifier: Apache-2.0
"""Plots a gpu-check run's benchmark JSON: launch overhead (and its scaling with tensor arguments) and
fork/join speedup against K.

  python3 bench/plot.py RESULTS_DIR OUT.png [--smoke]

RESULTS_DIR holds bench_python.json and bench_parallel_32.json. --smoke (CI: scripts/bench-smoke, on the smoke runs'
JSON): reads and checks the series; without matplotlib it says it skipped the drawing."""
import argparse
import json
import os
import sys

LAUNCHES = [("raw cuLaunchKernel from C", "raw cuLaunchKernel (C)"), ("dlstream launch", "dlstream (Python)"),
            ("cuda.core launch", "cuda.core"), ("CuPy RawKernel, CuPy arrays", "CuPy RawKernel"),
            ("CuPy RawKernel on torch", "CuPy on torch tensors"), ("torch in-place add", "torch add_")]
SPEEDUPS = [("dev_dls_speedup", "o-", "#3b7dd8", "dlstream, device time"),
            ("dls_speedup", "o--", "#3b7dd8", "dlstream, wall time"),
            ("dev_torch_speedup", "s-", "#e07b39", "torch idiom, device"),
            ("torch_speedup", "s--", "#e07b39", "torch idiom, wall")]


def series(py, par):
    """What the three panels draw: the launch bars, the scaling points and the raw line, the speedup curves (points
    a run skipped, None, left out)."""
    bars = []
    for key, label in LAUNCHES:
        row = next((r for r in py["rows"] if r["name"].startswith(key)), None)
        if row:
            bars.append((label, row["us"]))
    scaling = sorted((int(r["tag"][4:]), r["us"]) for r in py["rows"] if (r.get("tag") or "").startswith("args"))
    raw = next((r["us"] for r in py["rows"] if r.get("tag") == "raw"), None)
    curves = {key: [(r["k"], r[key]) for r in par["rows"] if r.get(key) is not None] for key, *_ in SPEEDUPS}
    return bars, scaling, raw, curves


def draw(py, par, bars, scaling, raw, curves, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 4.8))
    names, vals = [b[0] for b in bars], [b[1] for b in bars]
    a1.barh(names[::-1], vals[::-1], color=["#888" if n.startswith("raw") else "#3b7dd8" if n.startswith("dl")
                                             else "#bbb" for n in names[::-1]])
    a1.set_xlabel("µs per launch (host)")
    a1.set_title("Launch, axpy with 2 torch tensors + 2 scalars")

    if scaling:
        a2.plot([n for n, _ in scaling], [u for _, u in scaling], "o-", color="#3b7dd8", label="dlstream, empty kernel")
        if raw:
            a2.axhline(raw, color="#888", ls="--", label="raw cuLaunchKernel, axpy (C)")
        a2.set_xscale("log", base=2)
        a2.set_xlabel("torch tensor arguments")
        a2.set_ylabel("µs per launch")
        a2.set_title("Launch cost against tensor arguments")
        a2.legend()

    ks = [r["k"] for r in par["rows"]]
    a3.plot(ks, ks, ":", color="#ccc", label="ideal")
    for key, style, color, label in SPEEDUPS:
        if curves[key]:
            a3.plot([k for k, _ in curves[key]], [v for _, v in curves[key]], style, color=color, label=label)
    a3.set_xscale("log", base=2)
    a3.set_yscale("log", base=2)
    a3.set_xlabel("K concurrent 200 µs one-block kernels")
    a3.set_ylabel("speedup over serial")
    a3.set_title(f"Fork/join from Python (max connections {par['connections']})")
    a3.legend(fontsize=8)
    fig.suptitle(py.get("device", ""))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="the folder with bench_python.json and bench_parallel_32.json")
    ap.add_argument("out", help="the PNG to write")
    ap.add_argument("--smoke", action="store_true", help="check the series; skip the drawing without matplotlib")
    args = ap.parse_args()
    with open(os.path.join(args.results, "bench_python.json")) as f:
        py = json.load(f)
    with open(os.path.join(args.results, "bench_parallel_32.json")) as f:
        par = json.load(f)
    bars, scaling, raw, curves = series(py, par)
    if args.smoke:
        print(f"plot: {len(bars)} launch bars, {len(scaling)} scaling points, "
              f"{sum(len(c) for c in curves.values())} speedup points")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("smoke: skipped the drawing: matplotlib is not installed")
            return 0
    draw(py, par, bars, scaling, raw, curves, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
