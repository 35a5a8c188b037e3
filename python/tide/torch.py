"""tide.torch - importing this registers the torch.distributed backend
"tide": dist.init_process_group("tide") then runs every CPU collective
through tide.

    import torch.distributed as dist, tide.torch
    dist.init_process_group("tide", timeout=timedelta(seconds=60))  # env://

Bootstrap.  Under env:// torch's TCPStore already listens on MASTER_PORT,
which is also where tide_init would rendezvous, so the backend does not
read MASTER_PORT: rank 0 picks a free port (and, without
TIDE_JOB_TOKEN, a fresh job token) and publishes them through torch's
store; the others read them there.  The timeout given to
init_process_group becomes tide's deadline for every operation.

Groups.  The default group is tide's world communicator; new_group(ranks)
becomes tide_comm_create_group over it (members only, nothing sent).

Completion.  Each operation returns a Work made from a torch Future,
completed by the package's one poller thread (tide/request.py) when
tide's reactor finishes the request: no thread per operation, and no
Python on the reactor.  Failures set the future's exception, a
RuntimeError carrying tide's message.

What tide has no primitive for is composed: all_to_all_single with splits
is a send and a receive per peer; list forms (all_gather into a list,
reduce_scatter from lists, gather, scatter, all_to_all of lists) go
through one flat buffer and a copy, as Gloo does.
"""
import functools
import os
import secrets
import socket
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work, _create_work_from_future

import tide

BACKEND = "tide"
_RENDEZVOUS_KEY = "tide/rendezvous"
_ALLTOALLV_TAG = 1 << 30  # above any tag torch code is likely to use

_OPS = ((dist.ReduceOp.SUM, tide.SUM), (dist.ReduceOp.PRODUCT, tide.PROD),
        (dist.ReduceOp.MIN, tide.MIN), (dist.ReduceOp.MAX, tide.MAX),
        (dist.ReduceOp.AVG, tide.AVG))


def _tide_op(op):
    for theirs, ours in _OPS:
        if op == theirs:
            return ours
    raise RuntimeError(f"tide: reduce op {op} is not supported (SUM, PRODUCT, MIN, MAX, AVG)")


def _free_port(addr):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _join_world(store, rank, size, timeout):
    """The world communicator, bootstrapped through torch's store."""
    if rank == 0:
        addr = os.environ.get("MASTER_ADDR") or "127.0.0.1"
        token = os.environ.get("TIDE_JOB_TOKEN") or secrets.token_hex(32)
        store.set(_RENDEZVOUS_KEY, f"{_free_port(addr)} {token} {addr}")
    port, token, addr = store.get(_RENDEZVOUS_KEY).decode().split(" ", 2)
    try:
        return tide.init(rank=rank, size=size, master_addr=addr, master_port=int(port),
                         job_token=token, timeout=timeout.total_seconds())
    except tide.Error as e:
        raise RuntimeError(f"tide: cannot join the job: {e}") from e


class _Completion:
    """Completes one torch Future when every tide request of an operation
    has: then runs `after` (copies out of a flat buffer) and sets the
    result, or sets the first error.  Runs on the poller thread, or on a
    thread that waits for the work (wait_here)."""

    def __init__(self, requests, result, after=None):
        self.future = torch.futures.Future()
        self.requests = requests
        self.result, self.after = result, after
        self.left = len(requests)
        self.error = None
        self.lock = threading.Lock()
        self.key = None  # this work's entry in _inflight

    def start(self, key):
        self.key = key
        if not self.requests:
            self._finish()
        for r in self.requests:
            r._on_poller(self._one)

    def wait_here(self):
        """Complete the requests on this thread: tide_wait spins where the
        poller would be woken, and a woken poller then wakes the waiter
        (two thread wake-ups of ~60 us each on this project's machines)."""
        for r in self.requests:
            try:
                r.wait()
            except tide.Error:
                pass  # _one has recorded it for the future

    def _one(self, err):
        with self.lock:
            self.error = self.error or err
            self.left -= 1
            last = self.left == 0
        if last:
            self._finish()

    def _finish(self):
        _inflight.pop(self.key, None)
        self.requests = ()
        if self.error is not None:
            self.future.set_exception(RuntimeError(f"tide: {self.error}"))
            return
        try:
            if self.after is not None:
                self.after()
        except Exception as e:
            self.future.set_exception(RuntimeError(f"tide: {e}"))
            return
        self.future.set_result(self.result)


