"""A checkpointed streaming copy SRC -> DST, run as its own process so a test can SIGKILL it mid-write.

usage: python spark_stream_child.py SERVER_URL CHECKPOINT_DIR [ROW_DELAY_SECONDS [BUCKET]]

Reads stream SRC from the checkpoint's offsets (Trigger.AvailableNow: it
stops by itself once it has caught up), slows each row down a little in a
Python UDF so that a kill lands inside a micro-batch's write, and writes to
stream DST with the jetstream sink (or, given BUCKET, into that key-value
bucket: the key is the subject's last token, the value the data).  The test starts it in a new session and
kills the whole process group (this Python, the JVM and its Python workers).
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    url, checkpoint = sys.argv[1], sys.argv[2]
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0005
    bucket = sys.argv[4] if len(sys.argv) > 4 else None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    import jsclient.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jsclient-kill-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "300")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jsclient.spark.register(spark)

    @udf("binary")
    def slowly(data: bytes) -> bytes:
        import time

        time.sleep(delay)
        return data

    source = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "SRC")
        .option("maxMessagesPerTrigger", 3000)
        .option("minPartitions", 2)
        .load()
    )
    if bucket:
        out = source.selectExpr("substring_index(subject, '.', -1) as key", "data as value")
        out = out.withColumn("value", slowly("value"))
        target = ("bucket", bucket)
    else:
        out = source.selectExpr("replace(subject, 'src.', 'dst.') as subject", "data", "headers")
        out = out.withColumn("data", slowly("data"))
        target = ("stream", "DST")
    query = (
        out.writeStream.format("jetstream")
        .option("servers", url)
        .option(*target)
        .option("checkpointLocation", checkpoint)
        .queryName("copy")
        .trigger(availableNow=True)
        .start()
    )
    print("query started", query.id, flush=True)
    query.awaitTermination()
    print("query finished", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
