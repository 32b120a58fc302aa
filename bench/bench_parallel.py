# SPDX-License-Identifier: Apache-2.0
"""Fork/join from Python beside torch's idiom, in one run: K independent one-block kernels of ~200 µs (--spin-us),
serially, as a dlstream.stream_parallel group and as torch's wait_stream + `with torch.cuda.stream` idiom; the
same with branches that each launch on their own torch tensor and run torch ops on it (torch's current stream is
the branch's); median of repetitions; the cost per group of 4 empty kernels; and the record of foreign memory's cost
per torch tensor of a launch on another stream (record on and off, in pairs). Two times per variant:
  wall:   host clock from the first call to torch.cuda.synchronize() (includes queuing K launches from Python,
          which at ~4-5 µs a launch bounds the speedup of 200 µs kernels well below K);
  device: device events around the work, with the origin first held by a 5 ms kernel so that every launch is
          queued before any runs: how concurrently the GPU runs what was queued.

  python3 bench/bench_parallel.py [--json out.json] [--reps 7] [--connections N] [--spin-us 200] [--cpu] [--smoke]

--spin-us sets each branch's kernel time: the device speedup of K branches is bounded by the fixed cost a branch
adds on the device (its stream's wait and its record, the launches after its kernel), so a longer branch shows how
close the overlap comes to K when that cost is small beside the work.

--connections sets CUDA_DEVICE_MAX_CONNECTIONS (hardware work queues) before CUDA starts; the driver's default
is 8, and K streams beyond it share queues, which serializes their event waits and records. Without CUDA or
torch it prints "skipped: <reason>" and exits 0. --smoke (CI): K = 2 and a few calls; without torch's CUDA,
dlstream's side on the CPU backend and the same tables, torch's columns and the device times skipped. --cpu: that
run on the CPU backend with the full counts (the host cost of groups without a GPU), where CUDA is present too, with
rows for empty groups (`with branch(): pass`) beside the by-hand fork/join of dlstream Streams (Stream.wait)."""
import argparse
import json
import os
import statistics
import sys

import gpubench

KS = (2, 4, 8, 16, 32)
SPIN_S = 200e-6
TOUCH4 = r'''extern "C" __global__ void touch4(float *a, float *b, float *c, float *d) {}'''


def dls_side(dlstream, cur, dev):
    """dlstream's loops: K spins serially on `cur`, as a stream_parallel group, and groups of 4 empty kernels."""
    def run_serial_dls(k):
        for _ in range(k):
            dlstream.spin(SPIN_S, stream=cur)

    def run_group_dls(k):
        with dlstream.stream_parallel(cur):
            for _ in range(k):
                with dlstream.branch():
                    dlstream.spin(SPIN_S)

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

    return run_serial_dls, run_group_dls, groups, serial4


def main():
    global SPIN_S
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--connections", type=int, default=0, help="CUDA_DEVICE_MAX_CONNECTIONS (0: leave as is)")
    p.add_argument("--cpu", action="store_true", help="dlstream's side on the CPU backend, the full counts")
    p.add_argument("--spin-us", type=float, default=SPIN_S * 1e6, help="each branch's kernel time, in µs")
    gpubench.add_smoke(p)
    args = gpubench.smoke(p.parse_args())
    SPIN_S = args.spin_us * 1e-6
    if args.cpu:
        return run_cpu(args)
    if args.connections:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = str(args.connections)
    found = gpubench.torch_and_dlstream()
    if found is None:
        return run_cpu(args) if args.smoke else 0
    torch, dlstream = found
    conn = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "driver default (8)")
    dev = "cuda:0"
    cur = torch.cuda.current_stream()
    # torch's sleep kernel runs for a number of cycles: calibrate it to SPIN_S with events
    cycles = gpubench.sleep_cycles(torch, SPIN_S)
    side = [torch.cuda.Stream() for _ in range(max(KS))]
    run_serial_dls, run_group_dls, groups, serial4 = dls_side(dlstream, cur, dev)

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
    for k in KS[:1] if args.smoke else KS:
        r = {"k": k, "serial_dls_ms": wall_ms(run_serial_dls, k), "group_dls_ms": wall_ms(run_group_dls, k),
             "serial_torch_ms": wall_ms(run_serial_torch, k), "torch_idiom_ms": wall_ms(run_torch_idiom, k)}
        r["dev_serial_dls_ms"] = device_ms(run_serial_dls, k)
        r["dev_group_dls_ms"] = device_ms(run_group_dls, k)
        r["dev_serial_torch_ms"] = device_ms(run_serial_torch, k)
        r["dev_torch_idiom_ms"] = device_ms(run_torch_idiom, k)
        t = {"serial_ms": wall_ms(run_serial_tensors, k), "group_ms": wall_ms(run_group_tensors, k),
             "idiom_ms": wall_ms(run_torch_idiom_tensors, k), "dev_serial_ms": device_ms(run_serial_tensors, k),
             "dev_group_ms": device_ms(run_group_tensors, k), "dev_idiom_ms": device_ms(run_torch_idiom_tensors, k)}
        for kind in ("", "dev_"):
            t[kind + "dls_speedup"] = t[kind + "serial_ms"] / t[kind + "group_ms"]
            t[kind + "idiom_speedup"] = t[kind + "serial_ms"] / t[kind + "idiom_ms"]
        r["tensors"] = t
        rows.append(speedups(r))

    def torch_groups(n):
        for _ in range(n):
            for s in side[:4]:
                s.wait_stream(cur)
                with torch.cuda.stream(s):
                    torch.cuda._sleep(0)
            for s in side[:4]:
                cur.wait_stream(s)

    def per_call_us(fn, n=2000):
        n = 20 if args.smoke else n
        return gpubench.host_us(torch, fn, n, args.reps, warm=lambda: fn(min(n, 200)))

    overhead = {"dlstream_group_of_4_empty_us": per_call_us(groups),
                "dlstream_4_empty_serial_us": per_call_us(serial4),
                "torch_idiom_group_of_4_us": per_call_us(torch_groups)}
    rec = record_ns(args, torch, dlstream, dev, xs[:4])
    overhead["record_ns_per_tensor"], overhead["record_ns_ci"] = rec if rec is not None else (None, None)
    report(args, torch.cuda.get_device_name(), conn, rows, overhead)
    return 0


