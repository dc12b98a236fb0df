"""kraftd topics, logs and snapshots as PySpark data sources, and the Spark jobs over them.

    from ..pipeline import register
    register(spark)      # format("kraftd"), format("kraftd-log"), format("kraftd-snapshot")

Needs the `spark` extra (pyspark 4.2-4.3, pandas, pyarrow) and Java 17. The daemon never
imports this package.
"""
from __future__ import annotations

__all__ = ["register", "FORMATS"]

FORMATS = ("kraftd", "kraftd-log", "kraftd-snapshot")


def register(spark) -> None:
    """Register the three formats with a SparkSession."""
    from .files import KraftdLogDataSource, KraftdSnapshotDataSource
    from .sources import KraftdDataSource

    for source in (KraftdDataSource, KraftdLogDataSource, KraftdSnapshotDataSource):
        spark.dataSource.register(source)
