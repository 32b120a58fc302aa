# SPDX-License-Identifier: Apache-2.0
"""Capture dlstream work once, replay it many times: dlstream.capture on any backend, and inside
torch.cuda.graph when torch and a GPU are there. Runs on the CPU backend without a GPU."""
import sys

import dlstream

try:
    import numpy as np
except ImportError:
    print("skipped: NumPy is not installed")
    sys.exit(0)

dev = "cuda:0" if dlstream.device_count("cuda") > 0 else "cpu:0"
n = 1 << 16
s = dlstream.Stream(dev)
x = dlstream.empty(n, "float32", device=dev, stream=s)
y = dlstream.empty(n, "float32", device=dev, stream=s)
dlstream.fill(x, 1.0, stream=s)
dlstream.fill(y, 0.0, stream=s)

with dlstream.capture(s) as g:              # recorded, not run
    with dlstream.stream_parallel():
        with dlstream.branch():
            dlstream.axpy(2.0, x, y)        # y += 2x on a branch
    tmp = dlstream.empty(n, "float32", device=dev)
    dlstream.fill(tmp, 0.5)
    dlstream.axpy(1.0, tmp, y)              # y += 0.5 with a temporary that lives only in a replay
    tmp.close()

for _ in range(10):
    g.replay()
got = np.zeros(n, np.float32)
dlstream.copy(got, y, stream=s)             # read back after the replays, in s's order
s.synchronize()
assert np.allclose(got, 25.0), got[:4]
print(f"capture on {dev}: 10 replays, y = {got[0]}")
g.close()
x.close(), y.close(), s.close()

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
