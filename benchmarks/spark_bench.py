"""`make bench-spark`: the jetstream data source against single-process baselines, in one run.

Baselines (one plain Python process, no Spark): replaying the stream with an
ordered consumer, and publishing with ``publish_async``.  Spark rows: a batch
read with 1 and 4 partitions (each read materialised by Spark's no-op sink),
a DataFrame write with 2 partitions into a stream with atomic batches
(exactly once by commit markers) and into one without (message ids), and a
checkpointed streaming read->write query.  Prints rows/s and the ratio of
each Spark row to its baseline.  Measurements only; no assertion.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from jsclient.server import NatsServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=400_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import jsclient.spark

    rows: list[tuple[str, float, str, float | None]] = []  # name, rows/s, baseline name, ratio
    payload = b"x" * args.size
    with NatsServer() as server, jsclient.connect(server.url) as nc:
        js = nc.jetstream(timeout=60)
        js.add_stream(name="SRC", subjects=["src.*"], storage="memory", allow_direct=True)
        print(f"filling SRC with {args.messages:,} messages of {args.size} bytes ...", file=sys.stderr)
        for i in range(args.messages):
            js.publish_async(f"src.{i % 8}", payload)
        js.publish_async_completed(timeout=600)

        start = time.perf_counter()
        osub = js.subscribe("src.*", ordered=True, pending_msgs_limit=4_000_000)
        for _ in range(args.messages):
            osub.next_msg(timeout=30)
        replay = args.messages / (time.perf_counter() - start)
        osub.unsubscribe()
        rows.append(("ordered consumer replay, one process", replay, "", None))

        js.add_stream(name="PLAIN", subjects=["plain.*"], storage="memory")
        start = time.perf_counter()
        for i in range(args.writes):
            js.publish_async(f"plain.{i % 8}", payload)
        js.publish_async_completed(timeout=600)
        pub = args.writes / (time.perf_counter() - start)
        rows.append(("publish_async loop, one process", pub, "", None))
        js.delete_stream("PLAIN")

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
        for parts in (1, 4):
            df = reader.option("minPartitions", parts).load()
            start = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            rate = args.messages / (time.perf_counter() - start)
            rows.append((f"spark batch read, {parts} partition(s)", rate, "replay", rate / replay))

        data = spark.range(args.writes, numPartitions=2).selectExpr(
            "concat('dst.', cast(id % 8 as string)) as subject", f"cast(repeat('y', {args.size}) as binary) as data"
        ).cache()
        data.count()
        for name, atomic in (("atomic batches + markers", True), ("message ids", False)):
            stream = "DSTA" if atomic else "DSTM"
            js.add_stream(name=stream, subjects=["dst.*", f"_jsclient.commits.{stream}.>"], storage="memory",
                          allow_atomic=atomic, duplicate_window=600)
            start = time.perf_counter()
            data.write.format("jetstream").option("servers", server.url).option("stream", stream).mode(
                "append"
            ).save()
            rate = args.writes / (time.perf_counter() - start)
            rows.append((f"spark write, 2 partitions, {name}", rate, "publish_async", rate / pub))
            js.delete_stream(stream)

        js.add_stream(name="COPY", subjects=["copy.*", "_jsclient.commits.COPY.>"], storage="memory",
                      allow_atomic=True)
        with tempfile.TemporaryDirectory() as checkpoint:
            stream_df = (
                spark.readStream.format("jetstream").option("servers", server.url).option("stream", "SRC")
                .option("minPartitions", 2).option("maxMessagesPerTrigger", 200_000).load()
            )
            start = time.perf_counter()
            query = (
                stream_df.selectExpr("replace(subject, 'src.', 'copy.') as subject", "data")
                .writeStream.format("jetstream").option("servers", server.url).option("stream", "COPY")
                .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
            )
            query.awaitTermination()
            rate = args.messages / (time.perf_counter() - start)
        assert js.stream_info("COPY").state.num_subjects >= 8
        rows.append(("streaming read->write (checkpointed)", rate, "replay", rate / replay))
        spark.stop()

    print(f"\njsclient spark benchmarks, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
          f"{args.messages:,} messages read, {args.writes:,} written, {args.size} B payloads")
    print(f"{'row':<44}{'rows/s':>12}   ratio")
    for name, rate, base, ratio in rows:
        tail = f"   {ratio:.2f}x {base}" if ratio is not None else ""
        print(f"{name:<44}{rate:>12,.0f}{tail}")


if __name__ == "__main__":
    main()
