"""Package discovery for kraftd; everything else is in pyproject.toml.

pyproject.toml's [tool.setuptools] package-dir installs the top-level folders as kraftd.*
(protocol/ as kraftd.protocol, ...). setuptools cannot discover subpackages under such a
mapping by itself, so this lists every folder holding Python files under each mapped one:
a new subpackage ships without anyone editing a list (tests/test_packaging.py checks the
wheel against the tree).
"""
import os
import tomllib

from Cython.Build import cythonize
from setuptools import Extension, setup


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

setup(packages=mapped_packages(_package_dir), ext_modules=_extensions)
