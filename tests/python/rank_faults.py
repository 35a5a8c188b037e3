"""rank_faults.py - failures as Python sees them: an operation past its
deadline (tide.init(timeout=...)) and a rank that dies (the others get
tide.PeerLost naming it, not a hang).  Run by test_binding.py."""
import os
import sys
import time

import numpy as np

import tide
from rankcases import expect_raises, main

DEADLINE_S = 2.0


def case_deadline(comm):
    """Every rank waits for a message nobody sends: the deadline fails
    it, with tide's account."""
    rx = comm.irecv(np.zeros(1), (comm.rank + 1) % comm.size, tag=5)
    t0 = time.monotonic()
    e = expect_raises(tide.DeadlineExceeded, rx.wait, "deadline")
    took = time.monotonic() - t0
    assert isinstance(e, TimeoutError) and e.name == "TIDE_ETIMEDOUT", e
    assert DEADLINE_S * 0.5 < took < DEADLINE_S * 10, f"failed after {took:.2f} s"
    # Leave together: a rank that finalized first would turn its peers'
    # pending receives into lost peers before their own deadlines.
    comm.barrier()


def case_dead_peer(comm):
    """The last rank leaves without a word; the others' allreduce fails
    with PeerLost naming it, well before the deadline."""
    last = comm.size - 1
    comm.barrier()
    if comm.rank == last:
        sys.stdout.flush()
        os._exit(0)
    t0 = time.monotonic()
    e = expect_raises(tide.PeerLost, lambda: comm.allreduce(np.ones(1 << 16)))
    assert isinstance(e, ConnectionError)
    assert time.monotonic() - t0 < 30, "noticed only at the deadline"
    assert e.peer == last, e
    print(f"rank {comm.rank}: {e} (peer {e.peer})", flush=True)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    timeout = DEADLINE_S if sys.argv[1:] == ["deadline"] else 60
    main(CASES, lambda: tide.init(timeout=timeout), lambda comm: comm.close())
