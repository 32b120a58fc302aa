# SPDX-License-Identifier: Apache-2.0
"""Fork/join from Python beside torch's idiom, in one run: K independent one-block kernels of ~200 µs,
serially, as a dlstream.stream_parallel group and as torch's wait_stream + `with torch.cuda.stream` idiom; the
same with branches that each launch on their own torch tensor and run torch ops on it (torch's current stream is
the branch's); median of repetitions; the cost per group of 4 empty kernels; and the record of foreign memory's cost
per torch tensor of a launch on another stream (record on and off, interleaved). Two times per variant:
  wall:   host clock from the first call to torch.cuda.synchronize() (includes queuing K launches from Python,
          which at ~4-5 µs a launch bounds the speedup of 200 µs kernels well below K);
  device: device events around the work, with the origin first held by a 5 ms kernel so that every launch is
          queued before any runs: how concurrently the GPU runs what was queued.

  python3 bench/bench_parallel.py [--json out.json] [--reps 7] [--connections N]

--connections sets CUDA_DEVICE_MAX_CONNECTIONS (hardware work queues) before CUDA starts; the driver's default
is 8, and K streams beyond it share queues, which serializes their event waits and records. Without CUDA or
torch it prints "skipped: <reason>" and exits 0."""
import argparse
import json
import os
import statistics
import sys

import gpubench

