"""PySpark integration: the ``jetstream`` data source and executor-side connections.

Install with the ``spark`` extra (pyspark >= 4, pyarrow).  Importing this
package does not import pyspark; :func:`register` does.
"""

from __future__ import annotations

from typing import Any

from .connections import connection
from .options import SparkOptions
from .udf import kv_get, kv_get_many

#: The Spark conf that lets Spark push filters to Python data sources (4.1+); :func:`register` turns it on.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Add the ``jetstream`` format to a SparkSession (its reads and writes, batch and streaming).

    Imports pyspark (importing :mod:`jsclient.spark` does not).  Turns on
    ``spark.sql.python.filterPushdown.enabled`` for the session, so that a
    batch read's filters on ``subject``, ``seq`` and ``timestamp`` narrow what
    the server sends, unless the session sets it already: where it is false,
    the format's reads push nothing (Spark would fail a read that does).  Call
    it again after changing that setting.

    Args:
        spark: The ``pyspark.sql.SparkSession``, classic or Spark Connect.

    Raises:
        ModuleNotFoundError: pyspark is not installed (install the ``spark`` extra).
    """
    from .datasource import JetStreamDataSource, UnpushedJetStreamDataSource

    setting = spark.conf.get(PUSHDOWN_CONF, None)
    if setting is None:
        spark.conf.set(PUSHDOWN_CONF, "true")
    pushing = setting is None or setting.strip().lower() == "true"
    spark.dataSource.register(JetStreamDataSource if pushing else UnpushedJetStreamDataSource)


__all__ = ["SparkOptions", "connection", "kv_get", "kv_get_many", "register"]
