"""tide.torch - importing this registers the torch.distributed backend
"tide": dist.init_process_group("tide") then runs every CPU collective
through tide.

    import torch.distributed as dist, tide.torch
    dist.init_process_group("tide", timeout=timedelta(seconds=60))  # env://

Bootstrap.  Under env:// torch's TCPStore already listens on MASTER_PORT,
which is also where tide_init would rendezvous, so the backend does not
read MASTER_PORT: rank 0 picks a free port and publishes it through
torch's store; the others read it there.  The job token never goes
through the store, which anyone who can reach it may read: it is
TIDE_JOB_TOKEN where set (the same on every rank; required when the
ranks span hosts), else, with every rank on this host, a fresh one that
rank 0 leaves in a file only this user can read, whose path it
publishes (and removes once every rank has joined).  The timeout given
to init_process_group becomes tide's deadline for every operation.

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
import inspect
import ipaddress
import os
import secrets
import socket
import tempfile
import threading
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work, _create_work_from_future

import tide

BACKEND = "tide"
_RENDEZVOUS_KEY = "tide/rendezvous"
_ALLTOALLV_TAG = 1 << 30  # above any tag torch code is likely to use

_OPS = ((dist.ReduceOp.SUM, tide.SUM), (dist.ReduceOp.PRODUCT, tide.PROD),
        (dist.ReduceOp.MIN, tide.MIN), (dist.ReduceOp.MAX, tide.MAX),
        (dist.ReduceOp.AVG, tide.AVG), (dist.ReduceOp.BAND, tide.BAND),
        (dist.ReduceOp.BOR, tide.BOR), (dist.ReduceOp.BXOR, tide.BXOR))


def _free_port(addr):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _one_host(addr, size):
    """Whether every rank runs on this host, as far as the launcher says."""
    local = os.environ.get("LOCAL_WORLD_SIZE")
    if local and local.isdigit() and int(local) == size:
        return True
    try:
        return ipaddress.ip_address(socket.gethostbyname(addr)).is_loopback
    except (OSError, ValueError):
        return False


def _token_file():
    """A fresh token in a file only this user may read; its path."""
    fd, path = tempfile.mkstemp(prefix="tide-token-",
                                dir=os.environ.get("XDG_RUNTIME_DIR") or None)
    with os.fdopen(fd, "w") as f:  # mkstemp: mode 0600
        f.write(secrets.token_hex(32))
    return path


def _read_token(path):
    with open(path) as f:
        return f.read().strip()


def _join_world(store, rank, size, timeout):
    """The world communicator, bootstrapped through torch's store (the
    token never is: see the module's docstring)."""
    token = os.environ.get("TIDE_JOB_TOKEN")
    path = None
    if rank == 0:
        addr = os.environ.get("MASTER_ADDR") or "127.0.0.1"
        if not token and not _one_host(addr, size):
            raise RuntimeError(
                "tide: ranks on several hosts need TIDE_JOB_TOKEN, the same on every rank "
                "(e.g. export TIDE_JOB_TOKEN=$(openssl rand -hex 32) before the launcher): "
                "tide does not pass its job token through torch's store, which anyone who "
                "can reach it may read")
        if not token:
            path = _token_file()
        store.set(_RENDEZVOUS_KEY, f"{_free_port(addr)} {path or '-'} {addr}")
    port, where, addr = store.get(_RENDEZVOUS_KEY).decode().split(" ", 2)
    try:
        if not token:
            if where == "-":
                raise RuntimeError("tide: rank 0 has TIDE_JOB_TOKEN set and this rank has not: "
                                   "set the same on every rank")
            token = _read_token(where)
        return tide.init(rank=rank, size=size, master_addr=addr, master_port=int(port),
                         job_token=token, timeout=timeout.total_seconds())
    except tide.Error as e:
        raise RuntimeError(f"tide: cannot join the job: {e}") from e
    except OSError as e:
        raise RuntimeError(f"tide: cannot read the job token rank 0 left at {where}: {e} "
                           "(ranks on several hosts need TIDE_JOB_TOKEN)") from e
    finally:
        if path:  # every rank that joined has read it; one that failed never will
            os.unlink(path)


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


# The works this backend made, for Work.wait's wrapper: whatever it does,
# it does only to these.
_ours = weakref.WeakSet()


