"""A SparkSession for the jobs and tests, with this interpreter as the worker Python."""
from __future__ import annotations

import os
import shutil
import sys

__all__ = ["java_missing_reason", "spark_session"]


def java_missing_reason() -> str | None:
    """Why Spark cannot start here (no Java), or None."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return None
    if shutil.which("java") is None:
        return "Java is not installed (Spark needs Java 17): apt-get install openjdk-17-jre-headless"
    return None


def spark_session(master: str = "local[*]", app: str = "kraftd-pipeline", *, progress: bool = True,
                  conf: dict | None = None):
    """Each job sets its own worker Python (the interpreter running it), so users need not export
    PYSPARK_PYTHON; the three formats are registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from . import register

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "true" if progress else "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
