"""The Spark pipeline's tests share one local[2] SparkSession (session scope: a JVM start costs
~7 s). They skip, printing why, only when Java is missing."""
from __future__ import annotations

import os
import sys

import pytest

from tests.support.kraftd_process import KraftdProcess

from .helpers import create_topics


@pytest.fixture(scope="session")
def spark():
    from kraftd.pipeline.session import java_missing_reason, spark_session

    reason = java_missing_reason()
    if reason:
        print(f"\nSKIPPING the Spark pipeline tests: {reason}", file=sys.stderr)
        pytest.skip(reason)
    session = spark_session("local[2]", "kraftd-tests", progress=False,
                            conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One kraftd per module (fsync never: the tests measure nothing about durability)."""
    process = KraftdProcess(tmp_path_factory.mktemp("kraftd") / "data",
                            env={"KRAFTD_FSYNC_POLICY": "never"}).start()
    yield process
    process.kill()


@pytest.fixture
def topics(server):
    def make(specs: dict, configs: dict | None = None):
        create_topics(server.bootstrap, specs, configs)
    return make


os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
