#!/usr/bin/python3
"""ddp_demo.py - data-parallel training with torch's DistributedDataParallel
over tide (or Gloo), on scikit-learn's bundled handwritten digits (1797
8x8 images, shipped in python3-sklearn: nothing is downloaded).

    tide-run -n 4 -- /usr/bin/python3 tools/ddp_demo.py --backend tide [--save F] [--compare F]

Every rank starts from the same seeded model and reads its quarter of each
global batch; DDP averages the gradients across ranks after every
backward (one all_reduce per gradient bucket).  Per epoch it prints the
mean training loss over all ranks; at the end the test accuracy and the
median time per step (forward + backward with its all_reduce + SGD step)
after the first epoch, the slowest rank's.  --save writes the final
parameters (rank 0); --compare checks them against a saved run, e.g.
Gloo's: the same data, order and arithmetic, so they must agree up to
float rounding (the sums are added in a different order).
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_digits


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("tide", "gloo"), default="tide")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=64, help="global batch (split over the ranks)")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--save", help="write the final parameters here (rank 0)")
    p.add_argument("--compare", help="check the final parameters against this file")
    p.add_argument("--json", help="append a record of the run to this JSON array (rank 0)")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest allowed |difference| / (1 + |value|) in --compare")
    return p.parse_args()


def dataset():
    """Digits scaled to [0, 1], a fixed 1500/297 train/test split."""
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))
    x, y = x[order], y[order]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def model(hidden):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def train(args, rank, n):
    (xtr, ytr), (xte, yte) = dataset()
    ddp = nn.parallel.DistributedDataParallel(model(args.hidden))
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    per_rank = args.batch // n
    steps = len(xtr) // args.batch
    step_ms = []
    for epoch in range(args.epochs):
        order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(100 + epoch))
        total = torch.zeros(1, dtype=torch.float64)
        for s in range(steps):
            idx = order[s * args.batch + rank * per_rank:s * args.batch + (rank + 1) * per_rank]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = loss_fn(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            if epoch > 0:
                step_ms.append((time.perf_counter() - t0) * 1e3)
            total += loss.item()
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1:2d}  loss {total.item() / (steps * n):.4f}", flush=True)
    with torch.no_grad():
        accuracy = (ddp.module(xte).argmax(1) == yte).float().mean().item()
    median = torch.tensor([statistics.median(step_ms) if step_ms else 0.0], dtype=torch.float64)
    dist.all_reduce(median, op=dist.ReduceOp.MAX)
    return ddp.module, accuracy, median.item()


def compare(params, path, tolerance):
    saved = torch.load(path)
    worst = 0.0
    for name, p in params.items():
        diff = ((p - saved[name]).abs() / (1 + saved[name].abs())).max().item()
        worst = max(worst, diff)
    ok = worst <= tolerance
    print(f"parameters vs {path}: largest relative difference {worst:.2e} "
          f"({'within' if ok else 'OVER'} {tolerance:.0e})")
    return ok


def write_record(args, n, accuracy, ms):
    """For tools/compare.sh: one record per run, appended."""
    import json
    records = json.load(open(args.json)) if os.path.exists(args.json) else []
    records.append({"tool": "ddp", "backend": args.backend, "ranks": n, "epochs": args.epochs,
                    "batch": args.batch, "hidden": args.hidden, "ms_per_step": round(ms, 3),
                    "accuracy": round(accuracy, 4)})
    with open(args.json, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


def main():
    args = parse_args()
    torch.set_num_threads(1)  # ranks share this machine's cores
    if args.backend == "tide":
        import tide.torch  # noqa: F401  registers the backend
    else:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(args.backend, init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    if args.batch % n:
        sys.exit(f"--batch {args.batch} does not split over {n} ranks")
    net, accuracy, ms = train(args, rank, n)
    ok = True
    if rank == 0:
        print(f"{args.backend}: {n} ranks, test accuracy {accuracy:.3f}, "
              f"{ms:.2f} ms/step (median after epoch 1, slowest rank)")
        params = {k: v.detach().clone() for k, v in net.state_dict().items()}
        if args.save:
            torch.save(params, args.save)
        if args.json:
            write_record(args, n, accuracy, ms)
        if args.compare:
            ok = compare(params, args.compare, args.tolerance)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
