"""comm.py - tide.Comm: a communicator and its operations, mpi4py-shaped.

Every collective exists twice: comm.allreduce(...) blocks and returns the
result buffer; comm.iallreduce(...) returns a tide.Request at once.  Both
borrow the caller's buffers zero-copy (_buffer.py) and take the dtype from
them; an output omitted means in place.  Every argument is checked here,
before tide is called, so a refused call sends nothing.
"""
import ctypes

from . import _lib
from ._buffer import borrow
from .errors import check, error, invalid
from .request import Request

SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = range(8)  # tide_op's values
_OPS = {SUM: "SUM", PROD: "PROD", MIN: "MIN", MAX: "MAX", AVG: "AVG", BAND: "BAND", BOR: "BOR",
        BXOR: "BXOR"}
_ANY_SOURCE = -1  # TIDE_ANY_SOURCE


def _same_dtype(a, b, what):
    if a.dtype != b.dtype:
        from ._buffer import DTYPE_NAMES
        raise invalid(f"{what}: out is {DTYPE_NAMES[b.dtype]} but x is {DTYPE_NAMES[a.dtype]}")


def _count_is(view, count, what):
    if view.count != count:
        raise invalid(f"{what}: holds {view.count} elements, needs {count}")


def _release(views):
    for v in views:
        if v is not None:
            v.release()