KS = (2, 4, 8, 16, 32)
SPIN_S = 200e-6
TOUCH4 = r'''extern "C" __global__ void touch4(float *a, float *b, float *c, float *d) {}'''


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--connections", type=int, default=0, help="CUDA_DEVICE_MAX_CONNECTIONS (0: leave as is)")
    args = p.parse_args()
    if args.connections:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = str(args.connections)
    found = gpubench.torch_and_dlstream()
    if found is None:
        return 0
    torch, dlstream = found
    conn = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "driver default (8)")
    dev = "cuda:0"
    cur = torch.cuda.current_stream()
    # torch's sleep kernel runs for a number of cycles: calibrate it to SPIN_S with events
    cycles = gpubench.sleep_cycles(torch, SPIN_S)
    side = [torch.cuda.Stream() for _ in range(max(KS))]

    def run_serial_dls(k):
        for _ in range(k):
            dlstream.spin(SPIN_S, stream=cur)

    def run_group_dls(k):
        with dlstream.stream_parallel(cur):
            for _ in range(k):
                with dlstream.branch():
                    dlstream.spin(SPIN_S)

    def run_serial_torch(k):
        for _ in range(k):
            torch.cuda._sleep(cycles)

    def run_torch_idiom(k):
        for s in side[:k]:
            s.wait_stream(cur)
            with torch.cuda.stream(s):
                torch.cuda._sleep(cycles)
        for s in side[:k]:
            cur.wait_stream(s)

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    hold_cycles = cycles * 25  # ~5 ms

    def device_ms(fn, k):
        out = []
        for _ in range(args.reps + 1):
            torch.cuda._sleep(hold_cycles)  # on cur: everything below is queued before it runs
            e0.record(cur)
            fn(k)
            e1.record(cur)
            e1.synchronize()
            out.append(e0.elapsed_time(e1))
        return statistics.median(out[1:])

    def wall_ms(fn, k):
        return gpubench.wall_ms(torch, lambda: fn(k), args.reps)

    # Branches on framework tensors: each launches a dlstream kernel on its own torch tensor and runs torch ops on
    # it (a ~200 µs sleep and an add), as a group and as the by-hand idiom; the same work serially on cur.
    xs = [torch.zeros(1 << 10, device="cuda") for _ in range(max(KS))]

    def tensor_work(x):
        torch.cuda._sleep(cycles)
        dlstream.fill(x, 1.0)  # on torch's current stream: the branch's, or the idiom's side stream
        x.add_(1.0)

    def run_serial_tensors(k):
        for x in xs[:k]:
            tensor_work(x)

    def run_group_tensors(k):
        with dlstream.stream_parallel(cur):
            for x in xs[:k]:
                with dlstream.branch():
                    tensor_work(x)

    def run_torch_idiom_tensors(k):
        for s, x in zip(side[:k], xs[:k]):
            s.wait_stream(cur)
            with torch.cuda.stream(s):
                tensor_work(x)
        for s in side[:k]:
            cur.wait_stream(s)

    rows = []
    for k in KS:
        r = {"k": k, "serial_dls_ms": wall_ms(run_serial_dls, k), "group_dls_ms": wall_ms(run_group_dls, k),
             "serial_torch_ms": wall_ms(run_serial_torch, k), "torch_idiom_ms": wall_ms(run_torch_idiom, k)}
        r["dls_speedup"] = r["serial_dls_ms"] / r["group_dls_ms"]
        r["torch_speedup"] = r["serial_torch_ms"] / r["torch_idiom_ms"]
        r["dev_serial_dls_ms"] = device_ms(run_serial_dls, k)
        r["dev_group_dls_ms"] = device_ms(run_group_dls, k)
        r["dev_serial_torch_ms"] = device_ms(run_serial_torch, k)
        r["dev_torch_idiom_ms"] = device_ms(run_torch_idiom, k)
        r["dev_dls_speedup"] = r["dev_serial_dls_ms"] / r["dev_group_dls_ms"]
        r["dev_torch_speedup"] = r["dev_serial_torch_ms"] / r["dev_torch_idiom_ms"]
        t = {"k": k, "serial_ms": wall_ms(run_serial_tensors, k), "group_ms": wall_ms(run_group_tensors, k),
             "idiom_ms": wall_ms(run_torch_idiom_tensors, k), "dev_serial_ms": device_ms(run_serial_tensors, k),
             "dev_group_ms": device_ms(run_group_tensors, k), "dev_idiom_ms": device_ms(run_torch_idiom_tensors, k)}
        for kind in ("", "dev_"):
            t[kind + "dls_speedup"] = t[kind + "serial_ms"] / t[kind + "group_ms"]
            t[kind + "idiom_speedup"] = t[kind + "serial_ms"] / t[kind + "idiom_ms"]
        r["tensors"] = t
        rows.append(r)

    # the cost of a group itself: 4 empty kernels per group, host time per group
    empty = dlstream.builtin_function("dls_empty", dev)

    def groups(n):
        for _ in range(n):
            with dlstream.stream_parallel(cur):
                for _ in range(4):
                    with dlstream.branch():
                        empty.launch(1, 1)

    def serial4(n):
        for _ in range(n):
            for _ in range(4):
                empty.launch(1, 1, stream=cur)

    def torch_groups(n):
        for _ in range(n):
            for s in side[:4]:
                s.wait_stream(cur)
                with torch.cuda.stream(s):
                    torch.cuda._sleep(0)
            for s in side[:4]:
                cur.wait_stream(s)

    def per_call_us(fn, n=2000):
        return gpubench.host_us(torch, fn, n, args.reps, warm=lambda: fn(200))

    # The record's cost: a launch on 4 torch tensors with stream= another stream (each joins torch's stream, and
    # with the record each is also a use of its record), with the record and with it off, interleaved.
    try:
        touch4 = dlstream.Module.from_source(TOUCH4, device=dev).function("touch4", "p,p,p,p")
    except dlstream.UnavailableError:  # no NVRTC: the row says nan
        touch4 = None
    other = dlstream.Stream(dev)

    def launches(n):
        for _ in range(n):
            touch4.launch(1, 1, *xs[:4], stream=other)

    record_ns = float("nan")
    if touch4 is not None:
        def off(n):
            was = dlstream._dlstream._test_foreign(False)
            launches(n)
            dlstream._dlstream._test_foreign(was)
        on_us, off_us = gpubench.measure_interleaved([launches, off], 2000, args.reps,
                                                      lambda: (other.synchronize(), torch.cuda.synchronize()))
        record_ns = (statistics.median(on_us) - statistics.median(off_us)) * 1e3 / 4

    overhead = {"dlstream_group_of_4_empty_us": per_call_us(groups),
                "dlstream_4_empty_serial_us": per_call_us(serial4),
                "torch_idiom_group_of_4_us": per_call_us(torch_groups)}

    name = torch.cuda.get_device_name()
    print(f"### Fork/join from Python on {name} (CUDA_DEVICE_MAX_CONNECTIONS: {conn})\n")
    print(f"K one-block kernels of {SPIN_S * 1e6:.0f} µs; wall ms to torch.cuda.synchronize(), median of "
          f"{args.reps}\n")
    print("| K | dlstream serial ms | dlstream group ms | dlstream speedup | torch serial ms | torch idiom ms "
          "| torch speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['k']} | {r['serial_dls_ms']:.3f} | {r['group_dls_ms']:.3f} | {r['dls_speedup']:.2f} | "
              f"{r['serial_torch_ms']:.3f} | {r['torch_idiom_ms']:.3f} | {r['torch_speedup']:.2f} |")
    print("\nDevice time (origin held while everything is queued), ms, median\n")
    print("| K | dlstream serial | dlstream group | dlstream speedup | torch serial | torch idiom | torch speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['k']} | {r['dev_serial_dls_ms']:.3f} | {r['dev_group_dls_ms']:.3f} | {r['dev_dls_speedup']:.2f} | "
              f"{r['dev_serial_torch_ms']:.3f} | {r['dev_torch_idiom_ms']:.3f} | {r['dev_torch_speedup']:.2f} |")
    print("\nBranches on their own torch tensors (a dlstream fill and torch ops each, ~200 µs), speedup over the same "
          "work serially on one stream\n")
    print("| K | dlstream group, wall | torch idiom, wall | dlstream group, device | torch idiom, device "
          "| group / idiom, device |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        t = r["tensors"]
        print(f"| {r['k']} | {t['dls_speedup']:.2f} | {t['idiom_speedup']:.2f} | {t['dev_dls_speedup']:.2f} | "
              f"{t['dev_idiom_speedup']:.2f} | {t['dev_dls_speedup'] / t['dev_idiom_speedup']:.2f} |")
    print("\n| per group of 4 empty kernels | µs |\n| --- | ---: |")
    for key, v in overhead.items():
        print(f"| {key} | {v:.2f} |")
    k16 = next(r for r in rows if r["k"] == 16)
    print(f"\nspeedup at K=16: wall: dlstream {k16['dls_speedup']:.1f}, torch {k16['torch_speedup']:.1f}; device: "
          f"dlstream {k16['dev_dls_speedup']:.1f}, torch {k16['dev_torch_speedup']:.1f} (target >= 14)")
    t16 = k16["tensors"]
    print(f"on torch tensors at K=16: wall: dlstream {t16['dls_speedup']:.1f}, torch idiom {t16['idiom_speedup']:.1f} "
          f"(target: dlstream >= torch); device: dlstream {t16['dev_dls_speedup']:.1f}, torch idiom "
          f"{t16['dev_idiom_speedup']:.1f} (targets: >= 14, and within 10 % of the idiom)")
    print(f"the record of foreign memory, per torch tensor of a call on another stream: {record_ns:.0f} ns "
          "(target <= 30)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "connections": conn, "spin_us": SPIN_S * 1e6, "rows": rows,
                       "overhead": overhead, "record_ns_per_tensor": record_ns}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
