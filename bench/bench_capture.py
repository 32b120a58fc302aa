# SPDX-License-Identifier: Apache-2.0
"""Fork/join replayed from a graph: K independent one-block ~200 µs kernels captured once (serially, and as a
fork/join) and replayed, with dlstream.capture and with torch.cuda.graph, in one run. Reports the wall-time
speedup of the fork/join replay over the serial replay captured the same way, and the host cost of one replay
beside an eager group.

  python3 bench/bench_capture.py [--json out.json] [--reps 9]

Without CUDA or torch it prints "skipped: <reason>" and exits 0."""
import argparse
import json
import sys

import gpubench

KS = (2, 4, 8, 16, 32)
SPIN_S = 200e-6


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--reps", type=int, default=9)
    args = p.parse_args()
    found = gpubench.torch_and_dlstream()
    if found is None:
        return 0
    torch, dlstream = found
    dev = "cuda:0"
    cycles = gpubench.sleep_cycles(torch, SPIN_S)
    side = [torch.cuda.Stream() for _ in range(max(KS))]

    def here():
        """The stream a capture records: dlstream.capture's (use_stream), else torch's current (capturing) one."""
        return dlstream._dlstream._stream_var.get(None) or dlstream.Stream.wrap(torch.cuda.current_stream())

    def dls_serial(k):
        s = here()
        for _ in range(k):
            dlstream.spin(SPIN_S, stream=s)

    def dls_forkjoin(k):
        with dlstream.stream_parallel():
            for _ in range(k):
                with dlstream.branch():
                    dlstream.spin(SPIN_S)

    def torch_serial(k):
        for _ in range(k):
            torch.cuda._sleep(cycles)

    def torch_forkjoin(k):
        cur = torch.cuda.current_stream()
        for s in side[:k]:
            s.wait_stream(cur)
            with torch.cuda.stream(s):
                torch.cuda._sleep(cycles)
        for s in side[:k]:
            cur.wait_stream(s)

    def dls_graph(body, k):
        c = dlstream.capture(device=dev)
        with c:
            body(k)
        return c, c.replay

    def torch_graph(body, k):
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            body(k)
        return g, g.replay

    def wall_ms(replay):
        return gpubench.wall_ms(torch, replay, args.reps)

    rows = []
    keep = []
    for k in KS:
        r = {"k": k}
        for label, make, serial, fj in (("dls", dls_graph, dls_serial, dls_forkjoin),
                                        ("torch", torch_graph, torch_serial, torch_forkjoin),
                                        ("dls_in_torch", torch_graph, dls_serial, dls_forkjoin)):
            gs, rs = make(serial, k)
            gf, rf = make(fj, k)
            keep += [gs, gf]
            r[f"{label}_serial_ms"] = wall_ms(rs)
            r[f"{label}_forkjoin_ms"] = wall_ms(rf)
            r[f"{label}_speedup"] = r[f"{label}_serial_ms"] / r[f"{label}_forkjoin_ms"]
        rows.append(r)

    # host time of one replay call (queued, not waited for) beside one eager group of 16 branches
    def host_us(fn, n=300):
        def calls(m):
            for _ in range(m):
                fn()
        return gpubench.host_us(torch, calls, n, args.reps, warm=fn)

    empty = dlstream.builtin_function("dls_empty", dev)

    def eager_group():
        with dlstream.stream_parallel(dlstream.Stream.wrap(torch.cuda.current_stream())):
            for _ in range(16):
                with dlstream.branch():
                    empty.launch(1, 1)

    c16 = dlstream.capture(device=dev)
    with c16:
        with dlstream.stream_parallel():
            for _ in range(16):
                with dlstream.branch():
                    empty.launch(1, 1)
    t16 = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(t16):
        eager_group()
    host = {"dls_replay_group16_us": host_us(c16.replay), "torch_replay_group16_us": host_us(t16.replay),
            "dls_eager_group16_us": host_us(eager_group)}

    name = torch.cuda.get_device_name()
    print(f"### Fork/join replayed from a graph on {name}\n")
    print(f"K one-block kernels of {SPIN_S * 1e6:.0f} µs captured once; wall ms of one replay to "
          f"torch.cuda.synchronize(), median of {args.reps}; speedup = serial replay / fork-join replay\n")
    print("| K | dlstream.capture serial | fork/join | speedup | torch.cuda.graph serial | fork/join (torch idiom) "
          "| speedup | dlstream group in torch.cuda.graph: serial | fork/join | speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['k']} | {r['dls_serial_ms']:.3f} | {r['dls_forkjoin_ms']:.3f} | {r['dls_speedup']:.2f} | "
              f"{r['torch_serial_ms']:.3f} | {r['torch_forkjoin_ms']:.3f} | {r['torch_speedup']:.2f} | "
              f"{r['dls_in_torch_serial_ms']:.3f} | {r['dls_in_torch_forkjoin_ms']:.3f} | "
              f"{r['dls_in_torch_speedup']:.2f} |")
    print("\n| host cost, group of 16 empty kernels | µs |\n| --- | ---: |")
    for key, v in host.items():
        print(f"| {key} | {v:.2f} |")
    k16 = next(r for r in rows if r["k"] == 16)
    print(f"\nspeedup at K=16: dlstream.capture {k16['dls_speedup']:.1f}, torch.cuda.graph "
          f"{k16['torch_speedup']:.1f}, dlstream in torch.cuda.graph {k16['dls_in_torch_speedup']:.1f} (target >= 14)")
    for g in keep:
        if isinstance(g, dlstream.capture):
            g.close()
    c16.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "spin_us": SPIN_S * 1e6, "rows": rows, "host": host}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
