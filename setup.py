"""Package discovery for kraftd; everything else is in pyproject.toml.

pyproject.toml's [tool.setuptools] package-dir installs the top-level folders as kraftd.*
(protocol/ as kraftd.protocol, ...). setuptools cannot discover subpackages under such a
mapping by itself, so this lists every folder holding Python files under each mapped one:
a new subpackage ships without anyone editing a list (tests/test_packaging.py checks the
wheel against the tree).
"""
import os
import subprocess
import sys
import tomllib

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py


HERE = os.path.dirname(os.path.abspath(__file__))


def mapped_packages(package_dir: dict[str, str]) -> list[str]:
    """kraftd.quorum, kraftd.quorum.raft, ...: each mapped folder and every folder under it
    that holds a .py file (an __init__.py or not)."""
    packages = []
    for package, folder in package_dir.items():
        top = os.path.join(HERE, folder)
        for path, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d.isidentifier() and d != "__pycache__")
            if path == top or any(f.endswith(".py") for f in files):
                rel = os.path.relpath(path, top)
                packages.append(package if rel == "." else package + "." + rel.replace(os.sep, "."))
    return packages


with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
    _package_dir = tomllib.load(f)["tool"]["setuptools"]["package-dir"]

# The produce path's per-record walk in C (protocol/_record_walk.pyx). optional=True: without a C
# compiler the install still succeeds and protocol/records.py walks records in Python (the same
# checks; tests/protocol/test_record_walk_differential.py keeps the two equal).
_extensions = cythonize(
    [Extension("kraftd.protocol._record_walk", ["protocol/_record_walk.pyx"], optional=True)],
    language_level=3, quiet=True)


class BuildPyWithCodecCache(build_py):
    """Also compile the protocol codecs into kraftd/protocol/_codecs.cache (protocol/code_cache.py),
    so a server never compiles one on its event loop. Run on the built tree, in a child Python
    (the build's own, so the bytecode matches). Optional like the C walk: without the cache a
    codec is compiled on first use, as before."""

    def run(self):
        super().run()
        if self.editable_mode:
            return  # `make` writes the cache into the checkout (protocol/_codecs.cache)
        target = os.path.abspath(os.path.join(self.build_lib, "kraftd", "protocol", "_codecs.cache"))
        env = dict(os.environ, PYTHONPATH=os.path.abspath(self.build_lib))
        try:
            subprocess.run([sys.executable, "-m", "kraftd.protocol.build_code_cache", target], check=True,
                           env=env, cwd=os.path.abspath(self.build_lib), stdout=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"warning: no codec cache ({e}); codecs compile on first use", file=sys.stderr)


setup(packages=mapped_packages(_package_dir), ext_modules=_extensions,
      cmdclass={"build_py": BuildPyWithCodecCache})
