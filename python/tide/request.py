"""request.py - pending operations, and the one thread per process that
learns when requests nobody waits on complete.

A Request holds the C request and every buffer it borrowed.  wait() and
test() ask tide directly (tide_wait spins, then sleeps; the GIL is
released meanwhile), so a waiter pays no thread hand-over.  A Request
dropped while pending, and every torch future, is handed to the Poller:
one thread blocked in tide_cq_wait (GIL released) that runs a completion
function per tag and only then lets the buffers go.  Completions never
cost a thread per operation, and Python never runs on tide's reactor.
"""
import contextlib
import ctypes
import itertools
import sys
import threading

from . import _lib
from .errors import DeadlineExceeded, error

_WAIT_BATCH = 64  # tags taken per tide_cq_wait
_POLL_MS = 200  # how often the poller looks up from tide_cq_wait to see if it must stop
_ETIMEDOUT = -3  # TIDE_ETIMEDOUT
_NO_LOCK = contextlib.nullcontext()  # a request nobody else completes needs no lock


class Poller:
    """Runs on_done() on its own thread when an attached request completes.
    Started lazily; stopped by stop() once nothing is attached."""

    def __init__(self):
        cq = ctypes.c_void_p()
        rc = _lib.cq_create(ctypes.byref(cq))
        if rc:
            raise error(rc, "cannot create the completion queue")
        self._cq = cq.value
        self._pending = {}  # tag -> on_done
        self._tags = itertools.count(1)
        self._lock = threading.Lock()
        self._thread = None
        self._stopping = False

    def attach(self, req, on_done):
        """Call on_done() (on the poller thread) once req completes.
        Raises once the poller was stopped (tide.finalize()): it starts no
        thread then, least of all while the interpreter shuts down, where
        starting one waits forever for it to run (a process that hung at
        exit with a request still pending)."""
        if self._cq is None or sys.is_finalizing():
            raise error(-1, "the completion queue is gone (after tide.finalize())")
        tag = next(self._tags)
        with self._lock:
            self._pending[tag] = on_done
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tide-poller",
                                                daemon=True)
                self._thread.start()
        rc = _lib.cq_attach(self._cq, req, tag)
        if rc:
            with self._lock:
                del self._pending[tag]
            raise error(rc, "cannot attach a request to the completion queue")

    def _run(self):
        tags = (ctypes.c_uint64 * _WAIT_BATCH)()
        while True:
            n = _lib.cq_wait(self._cq, tags, _WAIT_BATCH, _POLL_MS)
            for i in range(n):
                with self._lock:
                    on_done = self._pending.pop(tags[i])
                try:
                    on_done()
                except Exception as e:  # a user's future callback: report, keep polling
                    print(f"tide: completion callback failed: {e!r}", file=sys.stderr)
                # Not held while blocked in the next wait: it may be the
                # last reference to a dropped request and its buffers.
                del on_done
            with self._lock:
                if self._stopping and not self._pending:
                    self._thread = None
                    return

    def pending(self):
        with self._lock:
            return len(self._pending)

    def stop(self, timeout):
        """Wait (at most timeout seconds) for every attached request to
        complete and the thread to end; then free the queue.  Returns
        False, freeing nothing, if requests are still attached."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        _lib.cq_interrupt(self._cq)
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                return False
        if _lib.cq_destroy(self._cq):
            return False
        self._cq = None
        return True


class Request:
    """A pending operation (tide.Comm.i*): wait(), test(), and the buffers
    it borrowed, held until it completes even if the caller drops it.

    Completed exactly once, by whichever comes first: wait()/test() on the
    caller's thread, or the poller once the request is attached to it
    (torch futures, dropped requests).  Attached, the two may race, so a
    lock guards the completion, and the C request is freed by the poller
    only: tide_cq_wait still reads it when it returns the tag."""
    __slots__ = ("_req", "_views", "_poller", "_status", "_message", "_nbytes", "_source", "result",
                 "_lock", "_on_done", "__weakref__")

    def __init__(self, req, views, poller, result=None):
        self._req = req
        self._views = views
        self._poller = poller
        self._status = None  # None while pending, else tide's result code
        self._message = ""
        self._nbytes = 0
        self._source = -1
        self._lock = None  # made when attached to the poller
        self._on_done = None  # run once, by whoever completes the request
        self.result = result  # what wait() returns (the output buffer)

    def _complete(self, status, from_poller):
        """The request tests done: record its outcome and let go of the
        buffers (once); free the C request unless the poller still has to
        return its tag.  Returns True the first time."""
        first = self._status is None
        if first:
            self._status = status
            if status:
                self._message = _lib.req_message(self._req).decode(errors="replace")
            self._nbytes = _lib.req_bytes(self._req)
            self._source = _lib.req_source(self._req)
            for v in self._views:
                v.release()
            self._views = ()
        if self._req is not None and (from_poller or self._lock is None):
            _lib.req_free(self._req)
            self._req = None
        return first

    def _report(self):
        """Run the completion function (outside the lock)."""
        if self._on_done is not None:
            on_done, self._on_done = self._on_done, None
            on_done(error(self._status, self._message) if self._status else None)

    def _raise_if_failed(self):
        if self._status:
            raise error(self._status, self._message)

    def wait(self, timeout=None):
        """Block until the operation completes, at most timeout seconds
        (None: up to the operation's deadline).  Returns the result buffer
        (a receive's buffer; .nbytes then says how much arrived); raises the
        operation's error, or DeadlineExceeded if timeout passed first (the
        request then stays pending: wait again, or drop it)."""
        if self._status is None:
            with self._lock or _NO_LOCK:
                if self._status is None:
                    ms = -1 if timeout is None else max(0, int(timeout * 1000))
                    rc = _lib.wait(self._req, ms)  # the GIL is released meanwhile
                    if rc == _ETIMEDOUT and not self._tests_done():
                        raise DeadlineExceeded(rc, f"wait: still pending after {timeout} s")
                    self._complete(rc, False)
            self._report()
        self._raise_if_failed()
        return self.result

    def _tests_done(self):
        done = ctypes.c_int(0)
        _lib.test(self._req, ctypes.byref(done))
        return bool(done.value)

    def test(self):
        """True once the operation has completed (raising its error if it
        failed); False while it is pending.  Never blocks."""
        if self._status is None:
            with self._lock or _NO_LOCK:
                if self._status is None:
                    done = ctypes.c_int(0)
                    rc = _lib.test(self._req, ctypes.byref(done))
                    if not done.value:
                        return False
                    self._complete(rc, False)
            self._report()
        self._raise_if_failed()
        return True

    @property
    def nbytes(self):
        """Bytes a completed receive got (0 otherwise)."""
        return self._nbytes

    @property
    def source(self):
        """The rank whose message a completed receive got (the one that
        sent first, for a receive from any rank); -1 otherwise."""
        return self._source

    def _on_poller(self, on_done=None):
        """Hand this request to the poller: on_done(error or None) runs once
        it completes (after the buffers are let go), on the poller thread
        or on a thread that waited for it first."""
        self._lock = threading.Lock()
        self._on_done = on_done

        def finish():
            with self._lock:
                rc = 0
                if self._status is None:
                    done = ctypes.c_int(0)
                    rc = _lib.test(self._req, ctypes.byref(done))
                self._complete(rc, True)
            self._report()
        self._poller.attach(self._req, finish)

    def __del__(self):
        if self._status is not None or self._req is None:
            return
        try:
            self._on_poller()  # the poller keeps us (and the buffers) alive until the end
        except Exception:
            # The queue is gone (after finalize): nothing can complete
            # any more, so the buffers are safe to drop.
            _lib.req_free(self._req)
