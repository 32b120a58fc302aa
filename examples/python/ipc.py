# SPDX-License-Identifier: Apache-2.0
"""A tensor handed to another process with its ordering (docs/ipc.md): the exporter writes it with a kernel, exports
it and frees it at once; the importer's work waits for that write, on the device, and the memory lives until the
importer is done with it. No host waits for the other process's GPU work.

    python examples/python/ipc.py    # needs a CUDA device; prints "the other process (cuda:N) read 7.0 ..." and
                                     # "ipc example: ok"
                                     # (two GPUs: the importer runs on the second, over peer access)
"""
import multiprocessing as mp
import sys

import dlstream

try:
    import numpy as np
except ImportError:
    print("skipped: NumPy is not installed")
    sys.exit(0)

N = 1 << 20


def importer(device, conn):
    handle = conn.recv()
    s = dlstream.Stream(device)
    x = dlstream.from_ipc(handle, stream=s)  # s waits for the exporter's write first, on the device
    y = dlstream.empty(N, "float32", device=device, stream=s)
    dlstream.fill(y, 1.0, stream=s)
    dlstream.axpy(2.0, x, y, stream=s)  # y = 2 x + 1, after the exporter's fill
    x.close()  # the exporter's memory is done with once the axpy has run
    host = np.zeros(N, np.float32)
    dlstream.copy(host, y, stream=s)  # a host array: the copy blocks until it is back
    conn.send(float(host[0]))


def main():
    if dlstream.device_count("cuda") == 0:
        print("skipped: no CUDA device (" + dlstream.backend_available("cuda")[1] + ")")
        return 0
    there = "cuda:1" if dlstream.device_count("cuda") > 1 else "cuda:0"
    ctx = mp.get_context("spawn")  # a fresh process: CUDA does not survive fork()
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=importer, args=(there, theirs))
    child.start()
    s = dlstream.Stream("cuda:0")
    t = dlstream.empty(N, "float32", device="cuda:0", stream=s, ipc=True)
    dlstream.fill(t, 1.0, stream=s)
    dlstream.axpy(2.0, t, t, stream=s)  # t = 3: the last write before the export
    mine.send(t.ipc_handle(stream=s))  # s records the export's event after the axpy
    t.close()  # at once: the memory waits for the importer's close
    got = mine.recv()
    child.join()
    print(f"the other process ({there}) read {got}: 2 * 3 + 1, after the exporter's write of 3")
    if got != 7.0 or child.exitcode != 0:
        return 1
    print("ipc example: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
