# SPDX-License-Identifier: Apache-2.0
"""Capture dlstream work once, replay it many times: dlstream.capture on any backend (the example of
docs/python.md, "Graph capture"), then inside torch.cuda.graph when torch and a GPU are there. Runs on the CPU
backend without a GPU."""
import sys

import dlstream

try:
    import numpy as np
except ImportError:
    print("skipped: NumPy is not installed")
    sys.exit(0)

dev = dlstream.default_device()          # 'cuda:0' with a GPU, else 'cpu:0'
n = 1 << 16
s = dlstream.Stream(dev)
x = dlstream.empty(n, "float32", device=dev, stream=s)   # empty() leaves the memory uninitialised:
y = dlstream.empty(n, "float32", device=dev, stream=s)
dlstream.fill(x, 1.0, stream=s)          # write it before use (eager: these run)
dlstream.fill(y, 0.0, stream=s)

with dlstream.capture(s) as g:           # records the block's work on s; runs none of it
    with dlstream.stream_parallel():     # groups, nested ones too, are recorded as forks and joins
        with dlstream.branch():
            dlstream.axpy(2.0, x, y)     # y += 2 x on a branch
    t = dlstream.empty(n, "float32", device=dev)   # a graph allocation ...
    dlstream.fill(t, 0.5)
    dlstream.axpy(1.0, t, y)             # y += 0.5
    t.close()                            # ... freed inside the graph

for _ in range(10):
    g.replay()                           # queued on s: the host does not wait
out = np.empty(n, np.float32)
dlstream.copy(out, y, stream=s)          # after the replays (from a GPU: staged, and this call blocks)
s.synchronize()                          # wait for s before reading `out` on the host
assert (out == 25.0).all(), out[:4]      # 10 replays of y += 2.5
print(f"capture on {dev}: {g.replays} replays, y = {out[0]}")
g.close()
for obj in (x, y, s):
    obj.close()

try:
    import torch
except ImportError:
    torch = None
if torch is not None and torch.cuda.is_available() and dlstream.device_count("cuda") > 0:
    a = torch.ones(n, device="cuda")
    b = torch.zeros(n, device="cuda")
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        dlstream.axpy(3.0, a, b)            # on torch's capturing stream
    for _ in range(4):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(b, torch.full_like(b, 12.0))
    print("torch.cuda.graph: 4 replays of a dlstream launch, b =", b[0].item())
else:
    print("torch.cuda.graph part skipped: needs torch with CUDA and a CUDA device")