class Comm:
    """A group of ranks (tide_comm).  rank, size; split(); the operations
    below; close() (also on leaving a `with` block)."""

    def __init__(self, handle, poller, world=None):
        self._h = handle
        self._poller = poller
        self._world = world  # None for the world communicator itself
        self.rank = _lib.comm_rank(handle)
        self.size = _lib.comm_size(handle)

    # ---------------------------------------------------------------- life

    def _finalized_under(self):
        """A communicator made by split: its world was finalized, which
        freed it in C (using it segfaulted)."""
        return self._world is not None and self._world._h is None

    def _handle(self):
        if self._h is None:
            raise invalid("the communicator is closed")
        if self._finalized_under():
            raise invalid("the communicator is closed: tide.finalize() freed it with its world")
        return self._h

    def close(self):
        """Release the communicator: tide_comm_free for one made by split,
        tide.finalize() for the world.  Idempotent; after tide.finalize()
        a split communicator is already gone."""
        if self._h is None:
            return
        if self._finalized_under():
            self._h = None
            return
        if self._world is None:
            from . import finalize
            finalize()
        else:
            h, self._h = self._h, None
            check(_lib.comm_free(h), "tide_comm_free")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def progress_cpus(self):
        """Where this process's progress thread runs: (cpus, own), cpus a
        CPU list such as "7" ("" when left to the scheduler), own True
        when the caller's thread was moved off them (tide_comm_progress_cpus)."""
        buf = ctypes.create_string_buffer(256)
        rc = _lib.comm_progress_cpus(self._handle(), buf, len(buf))
        check(rc if rc < 0 else 0, "tide_comm_progress_cpus")
        return buf.value.decode(), rc == 1

    def abort(self):
        """Fail everything pending on this communicator's job with
        tide.Aborted, at once."""
        check(_lib.comm_abort(self._handle()), "tide_comm_abort")

    def _sub(self, rc, out, what):
        check(rc, what)
        if not out.value:
            return None
        return Comm(out.value, self._poller, world=self._world or self)

    def split(self, color, key=0):
        """MPI_Comm_split: ranks with the same color form a Comm, ordered
        by key; color < 0 joins none (returns None).  Collective."""
        out = ctypes.c_void_p()
        rc = _lib.comm_split(self._handle(), color, key, ctypes.byref(out))
        return self._sub(rc, out, "tide_comm_split")

    def create_group(self, ranks):
        """A Comm of the listed ranks (sorted, de-duplicated); called by
        those ranks only, it sends nothing."""
        arr = (ctypes.c_int * len(ranks))(*ranks)
        out = ctypes.c_void_p()
        rc = _lib.comm_create_group(self._handle(), arr, len(ranks), ctypes.byref(out))
        return self._sub(rc, out, "tide_comm_create_group")

    # ----------------------------------------------------------- recovery

    def revoke(self):
        """Revoke this communicator (MPI ULFM's MPI_Comm_revoke): every
        rank's pending and later operations on it fail with tide.Revoked.
        Not collective, and it does not wait for peers: one rank calls it,
        typically after an operation failed there with tide.PeerLost or
        tide.DeadlineExceeded, to wake the ranks still waiting on this
        communicator.  Revoking twice, or on several ranks, is harmless;
        other communicators are not touched.  Recover with agree() and
        shrink(), which work on a revoked communicator."""
        check(_lib.comm_revoke(self._handle()), "tide_comm_revoke")

    def agree(self, flag):
        """The AND of flag over the live ranks ("did everyone finish this
        step?"), the same on every rank that returns.  Collective over the
        live ranks (dead ones do not block it); works on a revoked
        communicator.  Raises tide.DeadlineExceeded when a rank neither
        answers nor dies (stopped, not dead), tide.PeerLost when the
        others lost this rank."""
        c = ctypes.c_int(1 if flag else 0)
        check(_lib.comm_agree(self._handle(), ctypes.byref(c)), "tide_comm_agree")
        return bool(c.value)

    def shrink(self):
        """A new Comm of the ranks of this one still alive, in order,
        renumbered from 0: the same members on every rank that returns,
        even when ranks die during the call.  Collective over the live
        ranks; works on a revoked communicator.  Close the new Comm (or use
        it in a `with` block); this one stays open.  A rank that died
        during the shrink may still be a member, so the next operation on
        the new Comm fails and the program recovers again.  agree first,
        so that a rank whose step succeeded shrinks too:

            while True:
                ok = True
                try:
                    comm.allreduce(grad)
                except (tide.PeerLost, tide.Revoked):
                    ok = False
                    comm.revoke()             # wake every rank out of comm
                if comm.agree(ok):
                    break
                smaller = comm.shrink()
                if comm is not tide.world():
                    comm.close()
                comm = smaller
                recompute(grad)               # redo the failed step

        Raises tide.DeadlineExceeded, tide.PeerLost (as agree) or
        tide.Busy (the new communicator's id is in use here)."""
        out = ctypes.c_void_p()
        rc = _lib.comm_shrink(self._handle(), ctypes.byref(out))
        return self._sub(rc, out, "tide_comm_shrink")

    # --------------------------------------------------------- the posting

    def _start(self, fn, args, views, name):
        """Post one operation; the C request, or the error of the call."""
        req = ctypes.c_void_p()
        rc = fn(self._handle(), *args, ctypes.byref(req))
        if rc:
            _release(views)
            raise error(rc, f"{name}: {_lib.strerror(rc).decode()} (see tide's log for which "
                        "argument)")
        return req.value

    def _post(self, fn, args, views, result, name):
        """The nonblocking form: a Request holding the borrowed views."""
        req = self._start(fn, args, views, name)
        return Request(req, [v for v in views if v is not None], self._poller, result)

    def _run(self, fn, args, views, result, name):
        """The blocking form: post and wait here (the GIL released), with
        no Request in between: this is the path whose cost per call over C
        tools/py_overhead.py measures."""
        req = self._start(fn, args, views, name)
        rc = _lib.wait(req, -1)  # up to the operation's deadline
        message = _lib.req_message(req).decode(errors="replace") if rc else ""
        _lib.req_free(req)
        _release(views)
        if rc:
            raise error(rc, message)
        return result

    def _check_op(self, op):
        if op not in _OPS:
            raise invalid(f"op {op!r}: use tide.SUM, PROD, MIN, MAX, AVG, BAND, BOR or BXOR")
        return op

    def _check_root(self, root, name="root"):
        if not isinstance(root, int) or not 0 <= root < self.size:
            raise invalid(f"{name} {root!r} is not a rank of this {self.size}-rank group")
        return root

    def _in_out(self, x, out, what):
        """Views of x (read-only if out is given) and out (None if omitted)."""
        sx = borrow(x, f"{what} x", writable=out is None)
        if out is None:
            return sx, None
        try:
            so = borrow(out, f"{what} out", writable=True)
            _same_dtype(sx, so, what)
        except Exception:
            sx.release()
            raise
        return sx, so

    def _guard(self, views, check_fn):
        try:
            check_fn()
        except Exception:
            _release(views)
            raise

    # -------------------------------------------------------- collectives

    def _allreduce_call(self, x, out=None, op=SUM):
        self._check_op(op)
        sx, so = self._in_out(x, out, "allreduce")
        if so is not None:
            self._guard((sx, so), lambda: _count_is(so, sx.count, "allreduce out"))
        send, recv = (sx.addr, so.addr) if so else (_lib.IN_PLACE, sx.addr)
        return (_lib.iallreduce, (send, recv, sx.count, sx.dtype, op), (sx, so),
                x if out is None else out, "allreduce")

    def iallreduce(self, x, out=None, op=SUM):
        """allreduce, nonblocking: a tide.Request at once."""
        return self._post(*self._allreduce_call(x, out, op))

    def allreduce(self, x, out=None, op=SUM):
        """out[i] = op over ranks of x[i]; in place in x when out is None."""
        return self._run(*self._allreduce_call(x, out, op))

    def _broadcast_call(self, x, root=0):
        self._check_root(root)
        sx = borrow(x, "broadcast x", writable=self.rank != root)
        return (_lib.ibroadcast, (sx.addr, sx.count, sx.dtype, root), (sx,), x,
                "broadcast")

    def ibroadcast(self, x, root=0):
        """broadcast, nonblocking: a tide.Request at once."""
        return self._post(*self._broadcast_call(x, root))

    def broadcast(self, x, root=0):
        """root's x lands in x on every rank."""
        return self._run(*self._broadcast_call(x, root))

    def _reduce_call(self, x, out=None, op=SUM, root=0):
        self._check_op(op)
        self._check_root(root)
        if self.rank != root:
            sx = borrow(x, "reduce x", writable=False)
            return (_lib.ireduce, (sx.addr, None, sx.count, sx.dtype, op, root),
                    (sx,), None, "reduce")
        sx, so = self._in_out(x, out, "reduce")
        if so is not None:
            self._guard((sx, so), lambda: _count_is(so, sx.count, "reduce out"))
        send, recv = (sx.addr, so.addr) if so else (_lib.IN_PLACE, sx.addr)
        return (_lib.ireduce, (send, recv, sx.count, sx.dtype, op, root), (sx, so),
                x if out is None else out, "reduce")

    def ireduce(self, x, out=None, op=SUM, root=0):
        """reduce, nonblocking: a tide.Request at once."""
        return self._post(*self._reduce_call(x, out, op, root))

    def reduce(self, x, out=None, op=SUM, root=0):
        """Like allreduce, but only root gets the result: in out, or in x
        when out is None.  out is ignored on the other ranks."""
        return self._run(*self._reduce_call(x, out, op, root))

    def _allgather_call(self, x, out=None):
        if out is None:
            sx = borrow(x, "allgather x", writable=True)
            self._guard((sx,), lambda: self._divisible(sx, "allgather x"))
            return (_lib.iallgather, (_lib.IN_PLACE, sx.addr, sx.count // self.size,
                    sx.dtype), (sx,), x, "allgather")
        sx, so = self._in_out(x, out, "allgather")
        self._guard((sx, so), lambda: _count_is(so, sx.count * self.size, "allgather out"))
        return (_lib.iallgather, (sx.addr, so.addr, sx.count, sx.dtype), (sx, so),
                out, "allgather")

    def iallgather(self, x, out=None):
        """allgather, nonblocking: a tide.Request at once."""
        return self._post(*self._allgather_call(x, out))

    def allgather(self, x, out=None):
        """Every rank's x, concatenated by rank, in out (size * len(x)).
        out None: x is the whole result, this rank's block already at its
        place."""
        return self._run(*self._allgather_call(x, out))

    def _divisible(self, view, what):
        if view.count % self.size:
            raise invalid(f"{what}: {view.count} elements do not split into {self.size} "
                          "equal blocks")

    def _reduce_scatter_call(self, x, out=None, op=SUM):
        self._check_op(op)
        sx, so = self._in_out(x, out, "reduce_scatter")
        self._guard((sx, so), lambda: self._divisible(sx, "reduce_scatter x"))
        per = sx.count // self.size
        if so is None:
            return (_lib.ireduce_scatter, (_lib.IN_PLACE, sx.addr, per, sx.dtype, op),
                    (sx,), x, "reduce_scatter")
        self._guard((sx, so), lambda: _count_is(so, per, "reduce_scatter out"))
        return (_lib.ireduce_scatter, (sx.addr, so.addr, per, sx.dtype, op),
                (sx, so), out, "reduce_scatter")

    def ireduce_scatter(self, x, out=None, op=SUM):
        """reduce_scatter, nonblocking: a tide.Request at once."""
        return self._post(*self._reduce_scatter_call(x, out, op))

    def reduce_scatter(self, x, out=None, op=SUM):
        """x holds size blocks; rank r gets block r of their reduction, in
        out (one block) or, when out is None, at the start of x."""
        return self._run(*self._reduce_scatter_call(x, out, op))

    def _gather_call(self, x, out=None, root=0):
        self._check_root(root)
        if self.rank != root:
            sx = borrow(x, "gather x", writable=False)
            return (_lib.igather, (sx.addr, None, sx.count, sx.dtype, root), (sx,),
                    None, "gather")
        if out is None:
            raise invalid("gather: root needs out (size * len(x) elements)")
        sx, so = self._in_out(x, out, "gather")
        self._guard((sx, so), lambda: _count_is(so, sx.count * self.size, "gather out"))
        return (_lib.igather, (sx.addr, so.addr, sx.count, sx.dtype, root),
                (sx, so), out, "gather")

    def igather(self, x, out=None, root=0):
        """gather, nonblocking: a tide.Request at once."""
        return self._post(*self._gather_call(x, out, root))

    def gather(self, x, out=None, root=0):
        """Every rank's x, concatenated by rank, in root's out (size *
        len(x)); out is ignored elsewhere."""
        return self._run(*self._gather_call(x, out, root))

    def _scatter_call(self, x, out, root=0):
        self._check_root(root)
        so = borrow(out, "scatter out", writable=True)
        if self.rank != root:
            return (_lib.iscatter, (None, so.addr, so.count, so.dtype, root), (so,),
                    out, "scatter")
        try:
            sx = borrow(x, "scatter x", writable=False)
        except Exception:
            so.release()
            raise
        self._guard((sx, so), lambda: (_same_dtype(sx, so, "scatter"),
                                       _count_is(sx, so.count * self.size, "scatter x")))
        return (_lib.iscatter, (sx.addr, so.addr, so.count, so.dtype, root),
                (sx, so), out, "scatter")

    def iscatter(self, x, out, root=0):
        """scatter, nonblocking: a tide.Request at once."""
        return self._post(*self._scatter_call(x, out, root))

    def scatter(self, x, out, root=0):
        """Block r of root's x (size blocks) lands in rank r's out; x is
        read at root only (pass None elsewhere)."""
        return self._run(*self._scatter_call(x, out, root))

    def _alltoall_call(self, x, out):
        if out is None:
            raise invalid("alltoall: out is required (it may not overlap x)")
        sx, so = self._in_out(x, out, "alltoall")
        self._guard((sx, so), lambda: (self._divisible(sx, "alltoall x"),
                                       _count_is(so, sx.count, "alltoall out")))
        return (_lib.ialltoall, (sx.addr, so.addr, sx.count // self.size, sx.dtype),
                (sx, so), out, "alltoall")

    def ialltoall(self, x, out):
        """alltoall, nonblocking: a tide.Request at once."""
        return self._post(*self._alltoall_call(x, out))

    def alltoall(self, x, out):
        """Block p of this rank's x lands in block r of rank p's out."""
        return self._run(*self._alltoall_call(x, out))

    def ibarrier(self):
        return self._post(_lib.ibarrier, (), (), None, "barrier")

    def barrier(self):
        """Return once every rank has entered the barrier."""
        self._run(_lib.ibarrier, (), (), None, "barrier")

    # ------------------------------------------------------ point to point

    def isend(self, buf, dest, tag=0):
        """Send buf's bytes to rank dest; buf must stay unchanged until the
        request completes (the Request holds it)."""
        self._check_root(dest, "dest")
        sb = borrow(buf, "send buf", writable=False)
        return self._post(_lib.isend, (sb.addr, sb.nbytes, dest, tag), (sb,), None, "send")

    def send(self, buf, dest, tag=0):
        self.isend(buf, dest, tag).wait()

    def irecv(self, buf, source, tag=0):
        """Receive into buf from rank source, or from whichever rank sends
        first if source is None (MPI_ANY_SOURCE); wait() returns buf, and
        the Request's nbytes and source say how many bytes arrived from
        which rank."""
        if source is None:
            source = _ANY_SOURCE
        else:
            self._check_root(source, "source")
        rb = borrow(buf, "recv buf", writable=True)
        return self._post(_lib.irecv, (rb.addr, rb.nbytes, source, tag), (rb,), buf, "recv")

    def recv(self, buf, source, tag=0):
        """Receive into buf; returns the number of bytes received."""
        r = self.irecv(buf, source, tag)
        r.wait()
        return r.nbytes

    def __repr__(self):
        state = "closed" if self._h is None else f"rank {self.rank} of {self.size}"
        return f"<tide.Comm {state}>"
