# SPDX-License-Identifier: Apache-2.0
"""Importing a dlstream.Tensor into torch and tvm-ffi, with and without dlstream's DLPack C exchange API, beside
importing a torch tensor, in one run: host time per import (and the imported tensor's end), median of repetitions
after warm-up, interleaved. Prints a Markdown table with each row's ratio to its anchor; --json FILE writes it.

  python3 bench/bench_exchange.py [--json out.json] [--reps 9] [--calls 20000] [--cpu] [--smoke]

Rows (on cuda:0, or with --cpu on host memory):
  torch.from_dlpack(torch tensor)               the anchor of the torch rows
  torch.from_dlpack(dlstream tensor)            torch calls __dlpack__ (torch <= 2.15 reads no producer's table)
  ... with the table hidden                     the same, "before" (the type without __dlpack_c_exchange_api__)
  tvm_ffi.from_dlpack(torch tensor)             torch's table: the anchor of the tvm-ffi rows
  tvm_ffi.from_dlpack(dlstream tensor)          dlstream's table ("after")
  ... with the table hidden                     through __dlpack__ ("before")
torch (and, for its rows, apache-tvm-ffi) must be installed; without them, or without CUDA and --cpu, it prints
"skipped: <reason>" and exits 0."""
import json
import sys

from gpubench import arguments, measure_interleaved


class hidden_table:
    """The type without its exchange API while the block runs (the import before this table existed)."""

    def __init__(self, tp):
        self.tp, self.cap = tp, None

    def __enter__(self):
        self.cap = self.tp.__dlpack_c_exchange_api__
        delattr(self.tp, "__dlpack_c_exchange_api__")

    def __exit__(self, *exc):
        setattr(self.tp, "__dlpack_c_exchange_api__", self.cap)


def loop(importer, obj, hide=None):
    def run(n):
        for _ in range(n):
            importer(obj)

    if hide is None:
        return run

    def run_hidden(n):
        with hidden_table(hide):
            run(n)

    return run_hidden


def main():
    args = arguments(__doc__, reps=9, calls=20000, cpu_help="host memory on the CPU backend instead of cuda:0")
    import dlstream
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return 0
    try:
        import tvm_ffi
    except ImportError:
        tvm_ffi = None
    if args.smoke and not args.cpu and not (torch.cuda.is_available() and dlstream.device_count("cuda") > 0):
        args.cpu = True  # a smoke run without a GPU: host memory
        print("smoke: no CUDA device: host memory on the CPU backend")
    if args.cpu:
        dev, tdev, sync = "cpu", "cpu", dlstream.synchronize
    elif torch.cuda.is_available() and dlstream.device_count("cuda") > 0:
        dev, tdev = "cuda:0", "cuda:0"

        def sync():
            torch.cuda.synchronize()
            dlstream.synchronize()
    else:
        print("skipped: no CUDA device (" + dlstream.backend_available("cuda")[1] + "); --cpu measures host memory")
        return 0
    x = torch.ones(1024, device=tdev)
    t = dlstream.empty(1024, "float32", device=dev)
    dlstream.fill(t, 1.0)
    sync()
    rows = [("torch.from_dlpack(torch tensor)", loop(torch.from_dlpack, x), "torch"),
            ("torch.from_dlpack(dlstream tensor)", loop(torch.from_dlpack, t), "torch"),
            ("torch.from_dlpack(dlstream tensor), table hidden", loop(torch.from_dlpack, t, dlstream.Tensor),
             "torch")]
    if tvm_ffi is not None:
        rows += [("tvm_ffi.from_dlpack(torch tensor)", loop(tvm_ffi.from_dlpack, x), "tvm"),
                 ("tvm_ffi.from_dlpack(dlstream tensor)", loop(tvm_ffi.from_dlpack, t), "tvm"),
                 ("tvm_ffi.from_dlpack(dlstream tensor), table hidden",
                  loop(tvm_ffi.from_dlpack, t, dlstream.Tensor), "tvm")]
    samples = measure_interleaved([f for _, f, _ in rows], args.calls, args.reps, sync)
    medians = [sorted(s)[len(s) // 2] for s in samples]
    anchors = {group: medians[i] for i, (_, _, group) in enumerate(rows) if i in (0, 3)}
    where = torch.cuda.get_device_name() if dev != "cpu" else "host memory"
    print(f"| import into a framework ({where}, torch {torch.__version__}"
          + (f", tvm-ffi {tvm_ffi.__version__}" if tvm_ffi is not None else ", no tvm-ffi") + ") | µs | × anchor |")
    print("| --- | ---: | ---: |")
    out = []
    for (name, _, group), us in zip(rows, medians):
        print(f"| {name} | {us:.3f} | {us / anchors[group]:.2f} |")
        out.append({"name": name, "us": us, "over_anchor": us / anchors[group]})
    stats = dlstream._dlstream._exchange_stats()
    print(f"dlstream's table served {stats['managed_tensor_from_py_object_no_sync']} imports")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reps": args.reps, "calls": args.calls, "device": where, "torch": torch.__version__,
                       "rows": out, "table_imports": stats["managed_tensor_from_py_object_no_sync"]}, f, indent=2)
    t.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
