#!/usr/bin/python3
"""gloo_bench.py - Gloo's twin of tide-perf and tide-overlap, through
Debian's python3-torch (torch.distributed, backend "gloo"), so that
tools/compare.sh can set Gloo beside tide in one run.  With --backend
tide it measures tide's torch.distributed backend (tide.torch) the same
way, for the rows that set the two backends side by side; its records
say "tool": "torch-tide".

    tide-run -n 4 -- /usr/bin/python3 tools/gloo_bench.py [--op LIST]
        -b 8 -e 64M -f 4 -n 20 -w 5 [--json FILE]
    tide-run -n 4 -- /usr/bin/python3 tools/gloo_bench.py --overlap
        [--compute busy|sleep] [-t TESTS] -b 64K -e 16M -f 4 [--json FILE]

Ranks join through env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
what tide-run and torchrun export).  The conventions are tide-perf's
(tools/common/bench_common.c) and mpi_coll_bench.c's: float32 sum; "bytes" is
nccl-tests' size, rounded down to whole per-rank blocks (a size with no
whole element is skipped); time is the slowest rank's mean per call;
busbw = algbw times nccl-tests' factor; the first warm-up call's result is
checked.  Gloo's allreduce and broadcast work in place, so those records
say "inplace": true.  Gloo in torch 1.13 has no reduce_scatter: asked for
it, the tool prints so and writes no record.

Overlap mode is OSU's method as tools/perf/overlap.c does it: t_pure
(all_reduce(async_op=True) + wait), t_overall (post, a compute lasting
t_pure alone: a calibrated busy loop or a sleep, wait), t_cpu (that
compute, timed inside the call), each averaged over ranks, a barrier
(untimed) after every call; overlap % = max(0, 100 (1 - (t_overall -
t_cpu) / t_pure)).  Gloo runs the collective on its own C++ threads, which
do not need the GIL, so the Python busy loop does not stall it except by
competing for a core.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast")
TOOL = {"gloo": "gloo", "tide": "torch-tide"}  # the records' "tool"
BUS_FACTOR = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1:].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", default=",".join(OPS), help="comma-separated collectives")
    p.add_argument("-b", type=parse_size, default=8, help="smallest size, bytes (K/M/G)")
    p.add_argument("-e", type=parse_size, default=64 << 20, help="largest size, bytes")
    p.add_argument("-f", type=int, default=2, help="size multiplier")
    p.add_argument("-n", type=int, default=20, help="timed calls per size")
    p.add_argument("-w", type=int, default=5, help="warm-up calls per size")
    p.add_argument("--overlap", action="store_true", help="OSU overlap of all_reduce")
    p.add_argument("--compute", choices=("busy", "sleep"), default="busy")
    p.add_argument("-t", type=int, default=0, help="work.is_completed() calls in compute")
    p.add_argument("--json", help="write the records here (rank 0)")
    p.add_argument("--backend", choices=("gloo", "tide"), default="gloo",
                   help="torch.distributed backend (tide: import tide.torch)")
    args = p.parse_args()
    args.op = args.op.split(",")
    if any(op not in OPS for op in args.op) or args.f < 2 or args.n < 1:
        p.error("bad --op, -f or -n")
    return args


def sizes(args):
    s = args.b
    while s <= args.e:
        yield s
        s *= args.f


def pattern(rank, count):
    """Small integers, so float sums over a few ranks are exact."""
    return ((torch.arange(count) % 7 + 1) * (rank + 1)).float()


def mean_over_ranks(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def max_over_ranks(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


class Call:
    """One collective of one size: buffers, the call, and its check."""

    def __init__(self, op, nbytes, rank, n):
        count = nbytes // 4
        self.per_rank = count // n
        if op in ("allgather", "reduce_scatter"):
            count = self.per_rank * n
        self.op, self.count, self.rank, self.n = op, count, rank, n
        self.inplace = op in ("allreduce", "broadcast")
        if op == "allgather":
            self.send = pattern(rank, count)[rank * self.per_rank:(rank + 1) * self.per_rank]
            self.recv = torch.empty(count)
            self.views = list(self.recv.chunk(n))  # all_gather writes into these
        else:
            root_or_reducing = op != "broadcast" or rank == 0
            self.send = pattern(rank, count) if root_or_reducing else torch.zeros(count)

    def run(self):
        if self.op == "allreduce":
            dist.all_reduce(self.send)
        elif self.op == "allgather":
            dist.all_gather(self.views, self.send)
        else:
            dist.broadcast(self.send, src=0)

    def wrong(self):
        """Wrong elements after the first call."""
        if self.op == "allreduce":
            want = pattern(0, self.count) * (self.n * (self.n + 1) // 2)
            got = self.send
        elif self.op == "allgather":
            want = torch.cat([pattern(r, self.count)[r * self.per_rank:(r + 1) * self.per_rank]
                              for r in range(self.n)])
            got = self.recv
        else:
            want, got = pattern(0, self.count), self.send
        return int((got != want).sum().item())


def perf(args, rank, n, out):
    if rank == 0:
        print(f"{'# op':15} {'bytes':>10} {'count':>10} {'time_us':>10} {'algbw':>8} "
              f"{'busbw':>8} {'wrong':>6}")
    failed = False
    for op in OPS:
        if op not in args.op:
            continue
        if op == "reduce_scatter":
            if rank == 0:
                print("reduce_scatter: not measured (Gloo in torch", torch.__version__,
                      "has none)")
            continue
        for nbytes in sizes(args):
            call = Call(op, nbytes, rank, n)
            if call.count == 0:
                continue
            call.run()
            wrong = call.wrong()
            if call.inplace:
                call.send.zero_()  # so timed in-place sums do not grow into infinities
            for _ in range(args.w - 1):
                call.run()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.n):
                call.run()
            us = max_over_ranks((time.perf_counter() - t0) * 1e6 / args.n)
            wrong = int(round(mean_over_ranks(wrong) * n))
            failed |= wrong != 0
            nb = call.count * 4
            algbw = nb / us / 1e3
            busbw = algbw * BUS_FACTOR[op](n)
            if rank == 0:
                print(f"{op:15} {nb:10} {call.count:10} {us:10.1f} {algbw:8.3f} {busbw:8.3f} "
                      f"{wrong:6}")
            out.append({"tool": TOOL[args.backend], "op": op, "ranks": n, "bytes": nb,
                        "count": call.count,
                        "dtype": "float", "redop": "none" if op == "broadcast" else "sum",
                        "root": 0 if op == "broadcast" else -1, "algo": "default",
                        "inplace": call.inplace, "time_us": round(us, 3),
                        "algbw_gbps": round(algbw, 6), "busbw_gbps": round(busbw, 6),
                        "wrong": wrong})
    return failed


def busy(units):
    """A dependent chain of multiply-adds (tools/perf/overlap.c's): fixed work,
    so when communication takes the CPU from it, it runs longer."""
    x = 0.0
    for _ in range(int(units)):
        x = x * 0.9999999 + 1e-7
    return x


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def calibrate():
    """Busy-loop units per microsecond: the fastest of a few runs."""
    units = 1 << 15
    best = min(timed(lambda: busy(units)) for _ in range(5))
    return units / (best * 1e6)


def compute(args, us, units_per_us, work):
    """Compute for what lasts us alone, in -t slices with a test after each
    (work None: no tests)."""
    slices = args.t if work is not None and args.t > 0 else 1
    for _ in range(slices):
        if args.compute == "sleep":
            time.sleep(us / slices / 1e6)
        else:
            busy(us * units_per_us / slices)
        if work is not None and args.t > 0:
            work.is_completed()


def iallreduce_loop(args, tensor, iters, cpu_us, units_per_us):
    """Mean us per call of: post, compute for cpu_us (none if < 0), wait;
    of the compute inside them; and the median of the calls' time outside
    the compute.  A barrier after each call, untimed."""
    dist.barrier()
    total = computing = 0.0
    outside = []
    for _ in range(iters):
        t0 = time.perf_counter()
        work = dist.all_reduce(tensor, async_op=True)
        c0 = time.perf_counter()
        if cpu_us >= 0:
            compute(args, cpu_us, units_per_us, work)
        c1 = time.perf_counter()
        work.wait()
        t1 = time.perf_counter()
        computing += c1 - c0
        total += t1 - t0
        outside.append((t1 - t0 - (c1 - c0)) * 1e6)
        dist.barrier()
    per = max(iters, 1)
    return total / per * 1e6, computing / per * 1e6, statistics.median(outside or [0.0])


def hidden_pct(exposed, pure):
    """100 (1 - exposed / pure), within 0..100 (tools/perf/overlap.c's)."""
    return min(100.0, max(0.0, 100.0 * (1.0 - exposed / pure))) if pure > 0 else 0.0


def overlap(args, rank, n, out):
    units_per_us = calibrate()
    for nbytes in sizes(args):
        if nbytes // 4 == 0:
            continue
        tensor = pattern(rank, nbytes // 4)
        iallreduce_loop(args, tensor, args.w, -1, units_per_us)
        pure, _, pure_med = iallreduce_loop(args, tensor, args.n, -1, units_per_us)
        overall, cpu, exposed_med = iallreduce_loop(args, tensor, args.n, pure, units_per_us)
        pure, cpu, overall, pure_med, exposed_med = (
            mean_over_ranks(v) for v in (pure, cpu, overall, pure_med, exposed_med))
        pct = hidden_pct(overall - cpu, pure)
        pct_med = hidden_pct(exposed_med, pure_med)  # as tide-overlap's Med.Ovl
        nb = tensor.numel() * 4
        if rank == 0:
            print(f"overlap {args.compute:6} {nb:10}  pure {pure:10.1f}  cpu {cpu:10.1f}"
                  f"  overall {overall:10.1f} us  {pct:5.1f} %  (medians {pct_med:5.1f} %)")
        out.append({"tool": TOOL[args.backend], "op": "allreduce", "ranks": n, "bytes": nb,
                    "compute": args.compute, "tests": args.t, "t_pure_us": round(pure, 3),
                    "t_cpu_us": round(cpu, 3), "t_overall_us": round(overall, 3),
                    "overlap_pct": round(pct, 2), "t_pure_median_us": round(pure_med, 3),
                    "t_exposed_median_us": round(exposed_med, 3),
                    "overlap_median_pct": round(pct_med, 2)})
    return False


def main():
    args = parse_args()
    # Gloo picks its interface from the hostname, which in a container may
    # not resolve; everything here is on one machine, so use loopback.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if args.backend == "tide":
        import tide.torch  # noqa: F401  registers the backend
    dist.init_process_group(args.backend, init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    out = []
    failed = (overlap if args.overlap else perf)(args, rank, n, out)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    dist.barrier()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
