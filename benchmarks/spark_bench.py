"""`make bench-spark`: the jetstream data source against single-process baselines.

Batch read of a 1,000,000-message stream with 1, 2 and 4 partitions (rows/s,
each read fully materialised by Spark's no-op sink), beside one process
replaying the same stream with an ordered consumer; and a DataFrame write
beside one process publishing with publish_async.  Measurements only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from jsclient.server import NatsServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=200_000)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import jsclient.spark

    results: list[tuple[str, float]] = []
    with NatsServer() as server, jsclient.connect(server.url) as nc:
        js = nc.jetstream(timeout=60)
        js.add_stream(name="SRC", subjects=["src.*"], storage="memory", allow_direct=True)
        print(f"filling SRC with {args.messages:,} messages ...", file=sys.stderr)
        for i in range(args.messages):
            js.publish_async(f"src.{i % 8}", b"x" * 100)
        js.publish_async_completed(timeout=600)

        start = time.perf_counter()
        osub = js.subscribe("src.*", ordered=True, pending_msgs_limit=4_000_000)
        for _ in range(args.messages):
            osub.next_msg(timeout=30)
        results.append(("ordered consumer, one process", args.messages / (time.perf_counter() - start)))
        osub.unsubscribe()

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        jsclient.spark.register(spark)
        reader = spark.read.format("jetstream").option("servers", server.url).option("stream", "SRC")
        reader.option("minPartitions", 1).load().write.format("noop").mode("overwrite").save()  # warm-up
        for parts in (1, 2, 4):
            df = reader.option("minPartitions", parts).load()
            start = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            results.append((f"spark batch read, {parts} partition(s)", args.messages / (time.perf_counter() - start)))

        js.add_stream(name="DST", subjects=["dst.*"], storage="memory", duplicate_window=600)
        rows = spark.range(args.writes, numPartitions=2).selectExpr(
            "concat('dst.', cast(id % 8 as string)) as subject", "cast(repeat('y', 100) as binary) as data"
        ).cache()
        rows.count()
        start = time.perf_counter()
        rows.write.format("jetstream").option("servers", server.url).mode("append").save()
        results.append(("spark write, 2 partitions", args.writes / (time.perf_counter() - start)))
        spark.stop()

        start = time.perf_counter()
        for i in range(args.writes):
            js.publish_async(f"dst.{i % 8}", b"y" * 100)
        js.publish_async_completed(timeout=600)
        results.append(("publish_async loop, one process", args.writes / (time.perf_counter() - start)))

    print(f"\njsclient spark benchmarks, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores")
    for name, rate in results:
        print(f"{name:<40}{rate:>14,.0f} rows/s")


if __name__ == "__main__":
    main()