def _raise_failed_future():
    """torch 1.13's Work from _create_work_from_future returns True from
    wait() when its future failed (measured here), so a failed synchronous
    dist.all_reduce would pass silently (its get_future() even yields the
    error as the value).  Work.wait is wrapped, once, to raise that error
    after the wait, and before it to complete a running tide work's
    requests on the waiting thread (wait_here).  A work another backend
    made (Gloo's, NCCL's) goes straight to torch's own wait.
    A Python Work subclass is no way out: torch's C++ callers (DDP) reach
    only C++ Work methods once the Python object is gone."""
    original = Work.wait
    if getattr(original, "_tide_checked", False):
        return

    @functools.wraps(original)
    def wait(self, *args, **kwargs):
        if self not in _ours:
            return original(self, *args, **kwargs)
        entry = _inflight.get(id(self))
        if entry is not None and entry[0] is self:
            entry[1].wait_here()
        done = original(self, *args, **kwargs)
        future = self.get_future()
        if future.done():
            # The wrapping work's future holds the error as its value.
            value = future.value()
            if isinstance(value, BaseException):
                raise value
        return done
    wait._tide_checked = True
    Work.wait = wait


_raise_failed_future()


# An any-source receive's work -> its tide Request, for _source_rank.
_sources = weakref.WeakKeyDictionary()


def _answer_source_rank():
    """The work torch makes from a future has no source rank of its own
    (its C++ sourceRank() throws), so Work._source_rank, which
    torch.distributed.recv(src=None) asks once the receive is waited on,
    answers for an any-source receive of ours from its tide Request: -1
    until it has completed.  Any other work goes to torch's own."""
    original = Work._source_rank
    if getattr(original, "_tide_checked", False):
        return

    @functools.wraps(original)
    def _source_rank(self):
        req = _sources.get(self)
        if req is None:
            return original(self)
        return req.source
    _source_rank._tide_checked = True
    Work._source_rank = _source_rank


_answer_source_rank()


def _work(requests, result, after=None):
    completion = _Completion(requests, result, after)
    work = _create_work_from_future(completion.future)
    _ours.add(work)
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


# ------------------------------------------------- what Gloo accepts, checked alike

def _list(x):
    """Gloo's overloads take a tensor or a list of them."""
    return [x] if isinstance(x, torch.Tensor) else list(x)


def _fail(name, what):
    raise RuntimeError(f"tide {name}: {what}")


def _check_same(name, tensors, expect=None):
    """Gloo's checks on a list that moves as one: CPU, dense, one dtype
    and one size (as `expect`'s, else the first's)."""
    first = expect if expect is not None else tensors[0]
    for t in tensors:
        if t.device.type != "cpu":
            _fail(name, f"unsupported device type {t.device.type}: tide works on CPU tensors")
        if t.layout != first.layout:
            _fail(name, "invalid tensor layout")
        if t.dtype != first.dtype:
            _fail(name, "invalid tensor type")
        if t.size() != first.size():
            _fail(name, "invalid tensor size")


def _check_list(name, tensors):
    if not tensors:
        _fail(name, "requires non-empty tensor list")
    _check_same(name, tensors)


def _check_root(name, root, size):
    if not 0 <= root < size:
        _fail(name, f"invalid root rank: {root} (the group has {size} ranks)")


def _root_tensor(name, opts, tensors):
    index = getattr(opts, "rootTensor", 0)
    if not 0 <= index < len(tensors):
        _fail(name, f"invalid root tensor: {index} of a list of {len(tensors)}")
    return index


