"""tide: asynchronous collectives from Python (and, with `import
tide.torch`, a torch.distributed backend named "tide").

    import numpy as np, tide
    with tide.init() as comm:    # tide-run's, torchrun's, mpirun's or srun's variables
        x = np.full(4, comm.rank, np.float32)
        comm.allreduce(x)                      # in place, blocking
        req = comm.iallgather(x, out := np.empty(4 * comm.size, np.float32))
        ...                                    # compute while tide's reactor moves the bytes
        req.wait(timeout=10)

Buffers are any C-contiguous buffer-protocol object (numpy arrays,
bytearray, memoryview) or CPU torch tensors, borrowed zero-copy; the
dtype is the buffer's.  Errors are tide.Error subclasses (errors.py).
The library is found through $TIDE_LIBRARY, the install's libdir, or
../../build (see _lib.py).
"""
import atexit
import ctypes
import threading

from . import _lib
from ._buffer import (BFLOAT16, FLOAT16, FLOAT32, FLOAT64, INT8, INT32, INT64, UINT8, UINT32,
                      UINT64)
from .comm import AVG, BAND, BOR, BXOR, MAX, MIN, PROD, SUM, Comm
from .errors import (Aborted, AuthFailed, BootstrapFailed, Busy, DeadlineExceeded, Error,
                     InvalidArgument, IOFailed, Mismatch, NotSupported, OutOfMemory, PeerLost,
                     ProtocolError, Revoked, Truncated)
from .request import Poller, Request

__all__ = ["init", "finalize", "world", "config", "Comm", "Request",
           "SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR",
           "INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT16", "BFLOAT16",
           "FLOAT32", "FLOAT64",
           "Error", "InvalidArgument", "OutOfMemory", "DeadlineExceeded", "PeerLost", "Truncated",
           "AuthFailed", "Mismatch", "Aborted", "IOFailed", "NotSupported", "BootstrapFailed",
           "ProtocolError", "Busy", "Revoked"]

_FINALIZE_DRAIN_S = 30.0  # how long finalize waits for dropped requests' buffers

__version__ = _lib.version().decode()  # the library's: tide_version()

_lock = threading.Lock()
_world = None
_atexit_registered = False


def config(**overrides):
    """tide_config as tide_init would read it (defaults, then the
    environment), with keyword overrides: rank, size, master_addr,
    master_port, job_token, timeout (seconds), bootstrap_timeout,
    spin_us, log_level, trace_path."""
    cfg = _lib.Config()
    _lib.config_default(ctypes.byref(cfg))
    rc = _lib.config_from_env(ctypes.byref(cfg))
    if rc:
        raise InvalidArgument(rc, "the environment holds a malformed TIDE_*/launcher variable "
                              "(tide's log names it)")
    names = {"timeout": "timeout_s", "bootstrap_timeout": "bootstrap_timeout_s"}
    for key, value in overrides.items():
        field = names.get(key, key)
        if value is None:
            continue
        if field not in dict(_lib.Config._fields_):
            raise InvalidArgument(-1, f"init: unknown setting {key!r}")
        setattr(cfg, field, value.encode() if isinstance(value, str) else value)
    # Completions reach Python through the poller thread, which needs the
    # progress thread to drive the reactor.
    cfg.progress = 0
    return cfg


def init(**overrides):
    """Join the job and return the world Comm (see config() for the
    keyword overrides).  One world per process; init again after
    finalize() is allowed."""
    global _world, _atexit_registered
    with _lock:
        if _world is not None:
            raise InvalidArgument(-1, "tide.init: already initialized (tide.finalize() first)")
        cfg = config(**overrides)
        handle = ctypes.c_void_p()
        rc = _lib.init_with(ctypes.byref(handle), ctypes.byref(cfg))
        if rc:
            from .errors import error
            raise error(rc, f"tide_init failed on rank {cfg.rank} of {cfg.size} "
                        f"(rendezvous {cfg.master_addr.decode()}:{cfg.master_port}); "
                        "tide's log says why")
        _world = Comm(handle.value, Poller())
        if not _atexit_registered:
            # Finalize what the program left open, before the interpreter
            # tears down the objects the poller thread still uses.
            atexit.register(finalize)
            _atexit_registered = True
        return _world


def world():
    """The world Comm, or None before init()."""
    return _world


def finalize():
    """Close the world communicator (tide_finalize): what is still pending
    fails with tide.Aborted; the buffers of dropped requests are let go
    once tide has.  Not collective."""
    global _world
    with _lock:
        comm, _world = _world, None
    if comm is None or comm._h is None:
        return
    handle, comm._h = comm._h, None
    rc = _lib.finalize(handle)
    comm._poller.stop(_FINALIZE_DRAIN_S)
    if rc:
        from .errors import error
        raise error(rc, "tide_finalize")
