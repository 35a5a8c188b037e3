"""_lib.py - find libtide and declare the C functions the package calls.

Where the library comes from, first match wins:
  1. $TIDE_LIBRARY, a path to libtide.so (tests point it at the build dir);
  2. libtide.so.0 inside the package, where `pip install .` puts it
     (meson-python, meson.build's wheel option);
  3. the libdir recorded by `meson install` in _install.py;
  4. a build directory next to the source tree (../../build), for running
     from a checkout with PYTHONPATH=python;
  5. the loader's own search (ldconfig, LD_LIBRARY_PATH).

ctypes, not cffi: it is in the standard library, needs no compiler, and
releases the GIL around every foreign call, which is what lets a waiting
thread (tide_wait, tide_cq_wait) block without stalling the others.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, c_char, c_char_p, c_double, c_int, c_size_t, c_uint64,
                    c_void_p)

SONAME = "libtide.so.0"


def _candidates():
    env = os.environ.get("TIDE_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, SONAME)
    try:
        from . import _install
        yield os.path.join(_install.LIBDIR, SONAME)
    except ImportError:
        pass
    yield os.path.join(here, "..", "..", "build", "libtide.so")
    found = ctypes.util.find_library("tide")
    yield found or SONAME


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("tide: cannot load libtide; tried " + "; ".join(tried) +
                      ". Set TIDE_LIBRARY to the path of libtide.so.")


lib, path = _load()


class Config(ctypes.Structure):
    """tide_config of include/tide.h, field for field, in order
    (tests/python/test_binding.py checks every offset and size against
    what the compiler lays out, printed by tests/config_layout.c)."""
    _fields_ = [
        ("rank", c_int),
        ("size", c_int),
        ("local_rank", c_int),
        ("local_size", c_int),
        ("master_addr", c_char * 256),
        ("master_port", c_int),
        ("job_token", c_char * 256),
        ("timeout_s", c_double),
        ("bootstrap_timeout_s", c_double),
        ("progress", c_int),
        ("spin_us", c_int),
        ("log_level", c_int),
        ("trace_path", c_char * 1024),
        ("yield_when_idle", c_int),
        ("tcp_congestion", c_char * 16),
        ("reactor", c_int),
        ("transport", c_char * 16),
        ("progress_cpus", c_char * 128),
        ("wire_auth", c_char * 16),
    ]


def _declare(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


P = c_void_p            # tide_comm *, tide_req *, tide_cq *, buffers
PP = POINTER(c_void_p)  # tide_comm **, tide_req **, tide_cq **
SZ = c_size_t

strerror = _declare("tide_strerror", c_char_p, c_int)
version = _declare("tide_version", c_char_p)
err_name = _declare("tide_err_name", c_char_p, c_int)
config_default = _declare("tide_config_default", None, POINTER(Config))
config_from_env = _declare("tide_config_from_env", c_int, POINTER(Config))
init_with = _declare("tide_init_with", c_int, PP, POINTER(Config))
comm_rank = _declare("tide_comm_rank", c_int, P)
comm_size = _declare("tide_comm_size", c_int, P)
comm_progress_cpus = _declare("tide_comm_progress_cpus", c_int, P, c_char_p, SZ)
comm_abort = _declare("tide_comm_abort", c_int, P)
comm_revoke = _declare("tide_comm_revoke", c_int, P)
comm_agree = _declare("tide_comm_agree", c_int, P, POINTER(c_int))
comm_shrink = _declare("tide_comm_shrink", c_int, P, PP)
comm_split = _declare("tide_comm_split", c_int, P, c_int, c_int, PP)
comm_create_group = _declare("tide_comm_create_group", c_int, P, POINTER(c_int), c_int, PP)
comm_free = _declare("tide_comm_free", c_int, P)
finalize = _declare("tide_finalize", c_int, P)

wait = _declare("tide_wait", c_int, P, c_int)
test = _declare("tide_test", c_int, P, POINTER(c_int))
req_free = _declare("tide_req_free", None, P)
req_message = _declare("tide_req_message", c_char_p, P)
req_bytes = _declare("tide_req_bytes", SZ, P)
req_source = _declare("tide_req_source", c_int, P)

cq_create = _declare("tide_cq_create", c_int, PP)
cq_attach = _declare("tide_cq_attach", c_int, P, P, c_uint64)
cq_wait = _declare("tide_cq_wait", c_int, P, POINTER(c_uint64), c_int, c_int)
cq_interrupt = _declare("tide_cq_interrupt", c_int, P)
cq_destroy = _declare("tide_cq_destroy", c_int, P)

isend = _declare("tide_isend", c_int, P, P, SZ, c_int, c_int, PP)
irecv = _declare("tide_irecv", c_int, P, P, SZ, c_int, c_int, PP)
ibarrier = _declare("tide_ibarrier", c_int, P, PP)
iallreduce = _declare("tide_iallreduce", c_int, P, P, P, SZ, c_int, c_int, PP)
ibroadcast = _declare("tide_ibroadcast", c_int, P, P, SZ, c_int, c_int, PP)
ireduce = _declare("tide_ireduce", c_int, P, P, P, SZ, c_int, c_int, c_int, PP)
iallgather = _declare("tide_iallgather", c_int, P, P, P, SZ, c_int, PP)
ireduce_scatter = _declare("tide_ireduce_scatter", c_int, P, P, P, SZ, c_int, c_int, PP)
igather = _declare("tide_igather", c_int, P, P, P, SZ, c_int, c_int, PP)
iscatter = _declare("tide_iscatter", c_int, P, P, P, SZ, c_int, c_int, PP)
ialltoall = _declare("tide_ialltoall", c_int, P, P, P, SZ, c_int, PP)

IN_PLACE = 1  # TIDE_IN_PLACE, ((const void *)1)