def _check_blocks(name, whole, block, size, whole_is="output"):
    """Gloo's checks on a single-tensor all-gather (whole: the output) or
    reduce-scatter (whole: the input): CPU, dense, one dtype, and `whole`
    holding `size` blocks each shaped as `block`, concatenated along dim 0
    (what Gloo takes: it chunks `whole` along dim 0 and compares each
    chunk with `block`) or stacked along a new dim 0 (the other form
    torch documents for all_gather_into_tensor and reduce_scatter_tensor,
    which Gloo refuses and NCCL takes)."""
    for t in (whole, block):
        if t.device.type != "cpu":
            _fail(name, f"unsupported device type {t.device.type}: tide works on CPU tensors")
        if t.layout != torch.strided:
            _fail(name, "invalid tensor layout: dense tensors only")
    block_is = "input" if whole_is == "output" else "output"
    if whole.dtype != block.dtype:
        _fail(name, f"invalid tensor type: the {whole_is} is {whole.dtype}, "
              f"the {block_is} {block.dtype}")
    shape = tuple(block.shape)
    stacked = (size,) + shape
    concatenated = (shape[0] * size,) + shape[1:] if shape else stacked
    if tuple(whole.shape) not in (concatenated, stacked):
        _fail(name, f"invalid tensor size: the {whole_is} is {tuple(whole.shape)}, needs "
              f"{size} {block_is}s of {shape} concatenated along dim 0 {concatenated} or "
              f"stacked {stacked}")


class _Dense:
    """What tide is handed for a caller's tensor: the tensor itself when it
    is contiguous, else a contiguous copy (transposed, channels_last,
    strided views: Gloo copies too) whose result is copied back; a bool
    tensor as bytes."""

    def __init__(self, t):
        self.t = t
        self.c = t if t.is_contiguous() else t.contiguous()
        if self.c.dtype == torch.bool:
            self.c = self.c.view(torch.uint8)

    def back(self):
        if self.c.data_ptr() != self.t.data_ptr():
            self.t.copy_(self.c.view(torch.bool) if self.t.dtype == torch.bool else self.c)


def _dense(tensors):
    return [_Dense(t) for t in tensors]


def _after_all(dense, then=None):
    def after():
        for d in dense:
            d.back()
        if then is not None:
            then()
    return after


def _torch_op(opts, op):
    """torch's ReduceOp as given: op=, opts.reduceOp, or a ReduceOp in the
    opts place (SUM when none)."""
    if op is not None:
        return op
    return getattr(opts, "reduceOp", opts) if opts is not None else dist.ReduceOp.SUM


def _root_of(opts, root):
    """The root rank as given: root=, or opts.rootRank (0 when neither)."""
    return root if root is not None else getattr(opts, "rootRank", 0)


def _reduce_op(opts, op, dtype):
    """The tide op for torch's (given as opts.reduceOp, as a ReduceOp in the
    opts place, or as op=): bool combines as logic (SUM and MAX or,
    PRODUCT and MIN and), as Gloo's C++ bool does."""
    op = _torch_op(opts, op)
    if dtype == torch.bool:
        if _is_one_of(op, dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.BOR):
            return tide.MAX
        if _is_one_of(op, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.BAND):
            return tide.MIN
        if _is_one_of(op, dist.ReduceOp.BXOR):
            return tide.BXOR  # 0 and 1 stay 0 and 1
        raise RuntimeError("tide: unsupported reduction operation for bool tensors: "
                           "SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR (AVG is not a bool)")
    return _tide_op(op)


def _fold(tensors, op):
    """Every tensor of a rank's list counts (Gloo's multi-input reduce):
    combine them here first, in list order, into a fresh tensor."""
    acc = tensors[0].contiguous().clone()
    for t in tensors[1:]:
        if op in (tide.SUM, tide.AVG):
            acc.add_(t)
        elif op == tide.PROD:
            acc.mul_(t)
        elif op == tide.MIN:
            torch.minimum(acc, t, out=acc)
        elif op == tide.MAX:
            torch.maximum(acc, t, out=acc)
        elif op == tide.BAND:
            acc.bitwise_and_(t)
        elif op == tide.BOR:
            acc.bitwise_or_(t)
        else:
            acc.bitwise_xor_(t)
    return acc


def _is_one_of(op, *theirs):
    """op == one of theirs, asked of op: torch 2 passes a ReduceOp, which
    knows how to equal the RedOpType constants; `op in (...)` asks the
    constants, which do not know a ReduceOp."""
    return any(op == t for t in theirs)


def _tide_op(op):
    for theirs, ours in _OPS:
        if _is_one_of(op, theirs):
            return ours
    raise RuntimeError(f"tide: unsupported reduction operation {op} "
                       "(SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR)")