def record_ns(args, torch, dlstream, dev, xs):
    """The record of foreign memory's cost per torch tensor: a launch on 4 torch tensors with stream= a stream
    other than torch's (each joins torch's stream and, with the record, is also a use of its record), with the record
    and with it off, in pairs (gpubench.paired_row, as bench_record.py measures it: the difference of two medians
    read 22 to 361 ns for the same cost on the H200); (median, its 95 % CI) in ns per tensor, or None without NVRTC
    for the empty kernel."""
    try:
        touch4 = dlstream.Module.from_source(TOUCH4, device=dev).function("touch4", "p,p,p,p")
    except dlstream.UnavailableError:
        return None
    other = dlstream.Stream(dev)

    def on(n):
        for _ in range(n):
            touch4.launch(1, 1, *xs, stream=other)

    def off(n):
        was = dlstream._dlstream._test_foreign(False)
        on(n)
        dlstream._dlstream._test_foreign(was)

    r = gpubench.paired_row(on, off, 20 if args.smoke else 250, 5 if args.smoke else 300,
                            lambda: (other.synchronize(), torch.cuda.synchronize()), scale=1e3 / 4)
    other.close()
    return r["diff"]["median"], (r["diff"]["lo"], r["diff"]["hi"])


def speedups(r):
    """Adds the speedups to a row of times (None where a side was skipped)."""
    for key, serial, par in (("dls_speedup", "serial_dls_ms", "group_dls_ms"),
                             ("torch_speedup", "serial_torch_ms", "torch_idiom_ms"),
                             ("dev_dls_speedup", "dev_serial_dls_ms", "dev_group_dls_ms"),
                             ("dev_torch_speedup", "dev_serial_torch_ms", "dev_torch_idiom_ms")):
        r[key] = r[serial] / r[par] if r.get(serial) is not None and r.get(par) else None
    return r


def empty_groups(dlstream, cur):
    """Groups of 4 branches that queue nothing (`with branch(): pass`), as stream_parallel and by hand: 4 streams
    that wait for `cur` and `cur` waiting for each (what a group queues: its fork and its joins), made once."""
    side = [dlstream.Stream(cur.device) for _ in range(4)]

    def groups(n):
        for _ in range(n):
            with dlstream.stream_parallel(cur):
                for _ in range(4):
                    with dlstream.branch():
                        pass

    def by_hand(n):
        for _ in range(n):
            for s in side:
                s.wait(cur)
            for s in side:
                cur.wait(s)

    return groups, by_hand, side


