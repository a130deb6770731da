"""A job on a Spark standalone cluster: read, aggregate, write and a kv_get UDF, through spark://.

usage: python spark_cluster_child.py SPARK_MASTER_URL NATS_URL

Prints one JSON line with what the test checks.  Run as its own process: a
SparkSession is one per process, and the test suite already holds a local one.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    master, url = sys.argv[1], sys.argv[2]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    import jsclient.spark
    from jsclient.spark import SparkOptions

    spark = (
        SparkSession.builder.master(master)
        .appName("jsclient-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.cores", "1")
        .config("spark.executor.memory", "512m")
        .config("spark.cores.max", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jsclient.spark.register(spark)
    opts = SparkOptions.parse({"servers": url})

    reader = spark.read.format("jetstream").option("servers", url).option("stream", "CLICKS")
    df = reader.option("minPartitions", 4).load()
    counts = {r.subject: r["count"] for r in df.groupBy("subject").count().collect()}
    (
        df.groupBy("subject")
        .count()
        .selectExpr("replace(subject, 'clicks', 'totals') as subject", "cast(cast(count as string) as binary) as data")
        .write.format("jetstream")
        .option("servers", url)
        .option("stream", "TOTALS")
        .mode("append")
        .save()
    )

    @udf("string")
    def region(subject: str) -> str:
        value = jsclient.spark.kv_get(opts, "regions", subject.rsplit(".", 1)[1])
        return f"{os.getpid()}:{value.decode() if value else '-'}"

    tagged = [r[0] for r in df.select(region("subject")).collect()]
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # less the driver
    print(
        json.dumps(
            {
                "rows": df.count(),
                "counts": counts,
                "regions": sorted({t.split(":", 1)[1] for t in tagged}),
                "udf_pids": sorted({int(t.split(":", 1)[0]) for t in tagged}),
                "driver_pid": os.getpid(),
                "executors": executors,
            }
        ),
        flush=True,
    )
    spark.stop()


if __name__ == "__main__":
    main()
