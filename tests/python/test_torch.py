"""test_torch.py - the torch.distributed backend "tide" (rank_torch.py on
1-4 ranks, its deadline on 3) and DDP training that matches Gloo's."""
import os
import subprocess

import pytest

from conftest import PYTHON, ROOT, launch


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_backend_on_ranks(run_ranks, n):
    out = run_ranks(n, "rank_torch.py", timeout=240)
    assert out.count("ok errors") == n


C10D_CASES = ["allreduce", "allreduce_coalesced", "sparse", "broadcast", "reduce", "allgather",
              "allgather_coalesced", "gather_scatter", "barrier_implies_wait", "send_recv",
              "layouts", "coalesced_into_tensor", "single_names", "held_by_cpp", "bool", "names_and_objects"]


def _torch_major():
    p = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                       stdout=subprocess.PIPE, text=True, check=True)
    return int(p.stdout.split(".")[0])


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("backend", ["gloo", "tide"])
def test_process_group_api_as_gloo_tests_it(run_ranks, backend, n):
    """rank_c10d.py: what PyTorch's Gloo tests ask of a ProcessGroup, on
    Gloo and on tide alike (bool only where the backend takes it: torch
    1.13's Gloo refuses it)."""
    cases = C10D_CASES
    if backend == "gloo" and _torch_major() < 2:
        cases = [c for c in cases if c != "bool"]
    out = run_ranks(n, "rank_c10d.py", backend, *cases, timeout=240)
    assert out.count("ok ") == n * len(cases), out


def test_without_a_token_one_host_gets_a_private_one(run_ranks):
    """No TIDE_JOB_TOKEN (torchrun sets none): rank 0 hands a fresh token
    to the others through a file only this user reads, not the store."""
    out = run_ranks(3, "rank_torch.py", "token_kept_out_of_the_store", "all_reduce",
                    env={"TIDE_TEST_NO_TOKEN": "1"})
    assert out.count("ok token_kept_out_of_the_store") == 3, out


def test_init_timeout_is_the_deadline(run_ranks):
    out = run_ranks(3, "rank_torch.py", "deadline")
    assert out.count("ok deadline") == 3


def test_ddp_matches_gloo(tmp_path):
    """Two epochs of tools/ddp_demo.py on 2 ranks: Gloo's final parameters,
    then tide's compared with them."""
    demo = os.path.join(ROOT, "tools", "ddp_demo.py")  # absolute: launch takes it as is
    saved = str(tmp_path / "gloo.pt")
    for args in (["--backend", "gloo", "--save", saved],
                 ["--backend", "tide", "--compare", saved]):
        status, out = launch(2, demo, "--epochs", "2", *args, timeout=240)
        assert status == 0, out
    assert "within" in out and "tide: 2 ranks" in out


def test_ddp_on_slices_matches_one_process(run_ranks):
    """rank_fsdp.py's DDP case: 3 ranks, each a slice of one batch, end
    where one process trained on the whole batch ends.  (Its FSDP cases
    need torch 2: tools/device_compare.sh runs them there.)"""
    out = run_ranks(3, "rank_fsdp.py", "tide", "ddp", timeout=240)
    assert out.count("ok ddp") == 3, out
