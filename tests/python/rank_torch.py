"""rank_torch.py - the torch.distributed backend "tide" on every rank:
each CPU collective torch has against a reference, every dtype, async
work, subgroups, point to point, errors as RuntimeError, and
init_process_group(timeout=) as tide's deadline.  Run by test_torch.py."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import tide.torch  # noqa: F401  registers "tide"
from rankcases import expect_raises, main

# Every store the backend joins the world through, for
# case_token_kept_out_of_the_store: wrapped here, before setup() makes the
# default group, since torch's own prefixes differ between versions.
_JOIN_STORES = []
_join_world = tide.torch._join_world


def _recording_join(store, *args, **kwargs):
    _JOIN_STORES.append(store)
    return _join_world(store, *args, **kwargs)


tide.torch._join_world = _recording_join

DTYPES = (torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64)
OPS = (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX)


def data(rank, dtype, count=6, salt=0):
    return ((torch.arange(count) + rank + salt) % 3 + 1).to(dtype)


def reference(n, dtype, op, count=6, salt=0):
    stack = torch.stack([data(r, dtype, count, salt).double() for r in range(n)])
    if op == dist.ReduceOp.SUM:
        out = stack.sum(0)
    elif op == dist.ReduceOp.PRODUCT:
        out = stack.prod(0)
    elif op == dist.ReduceOp.MIN:
        out = stack.min(0).values
    else:
        out = stack.max(0).values
    return out.to(dtype)


def eq(got, want, what):
    assert torch.equal(got, want), f"{what}: {got} != {want}"


def case_all_reduce(ctx):
    r, n = ctx
    for dtype in DTYPES:
        for op in OPS:
            t = data(r, dtype)
            dist.all_reduce(t, op=op)
            eq(t, reference(n, dtype, op), f"all_reduce {dtype} {op}")


def case_rooted(ctx):
    r, n = ctx
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for root in range(n):
            t = data(r, dtype) if r == root else torch.zeros(6, dtype=dtype)
            dist.broadcast(t, src=root)
            eq(t, data(root, dtype), "broadcast")
            t = data(r, dtype)
            dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
            if r == root:
                eq(t, reference(n, dtype, dist.ReduceOp.SUM), "reduce")
            lst = [torch.empty(6, dtype=dtype) for _ in range(n)] if r == root else None
            dist.gather(data(r, dtype), lst, dst=root)
            if r == root:
                for k in range(n):
                    eq(lst[k], data(k, dtype), f"gather block {k}")
            out = torch.empty(6, dtype=dtype)
            src = [data(k, dtype, salt=root) for k in range(n)] if r == root else None
            dist.scatter(out, src, src=root)
            eq(out, data(r, dtype, salt=root), "scatter")


def case_gathers(ctx):
    r, n = ctx
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int32):
        lst = [torch.empty(6, dtype=dtype) for _ in range(n)]
        dist.all_gather(lst, data(r, dtype))
        for k in range(n):
            eq(lst[k], data(k, dtype), f"all_gather {dtype} block {k}")
        flat = torch.empty(6 * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, data(r, dtype))
        eq(flat, torch.cat([data(k, dtype) for k in range(n)]), "all_gather_into_tensor")
        out = torch.empty(6, dtype=dtype)
        dist.reduce_scatter(out, [data(r, dtype, salt=k) for k in range(n)])
        eq(out, reference(n, dtype, dist.ReduceOp.SUM, salt=r), "reduce_scatter")
        full = torch.cat([data(r, dtype, salt=k) for k in range(n)])
        out.zero_()
        dist.reduce_scatter_tensor(out, full, op=dist.ReduceOp.MAX)
        eq(out, reference(n, dtype, dist.ReduceOp.MAX, salt=r), "reduce_scatter_tensor")


def case_all_to_all(ctx):
    r, n = ctx
    ins = [torch.full((2, 3), 10.0 * r + k) for k in range(n)]
    outs = [torch.empty(2, 3) for _ in range(n)]
    dist.all_to_all(outs, ins)
    for k in range(n):
        eq(outs[k], torch.full((2, 3), 10.0 * k + r), f"all_to_all from {k}")
    x = torch.arange(n * 2, dtype=torch.int64) + 100 * r
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x)
    want = torch.cat([torch.arange(2 * r, 2 * r + 2) + 100 * k for k in range(n)])
    eq(y, want, "all_to_all_single")
    # Uneven: rank r sends k+1 rows to rank k, so receives r+1 rows from each.
    in_splits = [k + 1 for k in range(n)]
    x = torch.cat([torch.full((k + 1, 2), float(100 * r + k)) for k in range(n)])
    y = torch.empty(n * (r + 1), 2)
    dist.all_to_all_single(y, x, [r + 1] * n, in_splits)
    want = torch.cat([torch.full((r + 1, 2), float(100 * k + r)) for k in range(n)])
    eq(y, want, "all_to_all_single with splits")
    # The group's single-tensor names (torch's newer backend interface),
    # called as a dispatcher calls a backend.
    pg = dist.distributed_c10d._get_default_group()
    y = torch.empty(n * (r + 1), 2)
    pg.all_to_all_single(y, x, [r + 1] * n, in_splits, None).wait()
    eq(y, want, "pg.all_to_all_single")
    flat = torch.empty(3 * n)
    pg.all_gather_single(flat, torch.full((3,), float(r)), None).wait()
    eq(flat, torch.cat([torch.full((3,), float(k)) for k in range(n)]), "pg.all_gather_single")
    out = torch.empty(3)
    pg.reduce_scatter_single(out, torch.arange(3.0 * n) + r, None).wait()
    want = sum(torch.arange(3.0 * r, 3.0 * r + 3) + k for k in range(n))
    eq(out, want, "pg.reduce_scatter_single")


def case_p2p_and_async(ctx):
    r, n = ctx
    right, left = (r + 1) % n, (r - 1) % n
    got = torch.empty(4)
    if n > 1:
        rx = dist.irecv(got, src=left, tag=7)
        tx = dist.isend(torch.full((4,), float(r)), dst=right, tag=7)
        rx.wait()
        tx.wait()
        eq(got, torch.full((4,), float(left)), "isend/irecv ring")
        if r == 0:
            dist.send(torch.arange(4.0), dst=1)
        elif r == 1:
            dist.recv(got, src=0)
            eq(got, torch.arange(4.0), "send/recv")
        # From any source: recv(src=None) says whose message it took.
        if r == 0:
            seen = []
            for _ in range(n - 1):
                src = dist.recv(got, tag=8)
                eq(got, torch.full((4,), float(src)), "recv from any source")
                seen.append(src)
            assert sorted(seen) == list(range(1, n)), seen
        else:
            dist.send(torch.full((4,), float(r)), dst=0, tag=8)
    works, ts = [], []
    for k in range(30):
        ts.append(torch.full((5,), float(k + r)))
        works.append(dist.all_reduce(ts[-1], async_op=True))
    for k in reversed(range(30)):
        w = works[k]
        w.wait()
        assert w.is_completed()
        value = w.get_future().wait()
        eq(value[0], torch.full((5,), float(n * k + n * (n - 1) // 2)), f"async {k}")
    # Nobody waits on the work: the poller completes the future, and its
    # callbacks run (DDP's reducer works this way).
    t = torch.ones(3)
    chained = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    eq(chained.wait(), torch.full((3,), 2.0 * n), "future callback")
    dist.barrier()


def case_storage_replaced(ctx):
    """A tensor given another storage (set_) while its receive is pending:
    the receive lands in the storage it was posted with, which stays
    alive, and nothing else is written (a canary of the same size, which
    would take the freed memory, stays as it was)."""
    r, n = ctx
    if n < 2 or r > 1:
        dist.barrier()
        return
    count = 16384
    if r == 1:
        time.sleep(0.3)  # rank 0 swaps the storage and allocates meanwhile
        dist.send(torch.full((count,), 5.0), dst=0, tag=11)
    else:
        t = torch.empty(count)
        w = dist.irecv(t, src=1, tag=11)
        t.set_(torch.zeros(count))
        canary = torch.full((count,), 7.0)
        w.wait()
        eq(t, torch.zeros(count), "the tensor's new storage")
        eq(canary, torch.full((count,), 7.0), "memory the old storage gave back")
    dist.barrier()


def case_subgroups(ctx):
    r, n = ctx
    evens = dist.new_group([k for k in range(n) if k % 2 == 0])
    odds = dist.new_group([k for k in range(n) if k % 2 == 1]) if n > 1 else None
    mine = evens if r % 2 == 0 else odds
    members = [k for k in range(n) if k % 2 == r % 2]
    t = torch.tensor([float(r)])
    dist.all_reduce(t, group=mine)
    eq(t, torch.tensor([float(sum(members))]), "subgroup all_reduce")
    u = torch.tensor([float(r)])
    dist.broadcast(u, src=members[-1], group=mine)  # src is a global rank
    eq(u, torch.tensor([float(members[-1])]), "subgroup broadcast")
    dist.barrier()


def case_errors(ctx):
    r, n = ctx
    t = torch.ones(4, dtype=torch.int32)
    expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND),
                  "TIDE_EINVAL")  # bitwise: integers only
    expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool),
                                                        op=dist.ReduceOp.AVG), "AVG")
    c = torch.ones(2, dtype=torch.complex64)  # torch sends it as float32 pairs
    dist.all_reduce(c)
    eq(c, torch.full((2,), complex(n, 0), dtype=torch.complex64), "complex all_reduce")
    if n > 1:  # a synchronous collective that fails raises tide's account
        e = expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(r + 1)),
                          "TIDE_EMISMATCH")
        assert "allreduce" in str(e), e
    # Nothing was sent: the job is still in step.
    t = torch.ones(3)
    dist.all_reduce(t)
    eq(t, torch.full((3,), float(n)), "all_reduce after refusals")


def case_deadline(ctx):
    """init_process_group(timeout=2 s) is tide's deadline: a receive nobody
    answers fails with TIDE_ETIMEDOUT as a RuntimeError."""
    r, n = ctx
    t0 = time.monotonic()
    w = dist.irecv(torch.empty(1), src=(r + 1) % n, tag=99)
    e = expect_raises(RuntimeError, w.wait, "TIDE_ETIMEDOUT")
    took = time.monotonic() - t0
    assert 1.0 < took < 20, f"failed after {took:.2f} s"
    print(f"rank {r}: {e}", flush=True)
    dist.barrier()


def case_token_kept_out_of_the_store(ctx):
    """torch's store, which anyone who reaches it may read, never holds
    the job token: with TIDE_JOB_TOKEN it says nothing of it; without,
    it names a file of rank 0's, gone once every rank joined."""
    # The store the backend was handed (torch prefixes it with the group's
    # name and, on torch 2, the device's, spelt differently by version):
    # recorded by the wrapper around _join_world below.
    assert _JOIN_STORES, "the backend never joined through a store"
    store = _JOIN_STORES[-1]
    store.set_timeout(datetime.timedelta(seconds=5))
    entry = store.get(tide.torch._RENDEZVOUS_KEY).decode()
    dist.barrier()  # rank 0 holds the store: nobody leaves before all have read
    assert entry, "no rendezvous entry found"
    token = os.environ.get("TIDE_JOB_TOKEN")
    if token:
        assert token not in entry, entry
        return
    path = entry.split(" ")[1]
    assert os.path.isabs(path) and not os.path.exists(path), entry


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def setup():
    if os.environ.get("TIDE_TEST_NO_TOKEN"):
        del os.environ["TIDE_JOB_TOKEN"]  # as under torchrun, which sets none
    seconds = 2 if sys.argv[1:] == ["deadline"] else 60
    dist.init_process_group("tide", timeout=datetime.timedelta(seconds=seconds))
    assert dist.get_backend() == "tide"
    return dist.get_rank(), dist.get_world_size()


if __name__ == "__main__":
    main({k: v for k, v in CASES.items() if k != "deadline" or sys.argv[1:] == ["deadline"]},
         setup, lambda ctx: dist.destroy_process_group())
