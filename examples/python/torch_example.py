# SPDX-License-Identifier: Apache-2.0
"""dlstream with PyTorch: a kernel launched on torch's current stream, ordered like a torch op; our tensors and
streams handed to torch; torch's events and streams wrapped. Needs torch with CUDA."""
import sys

import dlstream

try:
    import torch
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(0)
if not torch.cuda.is_available() or dlstream.device_count("cuda") == 0:
    print("skipped: no CUDA device")
    sys.exit(0)

axpy = dlstream.builtin_function("dls_axpy_f32", "cuda:0")  # signature u64,f32,cp,p
x = torch.arange(1024, dtype=torch.float32, device="cuda")
y = torch.ones(1024, device="cuda")

# No stream= and no use_stream(): the launch runs on torch.cuda.current_stream(), found through the DLPack C
# exchange API, with no host sync and no capsule per tensor.
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    axpy.launch(4, 256, 1024, 2.0, x, y)
    z = y * 1  # a torch op on the same stream sees the result
side.synchronize()
print("y[:4] =", z[:4].tolist())

# An explicit dlstream stream: it waits for torch's current stream, and x, y stay alive until it passes.
s = dlstream.Stream("cuda:0")
axpy.launch(4, 256, 1024, 1.0, x, y, stream=s)
torch.cuda.current_stream().wait_stream(torch.cuda.ExternalStream(s.ptr))  # torch sees our stream

# Our tensor to torch: torch's current stream waits for the fill on s.
t = dlstream.empty(1024, "float32", device="cuda:0", stream=s)
dlstream.fill(t, 3.0, stream=s)
tt = torch.from_dlpack(t)
print("sum of our tensor in torch:", tt.sum().item())

# torch's event, wrapped: our stream waits for torch's work.
ev = torch.cuda.Event()
ev.record()
s.wait(dlstream.Event.wrap(ev.cuda_event, device="cuda:0"))
s.synchronize()
print("torch example: ok")
