"""rank_exit.py - a rank that leaves a receive pending past tide.finalize()
must still exit: rank 0 keeps (in a global) a receive that nothing will
match and whose wait timed out, then the job finalizes.  At exit the
request was handed to the stopped poller, which started a thread while
the interpreter shut down, and the process hung on a lock (issue 33)."""
import signal

import numpy as np

import tide

left = None  # lives until the interpreter's own teardown


def main():
    global left
    signal.alarm(20)  # a hang kills the rank (SIGALRM's default) instead of outliving the test
    comm = tide.init()
    if comm.rank == 0:
        buf = np.zeros(4, np.int32)
        left = comm.irecv(buf, source=1, tag=999)
        try:
            left.wait(timeout=0.2)
            raise AssertionError("a receive nothing sends to completed")
        except tide.DeadlineExceeded:
            pass
    comm.barrier()
    tide.finalize()
    print(f"ok exit {comm.rank}", flush=True)


if __name__ == "__main__":
    main()
