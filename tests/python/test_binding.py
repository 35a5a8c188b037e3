"""test_binding.py - the tide package: in this process (what needs no
job), then rank_binding.py and rank_faults.py on 1-4 ranks."""
import ctypes
import os

import pytest

import tide
from conftest import BUILD, ROOT
from tide import _lib


def test_config_mirrors_the_c_layout():
    """_lib.Config must lay tide_config out as the C compiler does (every
    field's offset and size, and the whole size: tests/config_layout.c
    prints them), or tide_config_default would write past its end."""
    import json
    import subprocess
    layout = json.loads(subprocess.run([os.path.join(BUILD, "tests", "config-layout")],
                                       capture_output=True, text=True, check=True).stdout)
    mirror = {name: [getattr(_lib.Config, name).offset, getattr(_lib.Config, name).size]
              for name, _ in _lib.Config._fields_}
    assert mirror == layout["fields"]
    assert ctypes.sizeof(_lib.Config) == layout["size"]


def test_version_is_the_librarys():
    assert tide.__version__ == _lib.version().decode()
    assert len(tide.__version__.split(".")) == 3, tide.__version__


def test_errors_carry_name_message_and_builtin():
    e = tide.errors.error(-3, "rank 1: allreduce (seq 4): did not complete")
    assert isinstance(e, tide.DeadlineExceeded) and isinstance(e, TimeoutError)
    assert isinstance(e, tide.Error) and e.name == "TIDE_ETIMEDOUT" and e.code == -3
    assert "did not complete" in str(e) and str(e).startswith("TIDE_ETIMEDOUT")
    lost = tide.errors.error(-4, "rank 1: allreduce (seq 2): rank 0 reported: receive from "
                             "rank 3 (tag 1) failed: a peer rank was lost")
    assert isinstance(lost, tide.PeerLost) and isinstance(lost, ConnectionError)
    assert lost.peer == 3
    assert isinstance(tide.errors.error(-1), ValueError)
    assert tide.errors.error(-1).message == "invalid argument"  # tide's own text
    for code in range(-1, -15, -1):
        assert type(tide.errors.error(code)) is not tide.Error, code


def test_library_override_is_obeyed(tmp_path):
    """TIDE_LIBRARY wins, and a wrong one is reported, not skipped."""
    import subprocess
    import sys
    env = dict(os.environ, TIDE_LIBRARY=str(tmp_path / "missing.so"),
               PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", "import tide"], env=env, capture_output=True,
                       text=True)
    assert p.returncode != 0 and "missing.so (absent)" in p.stderr


def test_progress_thread_goes_where_told(monkeypatch):
    """TIDE_PROGRESS_CPUS: the progress thread on our last CPU, the caller
    moved off it (with two CPUs or more), and progress_cpus() says so."""
    import socket
    mask = os.sched_getaffinity(0)
    last = max(mask)
    for var in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TIDE_PROGRESS_CPUS", str(last))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        with tide.init(master_port=port, timeout=10) as comm:
            assert comm.progress_cpus() == (str(last), len(mask) >= 2)
            if len(mask) >= 2:
                assert os.sched_getaffinity(0) == mask - {last}
    finally:
        os.sched_setaffinity(0, mask)


def test_split_communicator_after_finalize(monkeypatch):
    """A communicator made by split is freed with its world: using it after
    tide.finalize() raises (it segfaulted), and closing it is a no-op."""
    import socket
    import numpy as np
    for var in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = tide.init(master_port=port, timeout=10)
    half = world.split(0)
    x = np.ones(4, dtype=np.float32)
    half.allreduce(x)
    tide.finalize()
    with pytest.raises(tide.InvalidArgument, match="freed it with its world"):
        half.allreduce(x)
    with pytest.raises(tide.InvalidArgument, match="freed it with its world"):
        half.split(0)
    half.close()
    half.close()
    assert "closed" in repr(half)


def test_single_rank_without_a_launcher(monkeypatch):
    """No launcher variables: a world of one, collectives are copies."""
    import socket
    import numpy as np
    for var in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tide.init(master_port=port, timeout=10) as comm:
        assert (comm.rank, comm.size) == (0, 1)
        x = np.arange(5, dtype=np.float32)
        out = np.empty_like(x)
        assert comm.allreduce(x, out) is out and np.array_equal(out, x)
        with pytest.raises(tide.InvalidArgument, match="already initialized"):
            tide.init()
    assert tide.world() is None
    with pytest.raises(tide.InvalidArgument, match="closed"):
        comm.barrier()


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_binding_on_ranks(run_ranks, n):
    out = run_ranks(n, "rank_binding.py")
    assert out.count("ok gil_released") == n


def test_exit_with_a_receive_pending_past_finalize(run_ranks):
    """The process ends (it hung at exit: issue 33); a rank still there
    after 20 s is killed by its own alarm, and the job fails."""
    out = run_ranks(2, "rank_exit.py", timeout=60)
    assert out.count("ok exit") == 2, out


@pytest.mark.parametrize("case", ["deadline", "dead_peer"])
def test_failures_on_3_ranks(run_ranks, case):
    out = run_ranks(3, "rank_faults.py", case)
    assert out.count(f"ok {case}") == (3 if case == "deadline" else 2), out
