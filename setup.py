"""setup.py - the part of `pip install .` that pyproject.toml cannot say:
build libtide with meson (the library only: no tests, no tools) and put
libtide.so.0 inside the package, where tide/_lib.py looks first, so an
installed package needs no LD_LIBRARY_PATH, ldconfig or TIDE_LIBRARY.
The wheel is then platform-specific, which has_ext_modules says."""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SONAME = "libtide.so.0"


class BuildWithLibtide(build_py):
    def run(self):
        super().run()
        build = os.path.join(os.path.abspath(self.build_lib), "..", "meson-libtide")
        if not os.path.exists(os.path.join(build, "build.ninja")):
            subprocess.check_call(["meson", "setup", build, HERE, "--buildtype=release",
                                   "-Dtests=false"])
        subprocess.check_call(["meson", "compile", "-C", build, "tide:shared_library"])
        shutil.copy(os.path.join(build, SONAME), os.path.join(self.build_lib, "tide", SONAME))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


# Out of ./build, which is the C build's (README's quick start).
os.makedirs(os.path.join(HERE, "build-pip"), exist_ok=True)
setup(cmdclass={"build_py": BuildWithLibtide}, distclass=BinaryDistribution,
      options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}})
