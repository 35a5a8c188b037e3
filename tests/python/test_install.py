"""test_install.py - the Python package as people install it (issue 34):
`pip install .` builds libtide through meson-python (pyproject.toml) and
puts it inside the package, so a virtual environment's tide runs a job
with no TIDE_LIBRARY, LD_LIBRARY_PATH or ldconfig; `pip wheel .` makes a
wheel that carries it.  Offline, as CI is: Debian's python3-mesonpy and
--no-build-isolation.  Each build is of libtide alone (-Dwheel=true),
some ten seconds here."""
import os
import subprocess
import zipfile

from conftest import BUILD, PYTHON, ROOT

JOB = """
import array, importlib.metadata, tide
with tide.init() as comm:
    x = array.array("f", [comm.rank + 1.0] * 4)
    comm.allreduce(x)
    print("rank", comm.rank, "sum", x[0], "from", tide._lib.path, "version", tide.__version__,
          "dist", importlib.metadata.version("tide"))
"""


def _run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert p.returncode == 0, f"{cmd}:\n{p.stdout}"
    return p.stdout


def _outside_env():
    """The environment of a user: nothing points at this checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TIDE_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["TIDE_LOG_LEVEL"] = "0"
    return env


def test_pip_install_into_a_venv_runs_a_job(tmp_path):
    venv = tmp_path / "venv"
    # Debian's numpy, torch and meson-python stay visible; tide comes from pip.
    _run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)], timeout=120)
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
          ROOT], timeout=900, env=_outside_env())
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = _outside_env()
    # From tmp_path, so that no python/ of the checkout is on the path.
    out = _run([os.path.join(BUILD, "tools", "tide-run"), "-n", "2", "--", python, str(script)],
               env=env, cwd=str(tmp_path), timeout=120)
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                env=env, cwd=str(tmp_path)).strip()
    lib = os.path.join(site, "tide", "libtide.so.0")
    assert os.path.exists(lib), out
    version = _run([python, "-c", "import tide; print(tide.__version__)"], env=env,
                   cwd=str(tmp_path)).strip()
    assert version.count(".") == 2, version
    for r in range(2):
        assert f"rank {r} sum 3.0 from {lib} version {version} dist {version}" in out, out


def test_pip_wheel_carries_libtide(tmp_path):
    wheels = tmp_path / "wheels"
    _run([PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
          "-w", str(wheels), ROOT], timeout=900, env=_outside_env())
    (wheel,) = wheels.glob("tide-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("tide/libtide.so.0", "tide/__init__.py", "tide/_lib.py", "tide/torch.py"):
        assert want in names, names
    # The package and its metadata only: no tools, headers or pkg-config
    # files of the C install, no _install.py pointing at a libdir.
    strays = [n for n in names if not n.startswith("tide/") and ".dist-info/" not in n]
    assert not strays, strays
    assert "tide/_install.py" not in names, names
