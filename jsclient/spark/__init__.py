"""PySpark integration: the ``jetstream`` data source and executor-side connections.

Install with the ``spark`` extra (pyspark >= 4, pyarrow).  Importing this
package does not import pyspark; :func:`register` does.
"""

from __future__ import annotations

from typing import Any

from .connections import connection
from .options import SparkOptions
from .udf import kv_get, kv_get_many

#: The Spark conf that lets Spark push filters to Python data sources (4.1+); :func:`register` turns it on
#: where the format pushes filters by default.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Add the ``jetstream`` format to a SparkSession (its reads and writes, batch and streaming).

    Imports pyspark (importing :mod:`jsclient.spark` does not).  On a Spark
    whose batch reads push filters by default (see
    :doc:`/guides/spark-pushdown`), turns on
    ``spark.sql.python.filterPushdown.enabled`` for the session unless the
    session sets it already.  Where it is off, the format's reads push
    nothing (Spark would fail a read that does), and a read with
    ``filterPushdown=true`` is refused.  Call it again after changing that
    setting.

    Args:
        spark: The ``pyspark.sql.SparkSession``, classic or Spark Connect.

    Raises:
        ModuleNotFoundError: pyspark is not installed (install the ``spark`` extra).
    """
    from .datasource import JetStreamDataSource, UnpushedJetStreamDataSource, pushes_by_default

    setting = spark.conf.get(PUSHDOWN_CONF, None)
    if setting is None and pushes_by_default():
        spark.conf.set(PUSHDOWN_CONF, "true")
        setting = "true"
    pushing = setting is not None and setting.strip().lower() == "true"
    spark.dataSource.register(JetStreamDataSource if pushing else UnpushedJetStreamDataSource)


__all__ = ["SparkOptions", "connection", "kv_get", "kv_get_many", "register"]
