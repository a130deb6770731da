"""PySpark integration: the ``jetstream`` data source and executor-side connections.

Install with the ``spark`` extra (pyspark >= 4, pyarrow).  Importing this
package does not import pyspark; :func:`register` does.
"""

from __future__ import annotations

from typing import Any

from .connections import connection
from .options import SparkOptions
from .udf import kv_get, kv_get_many


def register(spark: Any) -> None:
    """Add the ``jetstream`` format to a SparkSession (its reads and writes, batch and streaming).

    Imports pyspark (importing :mod:`jsclient.spark` does not).

    Args:
        spark: The ``pyspark.sql.SparkSession``, classic or Spark Connect.

    Raises:
        ModuleNotFoundError: pyspark is not installed (install the ``spark`` extra).
    """
    from .source import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)


__all__ = ["SparkOptions", "connection", "kv_get", "kv_get_many", "register"]
