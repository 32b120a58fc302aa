# SPDX-License-Identifier: Apache-2.0
"""A model with dlstream.torch operators trained under torch.distributed by two processes (no torchrun: spawned
with torch.multiprocessing) ends with the parameters of the same model in plain torch trained on the whole batches:
under DistributedDataParallel, DDP compiled with torch.compile, and FSDP2 (torch.distributed.fsdp.fully_shard).
tests/python/distributed_child.py is the training; here each mode runs on two GPUs (NCCL) and on the CPU backend
(gloo), where torch has what it needs."""
import os
import re
import subprocess
import sys

import pytest

import dlstream
from conftest import torch

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_child.py")
MODES = ["ddp", "ddp_compile", "fsdp2"]


def _why_not(kind, mode):
    """Why this machine cannot run `mode` on `kind`, or None."""
    if torch is None:
        return "torch is not installed"
    import torch.distributed as dist
    if not dist.is_available():
        return "this torch has no torch.distributed"
    if mode == "fsdp2":
        try:
            from torch.distributed.fsdp import fully_shard  # noqa: F401 - torch >= 2.6
        except ImportError:
            return f"torch {torch.__version__} has no torch.distributed.fsdp.fully_shard (FSDP2)"
    if kind == "cuda":
        if not torch.cuda.is_available() or torch.cuda.device_count() < 2 or dlstream.device_count("cuda") < 2:
            return f"needs 2 CUDA GPUs; torch sees {torch.cuda.device_count() if torch.cuda.is_available() else 0}"
        if not dist.is_nccl_available():
            return "this torch has no NCCL"
    elif not dist.is_gloo_available():
        return "this torch has no gloo"
    return None


@pytest.mark.parametrize("kind", ["cuda", "cpu"])
@pytest.mark.parametrize("mode", MODES)
def test_trains_to_the_parameters_of_plain_torch(mode, kind):
    why = _why_not(kind, mode)
    if why:
        pytest.skip(why)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off (the lent machines' notes)
    r = subprocess.run([sys.executable, CHILD, mode, kind], capture_output=True, text=True, timeout=900, env=env)
    line = re.search(rf"{mode} {kind}: max \|dlstream - plain torch\| = (\S+) over (\d+) parameters", r.stdout)
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-4000:]
    assert float(line.group(1)) <= 1e-4 and int(line.group(2)) == 4, line.group(0)
