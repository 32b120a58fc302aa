# SPDX-License-Identifier: Apache-2.0
"""Plots a gpu-check run's benchmark JSON: launch overhead (and its scaling with tensor arguments) and
fork/join speedup against K.   python3 bench/plot.py RESULTS_DIR OUT.png"""
import json
import os
import sys


def main():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src, out = sys.argv[1], sys.argv[2]
    py = json.load(open(os.path.join(src, "bench_python.json")))
    par = json.load(open(os.path.join(src, "bench_parallel_32.json")))
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 4.8))

    wanted = [("raw cuLaunchKernel from C", "raw cuLaunchKernel (C)"), ("dlstream launch", "dlstream (Python)"),
              ("cuda.core launch", "cuda.core"), ("CuPy RawKernel, CuPy arrays", "CuPy RawKernel"),
              ("CuPy RawKernel on torch", "CuPy on torch tensors"), ("torch in-place add", "torch add_")]
    names, vals = [], []
    for key, label in wanted:
        row = next((r for r in py["rows"] if r["name"].startswith(key)), None)
        if row:
            names.append(label)
            vals.append(row["us"])
    a1.barh(names[::-1], vals[::-1], color=["#888" if n.startswith("raw") else "#3b7dd8" if n.startswith("dl")
                                             else "#bbb" for n in names[::-1]])
    a1.set_xlabel("µs per launch (host)")
    a1.set_title("Launch, axpy with 2 torch tensors + 2 scalars")

    args = sorted((int(r["tag"][4:]), r["us"]) for r in py["rows"] if (r.get("tag") or "").startswith("args"))
    if args:
        a2.plot([n for n, _ in args], [u for _, u in args], "o-", color="#3b7dd8", label="dlstream, empty kernel")
        raw = next((r["us"] for r in py["rows"] if r.get("tag") == "raw"), None)
        if raw:
            a2.axhline(raw, color="#888", ls="--", label="raw cuLaunchKernel, axpy (C)")
        a2.set_xscale("log", base=2)
        a2.set_xlabel("torch tensor arguments")
        a2.set_ylabel("µs per launch")
        a2.set_title("Launch cost against tensor arguments")
        a2.legend()

    ks = [r["k"] for r in par["rows"]]
    a3.plot(ks, ks, ":", color="#ccc", label="ideal")
    a3.plot(ks, [r["dev_dls_speedup"] for r in par["rows"]], "o-", color="#3b7dd8", label="dlstream, device time")
    a3.plot(ks, [r["dls_speedup"] for r in par["rows"]], "o--", color="#3b7dd8", label="dlstream, wall time")
    a3.plot(ks, [r["dev_torch_speedup"] for r in par["rows"]], "s-", color="#e07b39", label="torch idiom, device")
    a3.plot(ks, [r["torch_speedup"] for r in par["rows"]], "s--", color="#e07b39", label="torch idiom, wall")
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


if __name__ == "__main__":
    main()
