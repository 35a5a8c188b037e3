"""rank_fsdp.py - PyTorch's own sharded data parallel on a backend (the
first argument: tide or gloo): FSDP (torch.distributed.fsdp's
FullyShardedDataParallel, FULL_SHARD and SHARD_GRAD_OP), fully_shard
(FSDP2, torch 2.6 and later, over a DeviceMesh) and DDP, each trained a
few steps on every rank's slice of one global batch and compared with
the same model trained here on the whole batch.

Debian's torch 1.13 cannot import torch.distributed.fsdp on Python 3.11
(its bug), and FSDP2 came with torch 2.6: a case whose torch lacks it
says "skip NAME: why" instead of "ok", and the caller decides what that
means (test_torch.py runs the DDP case here; the others run on a host
with torch 2.x, tools/device_compare.sh).
"""
import copy
import datetime
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import tide.torch  # noqa: F401  registers "tide"
from rankcases import main

BACKEND = sys.argv.pop(1) if len(sys.argv) > 1 else "tide"  # the rest are case names
STEPS = 3
BATCH = 8  # a rank's; the global batch is BATCH x world size


class Skip(Exception):
    """This torch has no such thing: the case says so and passes."""


def model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 4))


def global_batch(step, n):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(BATCH * n, 16, generator=g), torch.randn(BATCH * n, 4, generator=g)


def train(net, r, n, whole):
    """STEPS of SGD on the rank's slice (whole: on the global batch)."""
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    losses = []
    for step in range(STEPS):
        x, y = global_batch(step, n)
        if not whole:
            x, y = x[r * BATCH:(r + 1) * BATCH], y[r * BATCH:(r + 1) * BATCH]
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def reference(n):
    net = model()
    train(net, 0, n, whole=True)
    return [p.detach().clone() for p in net.parameters()]


def expect_close(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} parameters, not {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.allclose(g, w, rtol=1e-4, atol=1e-5), \
            f"{what}: parameter {i} differs by {(g - w).abs().max().item():.3g}"


def fsdp_module():
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
    except Exception as e:  # Debian's 1.13 on Python 3.11: its bug
        raise Skip(f"torch {torch.__version__} cannot import FSDP: {e}")
    return FullyShardedDataParallel, ShardingStrategy


def fsdp_case(strategy_name):
    def case(ctx):
        r, n = ctx
        FSDP, ShardingStrategy = fsdp_module()
        net = FSDP(model(), sharding_strategy=getattr(ShardingStrategy, strategy_name),
                   device_id=torch.device("cpu"), use_orig_params=True)
        train(net, r, n, whole=False)
        with FSDP.summon_full_params(net):
            got = [p.detach().clone() for p in net.parameters()]
        expect_close(got, reference(n), f"FSDP {strategy_name}")
    return case


def case_fsdp2(ctx):
    r, n = ctx
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
    except Exception as e:
        raise Skip(f"torch {torch.__version__} has no fully_shard: {e}")
    mesh = init_device_mesh("cpu", (n,))
    net = model()
    for layer in net:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    train(net, r, n, whole=False)
    got = [p.full_tensor().detach().clone() for p in net.parameters()]
    expect_close(got, reference(n), "fully_shard")


def case_ddp(ctx):
    r, n = ctx
    net = nn.parallel.DistributedDataParallel(model())
    train(net, r, n, whole=False)
    expect_close([p.detach().clone() for p in net.parameters()], reference(n), "DDP")


def skipping(name, case):
    def run(ctx):
        try:
            case(ctx)
        except Skip as e:
            print(f"skip {name}: {e}", flush=True)
    return name, run


CASES = dict([
    ("ddp", case_ddp),
    skipping("fsdp_full_shard", fsdp_case("FULL_SHARD")),
    skipping("fsdp_shard_grad_op", fsdp_case("SHARD_GRAD_OP")),
    skipping("fsdp2", case_fsdp2),
])


def setup():
    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=60))
    print(f"torch {torch.__version__} on {BACKEND}, rank {dist.get_rank()} of "
          f"{dist.get_world_size()}", flush=True)
    return dist.get_rank(), dist.get_world_size()


if __name__ == "__main__":
    main(CASES, setup, lambda ctx: dist.destroy_process_group())
