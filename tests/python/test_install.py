"""test_install.py - `pip install .` builds libtide and puts it inside the
package: an installed tide then runs a job with no TIDE_LIBRARY,
LD_LIBRARY_PATH or ldconfig (issue 34: there was no pyproject.toml)."""
import os
import subprocess

from conftest import BUILD, PYTHON, ROOT

JOB = """
import array, tide
with tide.init() as comm:
    x = array.array("f", [comm.rank + 1.0] * 4)
    comm.allreduce(x)
    print("rank", comm.rank, "sum", x[0], "from", tide._lib.path)
"""


def test_pip_install_bundles_libtide(tmp_path):
    site = tmp_path / "site"
    p = subprocess.run([PYTHON, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", "--target", str(site), ROOT],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert p.returncode == 0, p.stdout
    lib = site / "tide" / "libtide.so.0"
    assert lib.exists()
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("TIDE_LIBRARY", "LD_LIBRARY_PATH")}
    env.update(PYTHONPATH=str(site), TIDE_LOG_LEVEL="0")
    run = subprocess.run([os.path.join(BUILD, "tools", "tide-run"), "-n", "2", "--", PYTHON,
                          str(script)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120)
    assert run.returncode == 0, run.stdout
    for r in range(2):
        assert f"rank {r} sum 3.0 from {lib}" in run.stdout, run.stdout
