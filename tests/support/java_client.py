"""The Java Kafka client (3.9.1) for tests: its jars come from the PyPI wheel
shigawire-apache-flink-libraries (a dev dependency, `pyflink/lib/`); small drivers under
`tests/java/` are compiled with the machine's JDK into a per-session directory."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

JAVA_SOURCES = Path(__file__).resolve().parent.parent / "java"
JARS = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")


def kafka_jars() -> list[Path]:
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the Java client's jars are missing: `make install-dev` installs "
                    "shigawire-apache-flink-libraries")
    lib = Path(list(spec.submodule_search_locations)[0]) / "lib"
    return [lib / name for name in JARS]


def require_jdk() -> None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK on this machine (javac/java): the Java client tests need JDK 17")


def compile_driver(name: str, out_dir: Path) -> Path:
    """javac tests/java/<name>.java into out_dir; returns out_dir (the class path entry)."""
    require_jdk()
    out_dir.mkdir(parents=True, exist_ok=True)
    classpath = ":".join(str(j) for j in kafka_jars())
    done = subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(out_dir),
                           str(JAVA_SOURCES / f"{name}.java")], capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise AssertionError(f"javac {name}.java failed:\n{done.stdout}{done.stderr}")
    return out_dir


def java_command(main_class: str, classes: Path, *args: str) -> list[str]:
    classpath = ":".join([str(classes), *(str(j) for j in kafka_jars())])
    return ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath, main_class, *args]
