"""The jetstream data source under Spark Connect: a local Connect server, the same calls a user makes.

usage: python spark_connect_child.py NATS_URL

Prints one JSON object: each step's result, or FAILED with the error.  Run as
its own process: a SparkSession is one per process, and the test suite holds
a classic local one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any


def main() -> None:
    url = sys.argv[1]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    import jsclient
    import jsclient.spark
    from jsclient.spark import SparkOptions

    results: dict[str, Any] = {}

    def attempt(name: str, step: Callable[[], Any]) -> None:
        try:
            results[name] = step()
        except Exception as exc:  # noqa: BLE001 - reported to the test
            results[name] = f"FAILED: {type(exc).__name__}: {str(exc)[:500]}"

    spark = SparkSession.builder.remote("local[2]").config("spark.driver.host", "127.0.0.1").getOrCreate()
    results["session"] = type(spark).__module__
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        attempt("register", lambda: jsclient.spark.register(spark) or "ok")
        df = (
            spark.read.format("jetstream").option("servers", url).option("stream", "CLICKS")
            .option("minPartitions", 2).load()
        )
        attempt("batch read", lambda: df.count())
        attempt("aggregation", lambda: {r.subject: r["count"] for r in df.groupBy("subject").count().collect()})

        def write() -> Any:
            df.groupBy("subject").count().selectExpr(
                "replace(subject, 'clicks', 'counts') as subject", "cast(cast(count as string) as binary) as data"
            ).write.format("jetstream").option("servers", url).option("stream", "COUNTS").mode("append").save()
            return js.stream_info("COUNTS", subjects_filter="counts.*").state.subjects

        attempt("batch write", write)

        def stream() -> Any:
            query = (
                spark.readStream.format("jetstream").option("servers", url).option("stream", "CLICKS").load()
                .selectExpr("replace(subject, 'clicks', 'copy') as subject", "data")
                .writeStream.format("jetstream").option("servers", url).option("stream", "COPY")
                .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start()
            )
            query.awaitTermination()
            return sum((js.stream_info("COPY", subjects_filter="copy.*").state.subjects or {}).values())

        attempt("streaming read->write", stream)
        opts = SparkOptions.parse({"servers": url})

        @udf("string")
        def look(subject: str) -> str | None:
            value = jsclient.spark.kv_get(opts, "names", subject)
            return value.decode() if value else None

        attempt("kv_get udf", lambda: sorted(str(r[0]) for r in df.select(look("subject")).distinct().collect()))
    spark.stop()
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
