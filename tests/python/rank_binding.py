"""rank_binding.py - the tide package on every rank of a job: each
collective against a numpy reference for several dtypes and buffer kinds,
nonblocking order, bad input refused before anything is sent, dropped
requests keeping their buffers, wait timeouts, subgroups, and the GIL
left free while waiting.  Run by test_binding.py through tide-run."""
import gc
import threading
import time
import weakref

import numpy as np
import torch

import tide
from rankcases import expect_raises, main

DTYPES = (np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64)
COUNT = 10


def data(rank, dtype, count=COUNT, salt=0):
    """Small values, so sums and products over 4 ranks stay exact."""
    return ((np.arange(count) + rank + salt) % 3 + 1).astype(dtype)


def ref_reduce(n, dtype, op, count=COUNT):
    stack = np.stack([data(r, dtype, count) for r in range(n)])
    if op == tide.SUM:
        return stack.sum(0, dtype=dtype)
    if op == tide.PROD:
        return stack.prod(0, dtype=dtype)
    if op == tide.MIN:
        return stack.min(0)
    if op == tide.MAX:
        return stack.max(0)
    s = stack.sum(0, dtype=dtype)
    return (s / n).astype(dtype) if np.dtype(dtype).kind == "f" else s // n


def eq(got, want, what):
    assert np.array_equal(np.asarray(got), np.asarray(want)), f"{what}: {got} != {want}"


def case_allreduce(comm):
    n = comm.size
    for dtype in DTYPES:
        for op in (tide.SUM, tide.PROD, tide.MIN, tide.MAX, tide.AVG):
            x = data(comm.rank, dtype)
            out = np.empty_like(x)
            assert comm.allreduce(x, out, op=op) is out
            eq(out, ref_reduce(n, dtype, op), f"allreduce {dtype.__name__} op {op}")
            eq(x, data(comm.rank, dtype), "allreduce left its input alone")
            assert comm.allreduce(x, op=op) is x
            eq(x, ref_reduce(n, dtype, op), f"in-place allreduce {dtype.__name__} op {op}")


