# SPDX-License-Identifier: Apache-2.0
"""dlstream kernels feeding torch.distributed collectives: two processes, one GPU each, NCCL.

Each rank fills a tensor and runs axpy with dlstream's built-ins, then all_reduce sums the results across the
ranks. Nothing synchronizes in between: the dlstream launches run on torch's current stream of the rank's device
(the DLPack C exchange API tells dlstream which it is), and NCCL's all_reduce is queued on that same stream, so it
runs after them, exactly as if they were torch ops.

    python examples/python/distributed.py            # needs 2 GPUs; prints "all_reduce results match"
                                                     # (without torch, 2 GPUs or NCCL: "skipped: <why>")
"""
import os
import sys
import tempfile

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast (NVLS) off: not needed here, and on a shared
# multi-GPU host a program using it can take the GPUs out of service for others

import dlstream  # noqa: E402

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(0)

N = 1 << 20
WORLD = 2


def run(rank, rendezvous):
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    # The ranks meet at a file: no TCP port to pick (a port found free by the parent may be taken before the ranks
    # bind it, and the ranks then wait for each other until the timeout).
    dist.init_process_group("nccl", init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD, device_id=device)
    try:
        x = torch.empty(N, device=device)
        y = torch.empty(N, device=device)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # a side stream, to show the work follows torch's current stream
            dlstream.fill(x, float(rank + 1))  # x = rank + 1
            dlstream.fill(y, 1.0)  # y = 1
            dlstream.axpy(2.0, x, y)  # y = 2 * (rank + 1) + 1, on `side`
            dist.all_reduce(y)  # queued on `side` too: after the axpy, no sync in between
            dist.all_reduce(x)
        torch.cuda.current_stream(device).wait_stream(side)
        want_y = sum(2.0 * (r + 1) + 1.0 for r in range(WORLD))
        want_x = sum(float(r + 1) for r in range(WORLD))
        ok = torch.equal(y, torch.full_like(y, want_y)) and torch.equal(x, torch.full_like(x, want_x))
        flags = torch.tensor([1 if ok else 0], device=device)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        if rank == 0:
            print("all_reduce results match" if flags.item() == 1 else f"MISMATCH: y[0] = {y[0].item()}, "
                  f"want {want_y}; x[0] = {x[0].item()}, want {want_x}")
        if flags.item() != 1:
            sys.exit(1)
    finally:
        dist.destroy_process_group()


def main():
    if not torch.cuda.is_available() or torch.cuda.device_count() < WORLD:
        print(f"skipped: needs {WORLD} CUDA GPUs; torch sees {torch.cuda.device_count()}")
        return 0
    if not dist.is_available() or not dist.is_nccl_available():
        print("skipped: this torch has no NCCL (torch.distributed.is_nccl_available() is False)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(run, args=(os.path.join(tmp, "rendezvous"),), nprocs=WORLD, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
