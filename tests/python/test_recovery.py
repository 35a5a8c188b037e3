"""test_recovery.py - Comm.revoke, agree and shrink over real processes
(rank_recovery.py, one case per tide-run job), and tide.Revoked."""
import pytest

import tide

JOB_TIMEOUT_S = 40  # a job that hangs fails here; ranks give up at their 10 s deadlines


def test_revoked_is_an_exported_error():
    e = tide.errors.error(-14, "rank 2: allreduce (seq 3): communicator revoked")
    assert type(e) is tide.Revoked and isinstance(e, tide.Error)
    assert e.name == "TIDE_EREVOKED" and e.code == -14 and "revoked" in str(e)
    assert "Revoked" in tide.__all__


@pytest.mark.parametrize("n", [3, 4])
def test_agree_is_an_and(run_ranks, n):
    out = run_ranks(n, "rank_recovery.py", "agree_is_and", timeout=JOB_TIMEOUT_S)
    assert out.count("ok agree_is_and") == n, out


def test_revoke_wakes_a_blocked_peer(run_ranks):
    out = run_ranks(3, "rank_recovery.py", "revoke_wakes", timeout=JOB_TIMEOUT_S)
    assert out.count("ok revoke_wakes") == 3, out
    assert out.count("woken after") == 2, out


def test_survivors_shrink_after_a_kill(run_ranks):
    out = run_ranks(4, "rank_recovery.py", "kill_mid_loop", timeout=JOB_TIMEOUT_S)
    assert out.count("ok kill_mid_loop") == 3, out
    assert out.count("members [0, 2, 3]") == 3, out