def case_buffer_kinds(comm):
    """bytearray, memoryview and torch tensors (bf16 included)."""
    n = comm.size
    b = bytearray([comm.rank + 1] * 5)
    comm.allreduce(b)
    assert bytes(b) == bytes([n * (n + 1) // 2] * 5), bytes(b)
    m = memoryview(bytearray(8)).cast("i")
    m[0] = comm.rank
    comm.allreduce(m, op=tide.MAX)
    assert m[0] == n - 1
    for dt in (torch.bfloat16, torch.float16, torch.float32, torch.int64):
        t = torch.full((7,), comm.rank + 1, dtype=dt)
        comm.allreduce(t)
        assert torch.equal(t, torch.full((7,), n * (n + 1) // 2, dtype=dt)), (dt, t)


def case_rooted(comm):
    n, me = comm.size, comm.rank
    for dtype in (np.int32, np.float32, np.float64):
        for root in range(n):
            x = data(me, dtype) if me == root else np.zeros(COUNT, dtype)
            comm.broadcast(x, root=root)
            eq(x, data(root, dtype), f"broadcast root {root}")
            out = np.empty(COUNT, dtype)
            comm.reduce(data(me, dtype), out, op=tide.SUM, root=root)
            if me == root:
                eq(out, ref_reduce(n, dtype, tide.SUM), f"reduce root {root}")
            y = data(me, dtype)
            comm.reduce(y, op=tide.MAX, root=root)
            if me == root:
                eq(y, ref_reduce(n, dtype, tide.MAX), f"in-place reduce root {root}")
            g = np.empty(COUNT * n, dtype) if me == root else None
            comm.gather(data(me, dtype), g, root=root)
            if me == root:
                eq(g, np.concatenate([data(r, dtype) for r in range(n)]), "gather")
            whole = np.concatenate([data(r, dtype, salt=root) for r in range(n)])
            part = np.empty(COUNT, dtype)
            comm.scatter(whole if me == root else None, part, root=root)
            eq(part, data(me, dtype, salt=root), f"scatter root {root}")


def case_gathers(comm):
    n, me = comm.size, comm.rank
    for dtype in (np.uint8, np.float16, np.float32, np.int64):
        out = np.empty(COUNT * n, dtype)
        comm.allgather(data(me, dtype), out)
        want = np.concatenate([data(r, dtype) for r in range(n)])
        eq(out, want, "allgather")
        inplace = np.zeros(COUNT * n, dtype)
        inplace[me * COUNT:(me + 1) * COUNT] = data(me, dtype)
        comm.allgather(inplace)
        eq(inplace, want, "in-place allgather")
        full = np.concatenate([data(me, dtype, salt=b) for b in range(n)])
        mine = np.empty(COUNT, dtype)
        comm.reduce_scatter(full, mine)
        want_rs = sum(data(r, dtype, salt=me).astype(np.int64) for r in range(n)).astype(dtype)
        eq(mine, want_rs, "reduce_scatter")
        comm.reduce_scatter(full)
        eq(full[:COUNT], want_rs, "in-place reduce_scatter")
        send = np.concatenate([data(me, dtype, salt=p) for p in range(n)])
        recv = np.empty_like(send)
        comm.alltoall(send, recv)
        eq(recv, np.concatenate([data(r, dtype, salt=me) for r in range(n)]), "alltoall")
    comm.barrier()


def case_send_recv(comm):
    n, me = comm.size, comm.rank
    right, left = (me + 1) % n, (me - 1) % n
    out = np.full(5, me, np.int32)
    got = np.zeros(8, np.int32)
    rx = comm.irecv(got, left, tag=3)
    tx = comm.isend(out, right, tag=3)
    rx.wait(10)
    tx.wait(10)
    assert rx.nbytes == 20, rx.nbytes
    assert rx.source == left, rx.source
    eq(got[:5], np.full(5, left, np.int32), "ring receive")
    # From any rank (source None), rank 0 included: each message once,
    # the Request telling whose.
    tx = comm.isend(np.full(2, me, np.int32), 0, tag=4)
    if me == 0:
        seen = []
        for _ in range(n):
            rx = comm.irecv(got, None, tag=4)
            rx.wait(10)
            assert rx.nbytes == 8 and got[0] == rx.source, (rx.nbytes, got[:2], rx.source)
            seen.append(rx.source)
        assert sorted(seen) == list(range(n)), seen
    tx.wait(10)


def case_send_recv_self(comm):
    me = comm.rank
    tx = comm.isend(b"hello", me, tag=9)
    buf = bytearray(16)
    assert comm.recv(buf, me, 9) == 5
    tx.wait(5)
    assert bytes(buf[:5]) == b"hello"


def case_nonblocking_order(comm):
    """Many in flight, waited on in reverse and tested in a loop."""
    n = comm.size
    xs = [np.full(64, comm.rank + k, np.int64) for k in range(40)]
    reqs = [comm.iallreduce(x) for x in xs]
    for k in reversed(range(40)):
        assert reqs[k].wait(30) is xs[k]
        eq(xs[k], np.full(64, n * (n - 1) // 2 + n * k, np.int64), f"request {k}")
    ys = [np.full(3, 1.0 + k, np.float32) for k in range(20)]
    reqs = [comm.iallreduce(y, op=tide.MAX) for y in ys]
    deadline = time.monotonic() + 30
    while not all(r.test() for r in reqs):
        assert time.monotonic() < deadline, "test() never reported completion"
    for k, y in enumerate(ys):
        eq(y, np.full(3, 1.0 + k, np.float32), f"max {k}")


def case_bad_input(comm):
    n, me = comm.size, comm.rank
    x = np.ones(8, np.float32)
    ro = np.ones(8, np.float32)
    ro.flags.writeable = False
    IA = tide.InvalidArgument
    expect_raises(IA, lambda: comm.allreduce(ro), "allreduce x")  # in place needs writable
    expect_raises(IA, lambda: comm.allreduce(x, ro), "allreduce out")
    expect_raises(IA, lambda: comm.allreduce(np.ones((4, 4), np.float32)[:, 1]), "contiguous")
    expect_raises(IA, lambda: comm.allreduce(x, np.ones(7, np.float32)), "needs 8")
    expect_raises(IA, lambda: comm.allreduce(x, np.ones(8, np.float64)), "float64")
    expect_raises(IA, lambda: comm.allreduce(x, op=17), "op")
    expect_raises(IA, lambda: comm.allreduce("text"), "not a buffer")
    expect_raises(IA, lambda: comm.allreduce(np.ones(2, np.complex64)), "no dtype")
    expect_raises(IA, lambda: comm.allreduce(torch.ones(4, 4).t()), "contiguous")
    expect_raises(IA, lambda: comm.allreduce(torch.ones(2, dtype=torch.bool)), "no dtype")
    expect_raises(IA, lambda: comm.broadcast(x, root=n), "root")
    expect_raises(IA, lambda: comm.allgather(x, np.empty(8 * n + 1, np.float32)), "needs")
    expect_raises(IA, lambda: comm.alltoall(x, None), "out is required")
    expect_raises(IA, lambda: comm.isend(x, dest=-1), "dest")
    assert isinstance(expect_raises(ValueError, lambda: comm.allreduce(ro)), tide.Error)
    # Nothing above was sent: the next collective still matches everywhere.
    y = np.full(4, me, np.int32)
    comm.allreduce(y)
    eq(y, np.full(4, n * (n - 1) // 2, np.int32), "allreduce after refusals")


def case_dropped_request(comm):
    """A request dropped while pending keeps its buffer until it ends.
    Rank 0 joins the allreduce only once every other rank has dropped its
    request and checked, so none can have completed early."""
    if comm.size == 1:
        return
    x = np.full(1000, 1.0)
    alive = weakref.ref(x)
    if comm.rank == 0:
        for r in range(1, comm.size):
            comm.recv(bytearray(1), r, tag=50)
        comm.allreduce(x)
    else:
        comm.iallreduce(x)
        del x
        gc.collect()
        assert alive() is not None, "the buffer of a pending request was freed"
        comm.send(b"g", 0, tag=50)
    comm.barrier()
    deadline = time.monotonic() + 10
    if comm.rank == 0:
        del x
    while alive() is not None:
        assert time.monotonic() - deadline < 0, "the buffer was never let go"
        time.sleep(0.01)
        gc.collect()


def case_wait_timeout(comm):
    """wait(timeout) passes, the request stays pending, and completes."""
    if comm.size == 1:
        return
    buf = np.zeros(2, np.int32)
    if comm.rank == 1:
        rx = comm.irecv(buf, 0, tag=77)
        t0 = time.monotonic()
        e = expect_raises(tide.DeadlineExceeded, lambda: rx.wait(timeout=0.2))
        assert isinstance(e, TimeoutError)
        assert 0.15 < time.monotonic() - t0 < 5
        assert not rx.test()
        comm.barrier()
        rx.wait(10)
        eq(buf, np.array([5, 6], np.int32), "received after the timeout")
    else:
        comm.barrier()
        if comm.rank == 0:
            comm.send(np.array([5, 6], np.int32), 1, tag=77)


def case_split(comm):
    n, me = comm.size, comm.rank
    with comm.split(me % 2, key=-me) as sub:
        members = [r for r in range(n) if r % 2 == me % 2]
        assert sub.size == len(members)
        assert sub.rank == len(members) - 1 - members.index(me)  # key reverses the order
        y = np.array([me], np.int64)
        sub.allreduce(y)
        eq(y, np.array([sum(members)], np.int64), "subgroup allreduce")
    assert comm.split(-1) is None
    if me < 2:
        with comm.create_group([0, 1][:n]) as pair:
            z = np.ones(1, np.int32)
            pair.allreduce(z)
            eq(z, np.array([min(n, 2)], np.int32), "create_group allreduce")


def case_gil_released(comm):
    """Another thread runs Python while this one waits in tide: on rank 1
    a thread counts, then tells rank 0 to join the allreduce rank 1's main
    thread is blocked in.  Were the GIL held while waiting, the count
    could not advance and the allreduce would fail at its deadline."""
    if comm.size == 1:
        return
    entering = threading.Event()
    if comm.rank == 1:
        def count_then_release_rank_0():
            entering.wait(30)  # main is (about to be) blocked in the allreduce
            count = 0
            while count < 200000:  # ~10 ms of Python: main is waiting by then
                count += 1
            comm.send(b"g", 0, tag=51)
        t = threading.Thread(target=count_then_release_rank_0)
        t.start()
    if comm.rank == 0:
        comm.recv(bytearray(1), 1, tag=51)
    entering.set()
    comm.allreduce(np.ones(1))
    if comm.rank == 1:
        t.join()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def setup():
    return tide.init()


if __name__ == "__main__":
    main(CASES, setup, lambda comm: comm.close())
