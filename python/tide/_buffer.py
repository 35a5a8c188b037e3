"""_buffer.py - borrow a caller's buffer zero-copy: its address, size and
tide dtype, held (and so kept alive and unresizable) until release().

Two kinds of object are understood:
  - torch tensors, through data_ptr() (a tensor exports no buffer
    protocol, and numpy has no bfloat16);
  - anything with the buffer protocol (numpy arrays, bytearray, memoryview,
    array.array, bytes as a read-only input), through PyObject_GetBuffer,
    whose export is what keeps the memory from moving.
Every check (writable, C-contiguous, dtype) happens here, before tide is
called, so a refused buffer never sends a byte.
"""
import ctypes
import sys
from ctypes import POINTER, c_char_p, c_int, c_ssize_t, c_void_p, py_object

from .errors import invalid

INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(10)
DTYPE_NAMES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
               "float32", "float64")
ITEMSIZE = (1, 1, 4, 4, 8, 8, 2, 2, 4, 8)

# struct-module format letters (PEP 3118) by kind; the size decides.
_SIGNED = {1: INT8, 4: INT32, 8: INT64}
_UNSIGNED = {1: UINT8, 4: UINT32, 8: UINT64}
_FLOATS = {2: FLOAT16, 4: FLOAT32, 8: FLOAT64}
_KIND = {"b": _SIGNED, "h": {}, "i": _SIGNED, "l": _SIGNED, "q": _SIGNED, "n": _SIGNED,
         "B": _UNSIGNED, "H": {}, "I": _UNSIGNED, "L": _UNSIGNED, "Q": _UNSIGNED, "N": _UNSIGNED,
         "c": _UNSIGNED, "e": _FLOATS, "f": _FLOATS, "d": _FLOATS}


class PyBuffer(ctypes.Structure):
    """Py_buffer of CPython's stable layout (Include/pybuffer.h)."""
    _fields_ = [("buf", c_void_p), ("obj", c_void_p), ("len", c_ssize_t),
                ("itemsize", c_ssize_t), ("readonly", c_int), ("ndim", c_int),
                ("format", c_char_p), ("shape", POINTER(c_ssize_t)),
                ("strides", POINTER(c_ssize_t)), ("suboffsets", POINTER(c_ssize_t)),
                ("internal", c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = (py_object, POINTER(PyBuffer), c_int)
_get_buffer.restype = c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = (POINTER(PyBuffer),)
_release_buffer.restype = None

PyBUF_WRITABLE, PyBUF_FORMAT, PyBUF_C_CONTIGUOUS = 0x0001, 0x0004, 0x0038

_torch_dtypes = None


def _torch_dtype_map(torch):
    global _torch_dtypes
    if _torch_dtypes is None:
        _torch_dtypes = {torch.int8: INT8, torch.uint8: UINT8, torch.int32: INT32,
                         torch.int64: INT64, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16,
                         torch.float32: FLOAT32, torch.float64: FLOAT64}
    return _torch_dtypes


class View:
    """A borrowed buffer.  addr: its first byte; nbytes; dtype (a tide
    dtype); count = nbytes / itemsize.  Holds the object (and its buffer
    export) until release()."""
    __slots__ = ("addr", "nbytes", "dtype", "count", "obj", "pybuf")

    def release(self):
        if self.pybuf is not None:
            _release_buffer(ctypes.byref(self.pybuf))
            self.pybuf = None
        self.obj = None

    def __del__(self):
        self.release()


def _from_tensor(t, what, writable):
    import torch
    dtype = _torch_dtype_map(torch).get(t.dtype)
    if dtype is None:
        raise invalid(f"{what}: tide has no dtype for {t.dtype}")
    if t.device.type != "cpu":
        raise invalid(f"{what}: a {t.device.type} tensor; tide works on CPU memory")
    if not t.is_contiguous():
        raise invalid(f"{what}: the tensor is not contiguous (call .contiguous())")
    # The storage too, not only the tensor: t.set_() gives the tensor
    # another one, and the memory tide writes into would be freed and
    # handed to some other tensor while the operation runs (16,384
    # unrelated elements were overwritten, or the process crashed).
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    v = View()
    v.addr, v.count, v.dtype, v.obj, v.pybuf = t.data_ptr(), t.numel(), dtype, (t, storage), None
    v.nbytes = v.count * ITEMSIZE[dtype]
    return v


def _dtype_of_format(fmt, itemsize, what):
    letter = fmt.lstrip("@=<>!")
    table = _KIND.get(letter)
    dtype = table.get(itemsize) if table is not None and len(letter) == 1 else None
    if dtype is None:
        raise invalid(f"{what}: tide has no dtype for buffer format {fmt!r} "
                      f"({itemsize}-byte items)")
    return dtype


def borrow(obj, what, writable):
    """A View of obj, or InvalidArgument naming `what` when obj is not a
    C-contiguous buffer of a tide dtype (or not writable when it must be)."""
    torch = sys.modules.get("torch")  # a tensor is one only if torch is loaded
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_tensor(obj, what, writable)  # subclasses too (CommTensor, ...)
    pybuf = PyBuffer()
    flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (PyBUF_WRITABLE if writable else 0)
    try:
        _get_buffer(obj, ctypes.byref(pybuf), flags)
    except (BufferError, ValueError) as e:
        raise invalid(f"{what}: {e}"
                      f"{' (it must be writable and C-contiguous)' if writable else ''}") from None
    except TypeError:
        raise invalid(f"{what}: a {type(obj).__name__} is not a buffer "
                      "(numpy array, torch CPU tensor, bytearray, ...)") from None
    v = View()
    v.obj, v.pybuf = obj, pybuf
    try:
        fmt = pybuf.format.decode() if pybuf.format else "B"
        v.dtype = _dtype_of_format(fmt, pybuf.itemsize, what)
    except Exception:
        v.release()
        raise
    v.addr, v.nbytes = pybuf.buf or 0, pybuf.len
    v.count = v.nbytes // ITEMSIZE[v.dtype]
    return v