# id(work) -> (work, its _Completion) while the operation runs: how
# Work.wait finds the requests of a tide work.  Holding the work keeps
# its id from being reused meanwhile.
_inflight = {}


def _raise_failed_future():
    """torch 1.13's Work from _create_work_from_future returns True from
    wait() when its future failed (measured here), so a failed synchronous
    dist.all_reduce would pass silently (its get_future() even yields the
    error as the value).  Work.wait is wrapped, once, to raise that error
    after the wait; for a successful work, or one without a future, it
    changes nothing (so Gloo's works are unaffected).  For a tide work it
    first completes the requests on the waiting thread (wait_here).
    A Python Work subclass is no way out: torch's C++ callers (DDP) reach
    only C++ Work methods once the Python object is gone."""
    original = Work.wait
    if getattr(original, "_tide_checked", False):
        return

    @functools.wraps(original)
    def wait(self, *args, **kwargs):
        entry = _inflight.get(id(self))
        if entry is not None and entry[0] is self:
            entry[1].wait_here()
        done = original(self, *args, **kwargs)
        try:
            future = self.get_future()
        except RuntimeError:  # a backend whose works have no future
            return done
        if future.done():
            # The wrapping work's future holds the error as its value.
            value = future.value()
            if isinstance(value, BaseException):
                raise value
        return done
    wait._tide_checked = True
    Work.wait = wait


_raise_failed_future()


def _work(requests, result, after=None):
    completion = _Completion(requests, result, after)
    work = _create_work_from_future(completion.future)
    _inflight[id(work)] = (work, completion)
    completion.start(id(work))
    return work


def _flat(tensors):
    """One contiguous tensor holding the list, concatenated."""
    return torch.cat([t.reshape(-1) for t in tensors])


def _copy_out(flat, tensors):
    def after():
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view_as(t))
            offset += n
    return after


