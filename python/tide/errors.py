"""errors.py - tide's errors as Python exceptions.

Every failure raises a subclass of tide.Error carrying the error's name
(e.g. "TIDE_EPEER"), its code and tide's own account of it (rank, peer,
operation, sequence).  Each subclass also derives from the builtin that a
caller would naturally catch: a deadline is a TimeoutError, bad input a
ValueError, a lost peer a ConnectionError (with the peer's rank in .peer).
"""
import re

from . import _lib


class Error(Exception):
    """A tide operation failed.  .name: "TIDE_E..."; .code: the negative
    code; .message: tide's account of what happened."""

    def __init__(self, code, message=""):
        self.code = code
        self.name = _lib.err_name(code).decode()
        self.message = message or _lib.strerror(code).decode()
        super().__init__(f"{self.name}: {self.message}")


class InvalidArgument(Error, ValueError):
    """TIDE_EINVAL: a bad buffer, count, rank, dtype or op, refused before
    anything was sent."""


class OutOfMemory(Error, MemoryError):
    """TIDE_ENOMEM."""


class DeadlineExceeded(Error, TimeoutError):
    """TIDE_ETIMEDOUT: the operation missed its deadline (TIDE_TIMEOUT, or
    the timeout given to init), or a wait's own timeout passed (then the
    request is still pending and may be waited on again)."""


class PeerLost(Error, ConnectionError):
    """TIDE_EPEER: a rank this operation needs is gone; .peer is its rank
    when tide's message names it (else None)."""

    def __init__(self, code, message=""):
        super().__init__(code, message)
        # "receive from rank 2 ... failed", "send to rank 3", "lost rank 1";
        # not the reporter of "rank 1 reported: ...".
        m = re.search(r"\b(?:from|to|lost) rank (\d+)", self.message)
        self.peer = int(m.group(1)) if m else None


class Truncated(Error):
    """TIDE_ETRUNCATE: a message longer than its receive buffer."""


class AuthFailed(Error, PermissionError):
    """TIDE_EAUTH: a peer refused this job's token."""


class Mismatch(Error):
    """TIDE_EMISMATCH: ranks called different collectives."""


class Aborted(Error):
    """TIDE_EABORTED: the communicator was aborted or finalized."""


class IOFailed(Error, OSError):
    """TIDE_EIO."""


class NotSupported(Error):
    """TIDE_ENOSYS: io_uring is unavailable on this system."""


class BootstrapFailed(Error, ConnectionError):
    """TIDE_EBOOTSTRAP: the job could not be assembled in time."""


class ProtocolError(Error):
    """TIDE_EPROTO: a peer sent something malformed."""


class Busy(Error):
    """TIDE_EBUSY."""


class Revoked(Error):
    """TIDE_EREVOKED: a rank revoked the communicator (Comm.revoke) and
    every operation on it, pending or later, fails so.  Recover with
    Comm.agree and Comm.shrink, which still work on it."""


_BY_NAME = {
    "TIDE_EINVAL": InvalidArgument, "TIDE_ENOMEM": OutOfMemory,
    "TIDE_ETIMEDOUT": DeadlineExceeded, "TIDE_EPEER": PeerLost, "TIDE_ETRUNCATE": Truncated,
    "TIDE_EAUTH": AuthFailed, "TIDE_EMISMATCH": Mismatch, "TIDE_EABORTED": Aborted,
    "TIDE_EIO": IOFailed, "TIDE_ENOSYS": NotSupported, "TIDE_EBOOTSTRAP": BootstrapFailed,
    "TIDE_EPROTO": ProtocolError, "TIDE_EBUSY": Busy, "TIDE_EREVOKED": Revoked,
}


def error(code, message=""):
    """The exception for a negative tide code (an Error for a code this
    package does not know)."""
    cls = _BY_NAME.get(_lib.err_name(code).decode(), Error)
    return cls(code, message)


def check(code, what=""):
    """Raise for a failed call that has no request to explain it."""
    if code < 0:
        raise error(code, f"{what}: {_lib.strerror(code).decode()}" if what else "")
    return code


def invalid(message):
    """The error for input refused by this package before calling tide."""
    return InvalidArgument(-1, message)
