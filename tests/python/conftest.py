"""conftest.py - how the Python tests start rank processes.

Multi-rank tests run a rank program (rank_*.py) on N processes through
tide-run, each program running a list of named cases and exiting non-zero
if any failed; the test asserts on the exit status and shows the output.
Environment: TIDE_BUILD (default: build) is the build directory whose
libtide and tide-run are tested; the package comes from python/.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("TIDE_BUILD", os.path.join(ROOT, "build")))
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch

sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("TIDE_LIBRARY", os.path.join(BUILD, "libtide.so"))


def rank_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + HERE
    env["TIDE_LIBRARY"] = os.path.join(BUILD, "libtide.so")
    env.setdefault("TIDE_LOG_LEVEL", "0")
    env.update(extra or {})
    return env


def launch(n, program, *args, timeout=120, env=None):
    """Run PROGRAM (a path, or a file of tests/python) on n ranks; returns
    (status, output)."""
    cmd = [os.path.join(BUILD, "tools", "tide-run"), "-n", str(n), "--", PYTHON,
           os.path.join(HERE, program), *args]
    p = subprocess.run(cmd, env=rank_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, text=True)
    return p.returncode, p.stdout


@pytest.fixture
def run_ranks():
    def run(n, program, *args, timeout=120, env=None):
        status, out = launch(n, program, *args, timeout=timeout, env=env)
        assert status == 0, f"{program} {' '.join(args)} on {n} ranks exited {status}:\n{out}"
        return out
    return run
