# SPDX-License-Identifier: Apache-2.0
"""Fork/join replayed from a graph: K independent one-block ~200 µs kernels captured once (serially, and as a
fork/join) and replayed, with dlstream.capture and with torch.cuda.graph, in one run. Reports the wall-time
speedup of the fork/join replay over the serial replay captured the same way, and the host cost of one replay
beside an eager group.

  python3 bench/bench_capture.py [--json out.json] [--reps 9] [--smoke]

Without CUDA or torch it prints "skipped: <reason>" and exits 0. --smoke (CI): K = 2 and a few calls; without torch's
CUDA, dlstream.capture on the CPU backend and the same tables, torch.cuda.graph's columns skipped."""
import argparse
import json
import sys

import gpubench

KS = (2, 4, 8, 16, 32)
SPIN_S = 200e-6


def dls_bodies(dlstream, torch):
    """dlstream's bodies to capture: K spins serially, and as a fork/join."""
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

    return dls_serial, dls_forkjoin


def dls_graph(dlstream, dev, body, k):
    c = dlstream.capture(device=dev)
    with c:
        body(k)
    return c, c.replay


def dls_group16(dlstream, dev, origin):
    """A capture of one group of 16 branches of an empty kernel, and the same group run eagerly from `origin()`."""
    empty = dlstream.builtin_function("dls_empty", dev)

    def eager_group():
        with dlstream.stream_parallel(origin()):
            for _ in range(16):
                with dlstream.branch():
                    empty.launch(1, 1)

    c16 = dlstream.capture(device=dev)
    with c16:
        with dlstream.stream_parallel():
            for _ in range(16):
                with dlstream.branch():
                    empty.launch(1, 1)
    return c16, eager_group


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--reps", type=int, default=9)
    gpubench.add_smoke(p)
    args = gpubench.smoke(p.parse_args())
    found = gpubench.torch_and_dlstream()
    if found is None:
        return smoke_cpu(args) if args.smoke else 0
    torch, dlstream = found
    dev = "cuda:0"
    cycles = gpubench.sleep_cycles(torch, SPIN_S)
    side = [torch.cuda.Stream() for _ in range(max(KS))]
    dls_serial, dls_forkjoin = dls_bodies(dlstream, torch)

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

    def dls_make(body, k):
        return dls_graph(dlstream, dev, body, k)

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
    for k in KS[:1] if args.smoke else KS:
        r = {"k": k}
        for label, make, serial, fj in (("dls", dls_make, dls_serial, dls_forkjoin),
                                        ("torch", torch_graph, torch_serial, torch_forkjoin),
                                        ("dls_in_torch", torch_graph, dls_serial, dls_forkjoin)):
            gs, rs = make(serial, k)
            gf, rf = make(fj, k)
            keep += [gs, gf]
            r[f"{label}_serial_ms"] = wall_ms(rs)
            r[f"{label}_forkjoin_ms"] = wall_ms(rf)
        rows.append(speedups(r))

    # host time of one replay call (queued, not waited for) beside one eager group of 16 branches
    def host_us(fn, n=300):
        def calls(m):
            for _ in range(m):
                fn()
        return gpubench.host_us(torch, calls, 10 if args.smoke else n, args.reps, warm=fn)

    c16, eager_group = dls_group16(dlstream, dev, lambda: dlstream.Stream.wrap(torch.cuda.current_stream()))
    t16 = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(t16):
        eager_group()
    host = {"dls_replay_group16_us": host_us(c16.replay), "torch_replay_group16_us": host_us(t16.replay),
            "dls_eager_group16_us": host_us(eager_group)}
    report(args, torch.cuda.get_device_name(), rows, host)
    for g in keep:
        if isinstance(g, dlstream.capture):
            g.close()
    c16.close()
    return 0


def speedups(r):
    """Adds each label's speedup (serial replay / fork-join replay; None where it was skipped)."""
    for label in ("dls", "torch", "dls_in_torch"):
        a, b = r.get(f"{label}_serial_ms"), r.get(f"{label}_forkjoin_ms")
        r[f"{label}_serial_ms"], r[f"{label}_forkjoin_ms"] = a, b
        r[f"{label}_speedup"] = a / b if a is not None and b else None
    return r


def smoke_cpu(args):
    """--smoke without torch's CUDA: dlstream.capture on the CPU backend (K = 2, a few calls), the same tables;
    torch.cuda.graph's columns skipped."""
    import dlstream
    print("smoke: no torch with CUDA: dlstream.capture on the CPU backend; skipped: torch.cuda.graph's columns")
    dev = "cpu"
    origin = dlstream.Stream(dev)
    sync = origin.synchronize
    dls_serial, dls_forkjoin = dls_bodies(dlstream, None)
    rows, keep = [], []
    for k in KS[:1]:
        r = {"k": k}
        for kind, body in (("serial", dls_serial), ("forkjoin", dls_forkjoin)):
            g, replay = dls_graph(dlstream, dev, body, k)
            keep.append(g)
            r[f"dls_{kind}_ms"] = gpubench.wall_ms(lambda: dlstream.synchronize(dev), replay, args.reps)
        rows.append(speedups(r))
    c16, eager_group = dls_group16(dlstream, dev, lambda: origin)

    def host_us(fn):
        def calls(m):
            for _ in range(m):
                fn()
        return gpubench.host_us(lambda: dlstream.synchronize(dev), calls, 10, args.reps, warm=fn)

    host = {"dls_replay_group16_us": host_us(c16.replay), "torch_replay_group16_us": None,
            "dls_eager_group16_us": host_us(eager_group)}
    report(args, "CPU backend (smoke)", rows, host)
    for g in keep + [c16]:
        g.close()
    sync()
    origin.close()
    return 0


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def report(args, name, rows, host):
    """The tables, the K=16 line (or the largest K run) and the JSON."""
    print(f"### Fork/join replayed from a graph on {name}\n")
    print(f"K one-block kernels of {SPIN_S * 1e6:.0f} µs captured once; wall ms of one replay to the device's "
          f"synchronize, median of {args.reps}; speedup = serial replay / fork-join replay\n")
    print("| K | dlstream.capture serial | fork/join | speedup | torch.cuda.graph serial | fork/join (torch idiom) "
          "| speedup | dlstream group in torch.cuda.graph: serial | fork/join | speedup |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['k']} | " + " | ".join(
            fmt(r[f"{label}_{what}"], ".2f" if what == "speedup" else ".3f")
            for label in ("dls", "torch", "dls_in_torch") for what in ("serial_ms", "forkjoin_ms", "speedup")) + " |")
    print("\n| host cost, group of 16 empty kernels | µs |\n| --- | ---: |")
    for key, v in host.items():
        print(f"| {key} | {fmt(v, '.2f')} |")
    big = next((r for r in rows if r["k"] == 16), rows[-1])
    print(f"\nspeedup at K={big['k']}: dlstream.capture {fmt(big['dls_speedup'], '.1f')}, torch.cuda.graph "
          f"{fmt(big['torch_speedup'], '.1f')}, dlstream in torch.cuda.graph {fmt(big['dls_in_torch_speedup'], '.1f')} "
          "(target >= 14 at K=16)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "spin_us": SPIN_S * 1e6, "rows": rows, "host": host}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
