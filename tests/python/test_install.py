"""test_install.py - the Python package as people install it (issue 34):
a wheel built with meson-python (pyproject.toml) carries libtide inside
the package, and installed into a virtual environment it runs a job with
no TIDE_LIBRARY, LD_LIBRARY_PATH or ldconfig.  `pip install .` is the
same two steps.  One build of libtide for both, to keep CI short."""
import os
import subprocess
import zipfile

from conftest import BUILD, PYTHON, ROOT

JOB = """
import array, tide
with tide.init() as comm:
    x = array.array("f", [comm.rank + 1.0] * 4)
    comm.allreduce(x)
    print("rank", comm.rank, "sum", x[0], "from", tide._lib.path, "version", tide.__version__)
"""


def _run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert p.returncode == 0, f"{cmd}:\n{p.stdout}"
    return p.stdout


def test_wheel_installs_into_a_venv_and_runs_a_job(tmp_path):
    wheels = tmp_path / "wheels"
    _run([PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
          "-w", str(wheels), ROOT], timeout=900)
    (wheel,) = wheels.glob("tide-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("tide/libtide.so.0", "tide/__init__.py", "tide/torch.py"):
        assert want in names, names

    venv = tmp_path / "venv"
    # Debian's numpy and torch stay visible; tide comes from the wheel.
    _run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)], timeout=120)
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], timeout=300)
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TIDE_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["TIDE_LOG_LEVEL"] = "0"
    out = _run([os.path.join(BUILD, "tools", "tide-run"), "-n", "2", "--", python, str(script)],
               env=env, cwd=str(tmp_path), timeout=120)
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                env=env, cwd=str(tmp_path)).strip()
    lib = os.path.join(site, "tide", "libtide.so.0")
    version = _run([python, "-c", "import tide; print(tide.__version__)"], env=env,
                   cwd=str(tmp_path)).strip()
    assert version.count(".") == 2, version
    for r in range(2):
        assert f"rank {r} sum 3.0 from {lib} version {version}" in out, out
