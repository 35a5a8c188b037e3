#!/usr/bin/python3
"""py_overhead.py - what the tide Python package adds per call over C, for
an 8-byte allreduce (two float32, sum), measured in one job with the
variants interleaved round by round, so a noisy neighbour hits them alike.

    tide-run -n 2 -- /usr/bin/python3 tools/py_overhead.py [--rounds 7] [--calls 5000]

Variants, each a loop of blocking allreduces on the same 8 bytes:
  C         tide_allreduce called straight through ctypes on raw
            addresses: the C library's cost plus one foreign call (~0.5 us)
  numpy     comm.allreduce(a) on a numpy array (buffer protocol)
  torch     comm.allreduce(t) on a torch CPU tensor (data_ptr)
  nonblock  comm.iallreduce(a).wait()
Prints, per variant, the median over rounds of the slowest rank's mean
time per call, and the extra over C.
"""
import argparse
import statistics
import time

import numpy as np
import torch

import tide
from tide import _lib


def timed(comm, fn, calls):
    """The slowest rank's mean microseconds per call."""
    for _ in range(calls // 10):
        fn()
    comm.barrier()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    us = np.array([(time.perf_counter() - t0) / calls * 1e6])
    comm.allreduce(us, op=tide.MAX)
    return float(us[0])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=5000)
    args = p.parse_args()
    with tide.init() as comm:
        a = np.zeros(2, np.float32)
        t = torch.zeros(2)
        raw = _lib.lib.tide_allreduce
        h, addr = comm._h, a.ctypes.data
        variants = {
            "C": lambda: raw(h, _lib.IN_PLACE, addr, 2, tide.FLOAT32, tide.SUM),
            "numpy": lambda: comm.allreduce(a),
            "torch": lambda: comm.allreduce(t),
            "nonblock": lambda: comm.iallreduce(a).wait(),
        }
        got = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, fn in variants.items():
                got[name].append(timed(comm, fn, args.calls))
        if comm.rank == 0:
            base = statistics.median(got["C"])
            print(f"# {comm.size} ranks, 8 B allreduce, {args.rounds} rounds x {args.calls} "
                  "calls, median of the slowest rank's mean")
            for name, values in got.items():
                med = statistics.median(values)
                print(f"{name:9s} {med:8.2f} us  (+{med - base:5.2f} over C; rounds "
                      f"{min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