def run_cpu(args):
    """dlstream's side on the CPU backend, the torch columns and the device times skipped, the same tables: with
    --smoke (CI, where torch's CUDA is missing) K = 2 and a few calls; with --cpu every K and the full counts."""
    import dlstream
    what = "--cpu" if args.cpu else "smoke: no torch with CUDA"
    print(f"{what}: dlstream's side on the CPU backend; skipped: torch's idiom and the device times (CUDA events)")
    dev = "cpu"
    cur = dlstream.Stream(dev)
    run_serial_dls, run_group_dls, groups, serial4 = dls_side(dlstream, cur, dev)
    empty, by_hand, side = empty_groups(dlstream, cur)
    sync = cur.synchronize
    n = 20 if args.smoke else 2000
    rows = [speedups({"k": k, "serial_dls_ms": gpubench.wall_ms(sync, lambda: run_serial_dls(k), args.reps),
                      "group_dls_ms": gpubench.wall_ms(sync, lambda: run_group_dls(k), args.reps),
                      "serial_torch_ms": None, "torch_idiom_ms": None, "dev_serial_dls_ms": None,
                      "dev_group_dls_ms": None, "dev_serial_torch_ms": None, "dev_torch_idiom_ms": None})
            for k in (KS[:1] if args.smoke else KS)]
    overhead = {"dlstream_group_of_4_empty_us": gpubench.host_us(sync, groups, n, args.reps),
                "dlstream_4_empty_serial_us": gpubench.host_us(sync, serial4, n, args.reps),
                "torch_idiom_group_of_4_us": None}
    pass_us, hand_us = gpubench.measure_interleaved([empty, by_hand], n, max(args.reps, 3), sync)
    overhead["dlstream_group_of_4_branches_pass_us"] = statistics.median(pass_us)
    overhead["dlstream_by_hand_fork_join_of_4_us"] = statistics.median(hand_us)
    for s in side:
        s.close()
    cur.close()
    report(args, "CPU backend" + (" (smoke)" if args.smoke else ""), "n/a", rows, overhead)
    return 0


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def report(args, name, conn, rows, overhead):
    """The tables, the K=16 line (or the largest K run) and the JSON."""
    print(f"### Fork/join from Python on {name} (CUDA_DEVICE_MAX_CONNECTIONS: {conn})\n")
    print(f"K one-block kernels of {SPIN_S * 1e6:.0f} µs; wall ms to the device's synchronize, median of "
          f"{args.reps}\n")
    print("| K | dlstream serial ms | dlstream group ms | dlstream speedup | torch serial ms | torch idiom ms "
          "| torch speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['k']} | {fmt(r['serial_dls_ms'], '.3f')} | {fmt(r['group_dls_ms'], '.3f')} | "
              f"{fmt(r['dls_speedup'], '.2f')} | {fmt(r['serial_torch_ms'], '.3f')} | "
              f"{fmt(r['torch_idiom_ms'], '.3f')} | {fmt(r['torch_speedup'], '.2f')} |")
    print("\nDevice time (origin held while everything is queued), ms, median\n")
    print("| K | dlstream serial | dlstream group | dlstream speedup | torch serial | torch idiom | torch speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['k']} | {fmt(r['dev_serial_dls_ms'], '.3f')} | {fmt(r['dev_group_dls_ms'], '.3f')} | "
              f"{fmt(r['dev_dls_speedup'], '.2f')} | {fmt(r['dev_serial_torch_ms'], '.3f')} | "
              f"{fmt(r['dev_torch_idiom_ms'], '.3f')} | {fmt(r['dev_torch_speedup'], '.2f')} |")
    if rows and "tensors" in rows[0]:
        print("\nBranches on their own torch tensors (a dlstream fill and torch ops each, ~200 µs), speedup over the "
              "same work serially on one stream\n")
        print("| K | dlstream group, wall | torch idiom, wall | dlstream group, device | torch idiom, device "
              "| group / idiom, device |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            t = r["tensors"]
            print(f"| {r['k']} | {t['dls_speedup']:.2f} | {t['idiom_speedup']:.2f} | {t['dev_dls_speedup']:.2f} | "
                  f"{t['dev_idiom_speedup']:.2f} | {t['dev_dls_speedup'] / t['dev_idiom_speedup']:.2f} |")
    print("\n| per group of 4 empty kernels | µs |\n| --- | ---: |")
    for key, v in overhead.items():
        if key != "record_ns_ci":  # printed with its median below
            print(f"| {key} | {fmt(v, '.2f')} |")
    big = next((r for r in rows if r["k"] == 16), rows[-1])
    print(f"\nspeedup at K={big['k']}: wall: dlstream {fmt(big['dls_speedup'], '.1f')}, torch "
          f"{fmt(big['torch_speedup'], '.1f')}; device: dlstream {fmt(big['dev_dls_speedup'], '.1f')}, torch "
          f"{fmt(big['dev_torch_speedup'], '.1f')} (target >= 14 at K=16)")
    if "tensors" in big:
        t = big["tensors"]
        print(f"on torch tensors at K={big['k']}: wall: dlstream {t['dls_speedup']:.1f}, torch idiom "
              f"{t['idiom_speedup']:.1f} (target: dlstream >= torch); device: dlstream {t['dev_dls_speedup']:.1f}, "
              f"torch idiom {t['dev_idiom_speedup']:.1f} (targets at K=16: >= 14, within 10 % of the idiom)")
    if overhead.get("record_ns_per_tensor") is not None:
        lo, hi = overhead["record_ns_ci"]
        print(f"the record of foreign memory, per torch tensor of a launch on another stream: "
              f"{overhead['record_ns_per_tensor']:.0f} ns (paired, 95 % CI {lo:.0f}..{hi:.0f}; target <= 30)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "connections": conn, "spin_us": SPIN_S * 1e6, "rows": rows,
                       "overhead": overhead}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