# Every group this process made, for as long as it runs.  torch's C++ may
# hold a group after the last Python reference goes (a round-robin group
# of groups; torch 2's registry of groups by name for its functional
# collectives), and a Python ProcessGroup whose Python object is gone
# answers nothing there: "Tried to call pure virtual function".  A group
# is small, and its communicator lives until tide.finalize() anyway.
_groups = []


class TideProcessGroup(ProcessGroup):
    """A torch ProcessGroup over one tide communicator.  Each method takes
    the forms Gloo's does (a tensor or a list; opts, or op= and root=),
    checks what Gloo checks, with its words, and gives its future the
    value Gloo's gives (the tensors, a flat list for one output list)."""

    def __init__(self, comm, rank, size, group_name=None):
        super().__init__(rank, size)
        _groups.append(self)
        self.comm = comm
        self._running = {}  # id(future) -> future of a work not yet done: barrier waits
        self._group_name = group_name
        self._seq = 0  # operations posted: _get_sequence_number_for_group

    def name(self):
        return BACKEND

    # torch 2 keeps a group's name and devices in the C++ backends a
    # ProcessGroup holds, and a Python group holds none: DeviceMesh (so
    # fully_shard and DTensor) reads group_name, and the object
    # collectives read _device_types.  torch's own Python groups answer
    # these themselves (test_c10d_pypg.py); so does this one.
    @property
    def group_name(self):
        if self._group_name is None:
            raise RuntimeError("ProcessGroup name not set")
        return self._group_name

    def _set_group_name(self, name):
        self._group_name = name

    @property
    def _device_types(self):
        return [torch.device("cpu")]

    def getBackendName(self):
        return BACKEND

    # Sequence numbers, as Gloo keeps them: one per operation posted on
    # this group, from 0 on every rank (torch compares them across ranks
    # to find a rank that skipped a collective).
    def _set_sequence_number_for_group(self):
        self._seq = 0

    def _get_sequence_number_for_group(self):
        return self._seq

    def _work(self, requests, result, after=None):
        self._seq += 1
        work = _work(requests, result, after)
        future = work.get_future()
        if not future.done():
            key = id(future)
            self._running[key] = future
            future.add_done_callback(lambda _: self._running.pop(key, None))
        return work

    # ---------------------------------------------------------- reductions

    @_posting
    def allreduce(self, tensors, opts=None, op=None):
        tensors = _list(tensors)
        _check_list("allreduce", tensors)
        if tensors[0].is_sparse:
            return self._sparse_allreduce(tensors, opts, op)
        top = _reduce_op(opts, op, tensors[0].dtype)
        if len(tensors) == 1:
            d = _dense(tensors)
            req = self.comm.iallreduce(d[0].c, op=top)
            return self._work([req], tensors, _after_all(d))
        acc = _Dense(_fold(tensors, top))
        req = self.comm.iallreduce(acc.c, op=top)
        return self._work([req], tensors, lambda: [t.copy_(acc.t) for t in tensors])

    @_posting
    def allreduce_coalesced(self, tensors, opts=None):
        """One allreduce of the list, concatenated (Gloo's way): a tensor
        listed twice gets its sum once, in both places."""
        tensors = _list(tensors)
        if not tensors:
            _fail("allreduce_coalesced", "requires non-empty tensor list")
        # Gloo's order: every layout as the first's, then types, devices,
        # and only then whether the layout is one it takes.
        for i, t in enumerate(tensors):
            if t.layout != tensors[0].layout:
                _fail("allreduce_coalesced", f"invalid tensor layout at index {i} "
                      f"({t.layout}, the first is {tensors[0].layout})")
        for t in tensors:
            if t.dtype != tensors[0].dtype:
                _fail("allreduce_coalesced", "tensors must all have the same type")
        for t in tensors:
            if t.device.type != "cpu":
                _fail("allreduce_coalesced",
                      f"unsupported device type {t.device.type}: tide works on CPU tensors")
        if tensors[0].layout != torch.strided:
            _fail("allreduce_coalesced", f"unsupported layout {tensors[0].layout}")
        top = _reduce_op(opts, None, tensors[0].dtype)
        flat = _Dense(_flat(tensors))
        req = self.comm.iallreduce(flat.c, op=top)
        return self._work([req], tensors, _copy_out(flat.t, tensors))

    def _sparse_allreduce(self, tensors, opts, op):
        """A sparse COO sum, as Gloo's: every rank's indices and values
        gathered, then added up and coalesced here."""
        for t in tensors:
            if t.layout != tensors[0].layout:
                _fail("allreduce", "invalid tensor layout")
            if t.size() != tensors[0].size():
                _fail("allreduce", "invalid tensor size")
        if _torch_op(opts, op) != dist.ReduceOp.SUM:
            _fail("allreduce", "unsupported reduction operation (sparse tensors: SUM only)")
        local = tensors[0].coalesce()
        for t in tensors[1:]:
            local = (local + t).coalesce()
        total = _sparse_gather_sum(self.comm, local)
        for t in tensors:
            t.copy_(total)
        return self._work([], tensors)

    @_posting
    def reduce(self, tensors, opts=None, root=None, op=None):
        tensors = _list(tensors)
        rank = _root_of(opts, root)
        _check_root("reduce", rank, self.size())
        _root_tensor("reduce", opts, tensors)
        if len(tensors) != 1:
            _fail("reduce", "requires a single-element tensor list")
        _check_same("reduce", tensors)
        d = _dense(tensors)
        req = self.comm.ireduce(d[0].c, op=_reduce_op(opts, op, tensors[0].dtype), root=rank)
        return self._work([req], tensors, _after_all(d))

    @_posting
    def _reduce_scatter_base(self, output, input, opts=None):
        _check_blocks("reduce_scatter_single", input, output, self.size(), whole_is="input")
        top = _reduce_op(opts, None, input.dtype)
        d = _dense([output, input])
        return self._work([self.comm.ireduce_scatter(d[1].c, d[0].c, op=top)], [output],
                          _after_all(d[:1]))

    @_posting
    def reduce_scatter(self, output_tensors, input_tensors, opts=None, op=None):
        if isinstance(output_tensors, torch.Tensor):  # reduce_scatter(output, inputs, op)
            outs, ins = [output_tensors], [input_tensors]
        else:
            outs, ins = list(output_tensors), list(input_tensors)
        if not outs:
            _fail("reduce_scatter", "requires non-empty tensor list")
        if len(ins) != len(outs):
            _fail("reduce_scatter", "requires input/output tensor lists to have the same length")
        reqs, dense = [], []
        for out, inputs in zip(outs, ins):
            inputs = list(inputs)
            if len(inputs) != self.size():
                _fail("reduce_scatter", f"invalid input tensor list: {len(inputs)} tensors "
                      f"for {self.size()} ranks")
            _check_same("reduce_scatter", inputs, out)
            top = _reduce_op(opts, op, out.dtype)
            d = _Dense(out)
            reqs.append(self.comm.ireduce_scatter(_Dense(_flat(inputs)).c, d.c, op=top))
            dense.append(d)
        return self._work(reqs, outs, _after_all(dense))

    # ------------------------------------------------------------ movement

    @_posting
    def broadcast(self, tensors, opts=None, root=None):
        tensors = _list(tensors)
        rank = _root_of(opts, root)
        _check_root("broadcast", rank, self.size())
        index = _root_tensor("broadcast", opts, tensors)
        _check_same("broadcast", tensors)
        src = _Dense(tensors[index])
        req = self.comm.ibroadcast(src.c, root=rank)

        def after():
            src.back()
            for i, t in enumerate(tensors):
                if i != index:
                    t.copy_(tensors[index])
        return self._work([req], tensors, after)

    @_posting
    def _allgather_base(self, output, input, opts=None):
        _check_blocks("all_gather_single", output, input, self.size())
        d = _dense([output, input])
        return self._work([self.comm.iallgather(d[1].c, d[0].c)], [output], _after_all(d[:1]))

    def _pairwise(self, name, outputs, inputs, post, gathers=True):
        """One tide call per (output, input) pair, one work for them all:
        every pair checked (as all_gather_single's, or reduce_scatter's)
        before any is posted."""
        outputs, inputs = list(outputs), list(inputs)
        if len(outputs) != len(inputs):
            _fail(name, "requires input/output tensor lists to have the same length")
        for out, inp in zip(outputs, inputs):
            if gathers:
                _check_blocks(name, out, inp, self.size())
            else:
                _check_blocks(name, inp, out, self.size(), whole_is="input")
        reqs, dense = [], []
        for out, inp in zip(outputs, inputs):
            d = _dense([out, inp])
            reqs.append(post(d[1].c, d[0].c, inp))
            dense.append(d[0])
        return self._work(reqs, list(outputs), _after_all(dense))

    @_posting
    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2's batched all_gather_into_tensor (FSDP2, DTensor)."""
        return self._pairwise("allgather_into_tensor_coalesced", outputs, inputs,
                              lambda i, o, _: self.comm.iallgather(i, o))

    @_posting
    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2's batched reduce_scatter_tensor, likewise."""
        return self._pairwise("reduce_scatter_tensor_coalesced", outputs, inputs,
                              lambda i, o, t: self.comm.ireduce_scatter(
                                  i, o, op=_reduce_op(opts, None, t.dtype)), gathers=False)

    @_posting
    def allgather(self, output_tensors, input_tensors, opts=None):
        """Every rank's every input lands in every output list, rank-major
        (Gloo's multi-input form); a tensor and a list is the one-input
        form."""
        if isinstance(input_tensors, torch.Tensor):
            output_tensors, input_tensors = [output_tensors], [input_tensors]
        ins, outs = list(input_tensors), [list(o) for o in output_tensors]
        if not ins:
            _fail("allgather", "requires non-empty input tensor list")
        if len(outs) != len(ins):
            _fail("allgather", "requires input/output tensor lists to have the same length")
        _check_same("allgather", ins)
        for o in outs:
            if len(o) != len(ins) * self.size():
                _fail("allgather", "invalid output tensor list: "
                      f"{len(o)} tensors for {len(ins)} inputs on {self.size()} ranks")
            _check_same("allgather", o, ins[0])
        flat = torch.empty(ins[0].numel() * len(ins) * self.size(), dtype=ins[0].dtype)
        send = _Dense(_flat(ins))
        recv = _Dense(flat)
        req = self.comm.iallgather(send.c, recv.c)

        def after():
            for o in outs:
                _copy_out(flat, o)()
        return self._work([req], outs[0] if len(outs) == 1 else outs, after)

    @_posting
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """Rank r's input_list lands in output_lists[r], tensor for tensor,
        through one all-gather of the list concatenated."""
        ins, outs = list(input_list), [list(o) for o in output_lists]
        if len(outs) != self.size():
            _fail("allgather_coalesced", f"output lists should be equal to world size "
                  f"({len(outs)} for {self.size()})")
        for o in outs:
            if len(o) != len(ins):
                _fail("allgather_coalesced", "each output list holds one tensor per input")
            for i, (got, want) in enumerate(zip(o, ins)):
                if got.numel() != want.numel():
                    _fail("allgather_coalesced", f"invalid size of output tensor at index {i}")
                if got.dtype != want.dtype:
                    _fail("allgather_coalesced", f"invalid tensor type at index {i}")
        send = _Dense(_flat(ins)) if ins else None
        n = send.t.numel() if send is not None else 0
        flat = torch.empty(n * self.size(), dtype=ins[0].dtype if ins else torch.uint8)
        req = self.comm.iallgather(send.c if send else flat[:0], _Dense(flat).c)

        def after():
            for r, o in enumerate(outs):
                _copy_out(flat[r * n:(r + 1) * n], o)()
        return self._work([req], outs, after)

    @_posting
    def gather(self, output_tensors, input_tensors, opts=None, root=None):
        rank = _root_of(opts, root)
        if isinstance(input_tensors, torch.Tensor):  # gather(outputs, input, root)
            input_tensors = [input_tensors]
            output_tensors = [output_tensors] if self.rank() == rank else []
        _check_root("gather", rank, self.size())
        ins, outs = list(input_tensors), [list(o) for o in output_tensors]
        if len(ins) != 1:
            _fail("gather", "requires a single-element input tensor list")
        inp = _Dense(ins[0])
        if self.rank() != rank:
            if outs:
                _fail("gather", "requires empty output on non-root")
            return self._work([self.comm.igather(inp.c, root=rank)], [])
        if len(outs) != 1:
            _fail("gather", "requires a single-element output list")
        if len(outs[0]) != self.size():
            _fail("gather", f"Incorrect output list size {len(outs[0])}. "
                  f"Output list size should be {self.size()}")
        _check_same("gather", outs[0], ins[0])
        flat = torch.empty(ins[0].numel() * self.size(), dtype=ins[0].dtype)
        req = self.comm.igather(inp.c, _Dense(flat).c, root=rank)
        return self._work([req], outs[0], _copy_out(flat, outs[0]))

    @_posting
    def scatter(self, output_tensors, input_tensors, opts=None, root=None):
        rank = _root_of(opts, root)
        if isinstance(output_tensors, torch.Tensor):  # scatter(output, inputs, root)
            output_tensors = [output_tensors]
            input_tensors = [input_tensors] if self.rank() == rank else []
        _check_root("scatter", rank, self.size())
        outs, ins = list(output_tensors), [list(i) for i in input_tensors]
        if len(outs) != 1:
            _fail("scatter", "requires a single-element output tensor list")
        if self.rank() == rank:
            if len(ins) != 1:
                _fail("scatter", "requires a single-element input list")
            if len(ins[0]) != self.size():
                _fail("scatter", f"Incorrect input list size {len(ins[0])}. "
                      f"Input list size should be {self.size()}")
            _check_same("scatter", ins[0], outs[0])
        elif ins:
            _fail("scatter", "requires empty input on non-root")
        out = _Dense(outs[0])
        flat = _Dense(_flat(ins[0])).c if self.rank() == rank else None
        return self._work([self.comm.iscatter(flat, out.c, root=rank)], outs, _after_all([out]))

    @_posting
    def alltoall(self, output_tensors, input_tensors, opts=None):
        sizes = {t.numel() for t in list(output_tensors) + list(input_tensors)}
        if len(sizes) != 1:
            return self._alltoallv_lists(output_tensors, input_tensors)
        flat_out = torch.empty(sizes.pop() * self.size(), dtype=output_tensors[0].dtype)
        req = self.comm.ialltoall(_Dense(_flat(input_tensors)).c, _Dense(flat_out).c)
        return self._work([req], output_tensors, _copy_out(flat_out, output_tensors))

    @_posting
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """Blocks of dim 0: equal ones (no split sizes), or as the split
        sizes say (Gloo's checks: dense CPU tensors, one dtype, splits of
        dim 0 one a rank)."""
        for t in (output, input):
            if t.device.type != "cpu":
                _fail("all_to_all_single",
                      f"unsupported device type {t.device.type}: tide works on CPU tensors")
            if t.layout != torch.strided:
                _fail("all_to_all_single", "invalid tensor layout: dense tensors only")
            if t.dim() == 0:
                _fail("all_to_all_single", "tensors need a dim 0 to split")
        if output.dtype != input.dtype:
            _fail("all_to_all_single", f"invalid tensor type: the output is {output.dtype}, "
                  f"the input {input.dtype}")
        if not output_split_sizes and not input_split_sizes:
            self._split(output, (), self.size())  # the checks only
            self._split(input, (), self.size())
            d = _dense([output, input])
            return self._work([self.comm.ialltoall(d[1].c, d[0].c)], [output],
                              _after_all(d[:1]))
        n = self.size()
        ins = self._split(input, input_split_sizes, n)
        outs = self._split(output, output_split_sizes, n)
        return self._alltoallv_lists(outs, ins, result=[output])

    # The single-tensor names torch took from torchcomms in 2026 (pytorch
    # PRs 186130 and 187140; DeepSpeed dates them to torch 2.13-2.14):
    # canonical there, with the names above kept as forwarding aliases.
    # A Python group is asked for the new name first, then the old one.
    all_gather_single = _allgather_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single = _reduce_scatter_base
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    all_to_all_single = alltoall_base

    @staticmethod
    def _split(t, splits, n):
        """t's blocks along dim 0 (c10d's checkSplitSizes, in its words)."""
        if not splits:
            if t.size(0) % n:
                _fail("all_to_all_single", f"Tensor's dim 0 does not divide equally across "
                      f"group size ({t.size(0)} rows, {n} ranks)")
            splits = [t.size(0) // n] * n
        if len(splits) != n:
            _fail("all_to_all_single", f"Number of tensor splits not equal to group size "
                  f"({len(splits)} splits, {n} ranks)")
        if sum(splits) != t.size(0):
            _fail("all_to_all_single", f"Split sizes doesn't match total dim 0 size "
                  f"({list(splits)} for {t.size(0)} rows)")
        return list(torch.split(t, list(splits), dim=0))

    def _alltoallv_lists(self, outs, ins, result=None):
        """A send and a receive per peer; the block for itself is copied."""
        me, reqs, dense = self.rank(), [], []
        for peer in range(self.size()):
            if peer == me:
                outs[me].copy_(ins[me])
                continue
            d = _Dense(outs[peer])
            dense.append(d)
            reqs.append(self.comm.irecv(d.c, peer, _ALLTOALLV_TAG))
            reqs.append(self.comm.isend(_Dense(ins[peer]).c, peer, _ALLTOALLV_TAG))
        return self._work(reqs, result if result is not None else outs, _after_all(dense))

    @_posting
    def barrier(self, opts=None):
        """Also waits for this group's works posted before it, as Gloo's
        barrier does ("barrier implies wait")."""
        earlier = list(self._running.values())
        work = self._work([self.comm.ibarrier()], [])
        if not earlier:
            return work
        everything = torch.futures.collect_all(earlier + [work.get_future()])
        barrier = _create_work_from_future(everything.then(_all_succeeded))
        _ours.add(barrier)
        return barrier

    # ------------------------------------------------------ point to point

    @_posting
    def send(self, tensors, dst, tag=0):
        tensors = _list(tensors)
        return self._work([self.comm.isend(_Dense(t).c, dst, tag) for t in tensors], tensors)

    @_posting
    def recv(self, tensors, src, tag=0):
        tensors = _list(tensors)
        dense = _dense(tensors)
        return self._work([self.comm.irecv(d.c, src, tag) for d in dense], tensors,
                          _after_all(dense))

    @_posting
    def recv_anysource(self, tensors, tag=0):
        """A receive from whichever rank sends first (torch.distributed's
        recv with src=None); the work's _source_rank() says which."""
        tensors = _list(tensors)
        if len(tensors) != 1:
            _fail("recv_anysource", "requires a single-element tensor list")
        dense = _dense(tensors)
        req = self.comm.irecv(dense[0].c, None, tag)
        work = self._work([req], tensors, _after_all(dense))
        _sources[work] = req
        return work


def _all_succeeded(collected):
    """collect_all's futures, each waited on: the first failure raises."""
    for future in collected.value():
        future.wait()
    return []


def _sparse_gather_sum(comm, local):
    """Every rank's sparse COO tensor (coalesced) summed: the nonzero counts
    all-gathered, then the indices and values of each rank padded to the
    largest and all-gathered, then added up here in rank order."""
    n, dims = comm.size, local.sparse_dim()
    counts = torch.zeros(n, dtype=torch.int64)
    comm.allgather(torch.tensor([local._nnz()], dtype=torch.int64), counts)
    most = int(counts.max())
    values = local._values()
    dense_shape = tuple(values.shape[1:])
    idx = torch.zeros((dims, most), dtype=torch.int64)
    idx[:, :local._nnz()] = local._indices()
    val = torch.zeros((most,) + dense_shape, dtype=values.dtype)
    val[:local._nnz()] = values
    all_idx = torch.empty((n, dims, most), dtype=torch.int64)
    all_val = torch.empty((n, most) + dense_shape, dtype=values.dtype)
    comm.allgather(idx.contiguous(), all_idx)
    comm.allgather(val.contiguous(), all_val)
    total = None
    for r in range(n):
        k = int(counts[r])
        part = torch.sparse_coo_tensor(all_idx[r, :, :k], all_val[r, :k], local.size())
        total = part if total is None else total + part
    return total.coalesce()


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
    # torch 2 hands a group that is a ProcessGroup back as is, without
    # naming it: the name it registers the group under is group_id.
    return TideProcessGroup(comm, opts.group_rank, opts.group_size,
                            getattr(opts, "group_id", None) or None)


def _register():
    """Says it is a CPU backend where torch asks (devices=, torch 2.x):
    without it torch assumes cpu and cuda and hands tide CUDA tensors."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    kwargs = {"extended_api": True}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu"]
    dist.Backend.register_backend(BACKEND, _create, **kwargs)


_register()