def _posting(method):
    """tide's errors at the call (bad input) become RuntimeErrors too."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except tide.Error as e:
            raise RuntimeError(f"tide: {e}") from e
    return wrapper


class TideProcessGroup(ProcessGroup):
    """A torch ProcessGroup over one tide communicator."""

    def __init__(self, comm, rank, size):
        super().__init__(rank, size)
        self.comm = comm

    def name(self):
        return BACKEND

    def getBackendName(self):
        return BACKEND

    # ---------------------------------------------------------- reductions

    @_posting
    def allreduce(self, tensors, opts=None):
        op = _tide_op(opts.reduceOp) if opts is not None else tide.SUM
        return _work([self.comm.iallreduce(t, op=op) for t in tensors], tensors)

    @_posting
    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    @_posting
    def reduce(self, tensors, opts):
        op = _tide_op(opts.reduceOp)
        reqs = [self.comm.ireduce(t, op=op, root=opts.rootRank) for t in tensors]
        return _work(reqs, tensors)

    @_posting
    def _reduce_scatter_base(self, output, input, opts=None):
        op = _tide_op(opts.reduceOp) if opts is not None else tide.SUM
        return _work([self.comm.ireduce_scatter(input, output, op=op)], [output])

    @_posting
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = _tide_op(opts.reduceOp) if opts is not None else tide.SUM
        reqs = [self.comm.ireduce_scatter(_flat(inputs), out, op=op)
                for out, inputs in zip(output_tensors, input_tensors)]
        return _work(reqs, output_tensors)

    # ------------------------------------------------------------ movement

    @_posting
    def broadcast(self, tensors, opts):
        return _work([self.comm.ibroadcast(t, root=opts.rootRank) for t in tensors], tensors)

    @_posting
    def _allgather_base(self, output, input, opts=None):
        return _work([self.comm.iallgather(input, output)], [output])

    @_posting
    def allgather(self, output_tensors, input_tensors, opts=None):
        reqs, copies = [], []
        for outs, inp in zip(output_tensors, input_tensors):
            flat = torch.empty(inp.numel() * self.size(), dtype=inp.dtype)
            reqs.append(self.comm.iallgather(inp.contiguous(), flat))
            copies.append(_copy_out(flat, outs))
        return _work(reqs, output_tensors, lambda: [c() for c in copies])

    @_posting
    def gather(self, output_tensors, input_tensors, opts):
        root, inp = opts.rootRank, input_tensors[0]
        if self.rank() != root:
            return _work([self.comm.igather(inp.contiguous(), root=root)], [])
        flat = torch.empty(inp.numel() * self.size(), dtype=inp.dtype)
        req = self.comm.igather(inp.contiguous(), flat, root=root)
        return _work([req], output_tensors, _copy_out(flat, output_tensors[0]))

    @_posting
    def scatter(self, output_tensors, input_tensors, opts):
        root, out = opts.rootRank, output_tensors[0]
        flat = _flat(input_tensors[0]) if self.rank() == root else None
        return _work([self.comm.iscatter(flat, out, root=root)], output_tensors)

    @_posting
    def alltoall(self, output_tensors, input_tensors, opts=None):
        sizes = {t.numel() for t in list(output_tensors) + list(input_tensors)}
        if len(sizes) != 1:
            return self._alltoallv_lists(output_tensors, input_tensors)
        flat_out = torch.empty(sizes.pop() * self.size(), dtype=output_tensors[0].dtype)
        req = self.comm.ialltoall(_flat(input_tensors), flat_out)
        return _work([req], output_tensors, _copy_out(flat_out, output_tensors))

    @_posting
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if not output_split_sizes and not input_split_sizes:
            return _work([self.comm.ialltoall(input, output)], [output])
        n = self.size()
        ins = self._split(input, input_split_sizes, n)
        outs = self._split(output, output_split_sizes, n)
        return self._alltoallv_lists(outs, ins, result=[output])

    @staticmethod
    def _split(t, splits, n):
        if not splits:
            if t.size(0) % n:
                raise RuntimeError(f"tide: dimension 0 ({t.size(0)}) does not split into {n}")
            splits = [t.size(0) // n] * n
        if len(splits) != n or sum(splits) != t.size(0):
            raise RuntimeError(f"tide: splits {list(splits)} do not cover {t.size(0)} rows "
                               f"in {n} parts")
        return list(torch.split(t, list(splits), dim=0))

    def _alltoallv_lists(self, outs, ins, result=None):
        """A send and a receive per peer; the block for itself is copied."""
        me, reqs = self.rank(), []
        for peer in range(self.size()):
            if peer == me:
                outs[me].copy_(ins[me])
                continue
            reqs.append(self.comm.irecv(outs[peer], peer, _ALLTOALLV_TAG))
            reqs.append(self.comm.isend(ins[peer].contiguous(), peer, _ALLTOALLV_TAG))
        return _work(reqs, result if result is not None else outs)

    @_posting
    def barrier(self, opts=None):
        return _work([self.comm.ibarrier()], [])

    # ------------------------------------------------------ point to point

    @_posting
    def send(self, tensors, dst, tag):
        return _work([self.comm.isend(t, dst, tag) for t in tensors], tensors)

    @_posting
    def recv(self, tensors, src, tag):
        return _work([self.comm.irecv(t, src, tag) for t in tensors], tensors)

    def recv_anysource(self, tensors, tag):
        raise RuntimeError("tide: recv from any source is not supported (name the source)")


def _create(opts, pg_options=None):
    """torch's constructor hook (extended API: it gives the group's global
    ranks)."""
    ranks = list(opts.global_ranks_in_group)
    world = tide.world()
    if not ranks or world is None:
        if world is not None:
            tide.finalize()  # a new default group after destroy_process_group
        comm = _join_world(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    else:
        try:
            comm = world.create_group(ranks)
        except tide.Error as e:
            raise RuntimeError(f"tide: cannot make the group {ranks}: {e}") from e
    return TideProcessGroup(comm, opts.group_rank, opts.group_size)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
