# SPDX-License-Identifier: Apache-2.0
"""A model with dlstream.torch operators trained by two processes, and the same model in plain torch trained on the
whole batch in one: `python distributed_child.py MODE KIND` (tests/python/test_distributed.py runs it).

MODE: ddp (DistributedDataParallel), ddp_compile (torch.compile of the DDP module), fsdp2
(torch.distributed.fsdp.fully_shard). KIND: cuda (NCCL, rank r on cuda:r) or cpu (gloo, the CPU backend). Each rank
trains on its half of each batch; gradients are averaged across the ranks, so the parameters must end as the plain
model's trained on the whole batches. The dlstream operators: scale(a, x) (the axpy built-in, with a backward that
is scale itself) in the hidden layer, and on CUDA mul(x, y) compiled from source on the inputs. Rank 0 prints
"<mode> <kind>: max |dlstream - plain torch| = <d> over <n> parameters" and exits 1 when d is above 1e-4."""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import dlstream
import dlstream.torch as dt

WORLD, STEPS, BATCH, DIM, HID = 2, 6, 8, 32, 64
TOL = 1e-4
MUL_SRC = r'''
extern "C" __global__ void mul(const float *x, const float *y, float *out, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * y[i];
}
'''


def operators(device):
    """dlstream's scale (with autograd) and, on CUDA, mul from source, as torch operators of this process."""
    axpy = dlstream.builtin_function("dls_axpy_f32", device)

    def backward(ctx, grad):
        return None, scale(ctx.a, grad)

    def setup_context(ctx, inputs, output):
        ctx.a = inputs[0]

    scale = dt.op("dlsdist::scale", axpy, params="n, a, x, out", compute={"n": dt.numel("x")},
                  outputs={"out": dt.output("x", zeros=True)}, grid=dt.cdiv("n", 256), block=256,
                  dtypes={"x": torch.float32}, backward=backward, setup_context=setup_context)
    mul = None
    if device.startswith("cuda"):
        mod = dlstream.Module.from_source(MUL_SRC, device=device)
        mul = dt.op("dlsdist::mul", mod.function("mul", "cp,cp,p,u64"), params="x, y, out, n",
                    compute={"n": dt.numel("x")}, outputs={"out": dt.output("x")}, grid=dt.cdiv("n", 128),
                    block=128, dtypes={"x": torch.float32, "y": torch.float32})
    return scale, mul


class Net(torch.nn.Module):
    def __init__(self, scale=None, mul=None):
        super().__init__()
        self.lin1 = torch.nn.Linear(DIM, HID)
        self.lin2 = torch.nn.Linear(HID, 1)
        self.scale, self.mul = scale, mul

    def forward(self, x, mask):
        x = self.mul(x, mask) if self.mul is not None else x * mask
        h = self.lin1(x)
        h = self.scale(0.5, h) if self.scale is not None else 0.5 * h
        return self.lin2(torch.relu(h))


def batches(device):
    g = torch.Generator().manual_seed(1234)
    xs = torch.randn(STEPS, WORLD * BATCH, DIM, generator=g)
    ys = torch.randn(STEPS, WORLD * BATCH, 1, generator=g)
    mask = (torch.rand(DIM, generator=g) > 0.2).float()
    return xs.to(device), ys.to(device), mask.expand(WORLD * BATCH, DIM).contiguous().to(device)


def train(model, xs, ys, mask):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(STEPS):
        opt.zero_grad()
        loss = ((model(xs[i], mask) - ys[i]) ** 2).mean()
        loss.backward()
        opt.step()


def full_parameters(model):
    """name -> the whole parameter (FSDP2's shards gathered), names without the wrappers' prefixes."""
    out = {}
    for name, p in model.named_parameters():
        for prefix in ("_orig_mod.", "module."):
            name = name.replace(prefix, "")
        out[name] = (p.full_tensor() if hasattr(p, "full_tensor") else p).detach()
    return out


def run(rank, mode, kind, rendezvous):
    init = f"file://{rendezvous}"  # a file both ranks meet at: no port to find
    if kind == "cuda":
        torch.cuda.set_device(rank)
        device = f"cuda:{rank}"
        dist.init_process_group("nccl", init_method=init, rank=rank, world_size=WORLD, device_id=torch.device(device))
    else:
        device = "cpu"
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    try:
        scale, mul = operators(device)
        torch.manual_seed(0)
        net = Net(scale, mul).to(device)
        torch.manual_seed(0)
        plain = Net().to(device)
        xs, ys, mask = batches(device)
        part = slice(rank * BATCH, (rank + 1) * BATCH)
        if mode == "fsdp2":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh(kind, (WORLD,))
            fully_shard(net.lin1, mesh=mesh)
            fully_shard(net.lin2, mesh=mesh)
            model = fully_shard(net, mesh=mesh)
        else:
            model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[rank] if kind == "cuda" else None)
            if mode == "ddp_compile":
                model = torch.compile(model)
        train(model, xs[:, part], ys[:, part], mask[part])
        train(plain, xs, ys, mask)  # one process, the whole batches
        got, want = full_parameters(model), full_parameters(plain)
        assert got.keys() == want.keys(), (sorted(got), sorted(want))
        diff = max(float((got[k] - want[k]).abs().max()) for k in want)
        worst = torch.tensor([diff], device=device)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"{mode} {kind}: max |dlstream - plain torch| = {float(worst):.2e} over {len(want)} parameters",
                  flush=True)
        if float(worst) > TOL:
            sys.exit(1)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    mode, kind = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(run, args=(mode, kind, os.path.join(tmp, "rendezvous")), nprocs=WORLD, join=True)
