"""rank_recovery.py - ULFM-style recovery from Python: Comm.agree is an
AND over the ranks, Comm.revoke wakes a peer blocked in a collective with
tide.Revoked, and after a rank dies mid-loop the survivors revoke, agree,
shrink to the same members and go on with right results.  Run by
test_recovery.py, one case per job (the kill case leaves the world one
rank short)."""
import os
import sys
import time

import numpy as np

import tide
from rankcases import expect_raises, main

DEADLINE_S = 10.0  # every operation's deadline: a missed wake-up fails, not hangs
VICTIM = 1         # the rank that dies in kill_mid_loop (not the last: renumbering shows)
KILL_AT = 7        # the step before which it dies
STEPS = 20


def case_agree_is_and(comm):
    """agree returns the AND of every rank's flag, on every rank."""
    for flags in ([True] * comm.size,
                  [r != 1 for r in range(comm.size)],
                  [r == 0 for r in range(comm.size)],
                  [False] * comm.size,
                  [1, 2, 3, 4][:comm.size]):          # truthy non-bools count as True
        got = comm.agree(flags[comm.rank])
        assert got is all(flags), f"agree({flags}) gave {got!r} on rank {comm.rank}"
    # The communicator is still usable for collectives afterwards.
    x = np.full(3, comm.rank + 1, np.int64)
    comm.allreduce(x)
    assert (x == comm.size * (comm.size + 1) // 2).all(), x


def case_revoke_wakes(comm):
    """Rank 0 revokes a communicator the others are blocked on (it never
    joins their allreduce): they fail with tide.Revoked long before the
    deadline.  Everyone's later operations fail so too; agree and shrink
    still work, and the world is untouched."""
    sub = comm.split(0, key=comm.rank)
    assert sub.size == comm.size
    if comm.rank == 0:
        time.sleep(0.5)          # let the others block in their allreduce
        sub.revoke()
        sub.revoke()             # twice is harmless
    else:
        t0 = time.monotonic()
        e = expect_raises(tide.Revoked, lambda: sub.allreduce(np.ones(1024, np.float32)))
        took = time.monotonic() - t0
        assert isinstance(e, tide.Error) and e.name == "TIDE_EREVOKED", e
        assert took < DEADLINE_S / 2, f"woken after {took:.2f} s: by the deadline, not revoke"
        print(f"rank {comm.rank}: woken after {took * 1000:.0f} ms: {e}", flush=True)
    # Later operations on the revoked communicator fail at once, everywhere.
    expect_raises(tide.Revoked, lambda: sub.barrier())
    expect_raises(tide.Revoked, lambda: sub.broadcast(np.zeros(4), root=0))
    # Agreement still works on it; nobody died, so shrink keeps everyone.
    assert sub.agree(True) is True
    with sub.shrink() as fresh:
        assert (fresh.size, fresh.rank) == (comm.size, comm.rank), (fresh.size, fresh.rank)
        x = np.full(5, 2.0 ** comm.rank)
        fresh.allreduce(x)
        assert (x == 2.0 ** comm.size - 1).all(), x
    sub.close()
    comm.barrier()               # the world was not revoked


def case_kill_mid_loop(comm):
    """Rank VICTIM leaves without a word before step KILL_AT of a loop of
    allreduces.  The survivors catch PeerLost or Revoked, revoke, agree
    that the step failed, shrink to the same members, and finish the loop
    on the new communicator with the right sums."""
    world_rank = comm.rank
    alive = [r for r in range(comm.size) if r != VICTIM]
    cur = comm
    shrinks = 0
    failures = []
    step = 0
    while step < STEPS:
        if step == KILL_AT and world_rank == VICTIM:
            sys.stdout.flush()
            os._exit(0)          # tide-run would stop the job for a non-zero exit or signal
        x = np.full(1 << 12, world_rank + 1.0, np.float64)
        ok = True
        try:
            cur.allreduce(x)
        except (tide.PeerLost, tide.Revoked) as e:
            ok = False
            failures.append(type(e).__name__)
            cur.revoke()         # wake the survivors still waiting on cur
        if cur.agree(ok):
            members = range(comm.size) if cur is comm else alive
            want = sum(r + 1.0 for r in members)
            assert (x == want).all(), f"step {step}: got {x[0]}, want {want}"
            step += 1
            continue
        # The step failed somewhere: shrink and redo it.
        assert step == KILL_AT, f"step {step} failed, but the kill was before {KILL_AT}"
        smaller = cur.shrink()
        shrinks += 1
        if cur is not comm:
            cur.close()
        cur = smaller
    assert shrinks == 1, f"{shrinks} shrinks"
    assert failures and all(f in ("PeerLost", "Revoked") for f in failures), failures
    # Same membership everywhere: every survivor's world rank, by new rank.
    assert cur.size == len(alive) and cur.rank == alive.index(world_rank), (cur.size, cur.rank)
    ranks = np.empty(cur.size, np.int64)
    cur.allgather(np.array([world_rank], np.int64), ranks)
    assert ranks.tolist() == alive, ranks
    sizes = np.empty(cur.size, np.int64)
    cur.allgather(np.array([cur.size], np.int64), sizes)
    assert (sizes == len(alive)).all(), sizes
    print(f"rank {world_rank}: new rank {cur.rank} of {cur.size}, members {ranks.tolist()}, "
          f"failed with {failures}", flush=True)
    cur.close()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    main(CASES, lambda: tide.init(timeout=DEADLINE_S), lambda comm: comm.close())
