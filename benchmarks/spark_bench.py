"""`make bench-spark`: the jetstream data source against single-process baselines, in one run.

Baselines (one plain Python process, no Spark): replaying the stream with an
ordered consumer, and publishing with ``publish_async``.  Spark rows: a batch
read with 1 and 4 partitions (each read materialised by Spark's no-op sink),
a filtered batch read keeping 1 % of the stream's 100 subjects with its
filter pushed to the server and with filter pushdown off (4 partitions; its
rate counts the stream's messages, which the query covers, so that it
compares with the whole reads), a DataFrame write with 2 partitions into a
stream with atomic batches (exactly once by commit markers) and into one
without (message ids), a bucket of ``--keys`` keys read in 4 partitions
(against ``kv.keys()`` and a ``kv.get`` per key in one process) and written
in 2 partitions into a bucket with atomic batches (against a ``kv.put``
loop), and a checkpointed streaming read->write query.
Prints rows/s and the ratio of each Spark row to its baseline; ``--json
FILE`` also keeps every round's rate with the versions (jsclient, pyspark,
nats-server, Python, Java), the machine and the date, as ``make bench
--json`` does (``make bench-spark`` writes docs/_data/bench-spark.json,
which the docs draw their table and chart from); ``--from-json FILE``
prints an earlier file's table.  Measurements only; no assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import common, report
from benchmarks.report import SPARK_KV_PUT as KV_PUT
from benchmarks.report import SPARK_KV_READ as KV_READ
from benchmarks.report import SPARK_PUBLISH as PUBLISH
from benchmarks.report import SPARK_REPLAY as REPLAY
from jsclient.server import NatsServer

#: The filtered read's filter: one subject of the stream's 100.
ONE_PERCENT = "subject = 'src.7'"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=100_000, help="keys of the bucket read and written")
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=3, help="baselines and Spark rows take turns this many times")
    parser.add_argument("--json", default="", help="also write the results, every round's rate, to this file")
    parser.add_argument("--from-json", default="", help="print the table of an earlier --json file, measure nothing")
    args = parser.parse_args()
    if args.from_json:
        print_table(json.loads(Path(args.from_json).read_text()))
        return
    date = common.now()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import jsclient.spark

    payload = b"x" * args.size
    rates: dict[str, list[float]] = {}

    def timed(name: str, count: int, run: Callable[[], object]) -> None:
        start = time.perf_counter()
        run()
        rates.setdefault(name, []).append(count / (time.perf_counter() - start))

    with NatsServer() as server, jsclient.connect(server.url) as nc:
        js = nc.jetstream(timeout=60)
        js.add_stream(name="SRC", subjects=["src.*"], storage="memory", allow_direct=True)
        print(f"filling SRC with {args.messages:,} messages of {args.size} bytes ...", file=sys.stderr)
        for i in range(args.messages):
            js.publish_async(f"src.{i % 100}", payload)
        js.publish_async_completed(timeout=600)

        def replay() -> None:
            osub = js.subscribe("src.*", ordered=True, pending_msgs_limit=4_000_000)
            for _ in range(args.messages):
                osub.next_msg(timeout=30)
            osub.unsubscribe()

        def publish_loop() -> None:
            js.add_stream(name="PLAIN", subjects=["plain.*"], storage="memory")
            for i in range(args.writes):
                js.publish_async(f"plain.{i % 8}", payload)
            js.publish_async_completed(timeout=600)
            js.delete_stream("PLAIN")

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config(jsclient.spark.PUSHDOWN_CONF, "true")  # the pushed row; on Spark 4.1-4.3 with filterPushdown
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        jvm: Any = spark.sparkContext._jvm
        java = str(jvm.java.lang.System.getProperty("java.version"))
        jsclient.spark.register(spark)
        reader = spark.read.format("jetstream").option("servers", server.url).option("stream", "SRC")
        data = spark.range(args.writes, numPartitions=2).selectExpr(
            "concat('dst.', cast(id % 8 as string)) as subject", f"cast(repeat('y', {args.size}) as binary) as data"
        ).cache()
        data.count()

        def pushdown(on: bool) -> None:
            """Filter pushdown on or off for the session, and the format registered to match."""
            spark.conf.set(jsclient.spark.PUSHDOWN_CONF, "true" if on else "false")
            jsclient.spark.register(spark)

        def spark_write(stream: str, atomic: bool) -> Callable[[], None]:
            def run() -> None:
                js.add_stream(name=stream, subjects=["dst.*", f"_jsclient.commits.{stream}.>"], storage="memory",
                              allow_atomic=atomic, duplicate_window=600)
                data.write.format("jetstream").option("servers", server.url).option("stream", stream).mode(
                    "append"
                ).save()
            return run

        kv = js.create_key_value("TABLE", storage="memory")
        print(f"filling bucket TABLE with {args.keys:,} keys ...", file=sys.stderr)
        for i in range(args.keys):
            js.publish_async(f"$KV.TABLE.k{i}", payload)
        js.publish_async_completed(timeout=600)
        bucket = (spark.read.format("jetstream").option("servers", server.url).option("bucket", "TABLE")
                  .option("minPartitions", 4).load())
        rows = spark.range(args.keys, numPartitions=2).selectExpr(
            "concat('k', cast(id as string)) as key", f"cast(repeat('y', {args.size}) as binary) as value"
        ).cache()
        rows.count()

        def kv_read() -> None:
            for key in kv.keys():  # noqa: SIM118 - a bucket, not a dict
                kv.get(key)

        def empty_bucket(name: str, *, atomic: bool) -> None:
            js.create_key_value(name, storage="memory")
            config = js.stream_info(f"KV_{name}").config
            js.update_stream(config, allow_atomic=atomic,
                             subjects=[*config.subjects, f"_jsclient.commits.KV_{name}.>"])

        def kv_put_loop() -> None:
            empty_bucket("PUTS", atomic=False)
            out = js.key_value("PUTS")
            for i in range(args.keys):
                out.put(f"k{i}", payload)
            js.delete_key_value("PUTS")

        def spark_bucket_write() -> None:
            empty_bucket("WRITES", atomic=True)
            rows.write.format("jetstream").option("servers", server.url).option("bucket", "WRITES").mode(
                "append").save()
            js.delete_key_value("WRITES")

        # Warm-up: Python workers, imports and the JIT of both directions.
        reader.option("minPartitions", 1).load().write.format("noop").mode("overwrite").save()
        reader.option("filterPushdown", "true").load().where(ONE_PERCENT).write.format("noop").mode(
            "overwrite"
        ).save()  # the pushed filter's path
        spark_write("WARM", True)()
        js.delete_stream("WARM")
        bucket.write.format("noop").mode("overwrite").save()

        for _ in range(args.rounds):
            timed(REPLAY, args.messages, replay)
            for parts in (1, 4):
                df = reader.option("minPartitions", parts).load()
                timed(f"spark batch read, {parts} partition(s)", args.messages,
                      lambda df=df: df.write.format("noop").mode("overwrite").save())
            for pushed in (True, False):
                pushdown(pushed)
                df = reader.option("minPartitions", 4).option("filterPushdown", str(pushed).lower()).load().where(
                    ONE_PERCENT
                )
                timed(f"spark filtered read (1 % of the subjects), {'pushed' if pushed else 'unpushed'}",
                      args.messages, lambda df=df: df.write.format("noop").mode("overwrite").save())
            pushdown(True)
            timed(PUBLISH, args.writes, publish_loop)
            for name, atomic in (("atomic batches + markers", True), ("message ids", False)):
                stream = "DSTA" if atomic else "DSTM"
                timed(f"spark write, 2 partitions, {name}", args.writes, spark_write(stream, atomic))
                js.delete_stream(stream)
            timed(KV_READ, args.keys, kv_read)
            timed("spark bucket read, 4 partitions", args.keys, lambda: bucket.write.format("noop").mode(
                "overwrite").save())
            timed(KV_PUT, args.keys, kv_put_loop)
            timed("spark bucket write, 2 partitions, atomic batches + markers", args.keys, spark_bucket_write)

        js.add_stream(name="COPY", subjects=["copy.*", "_jsclient.commits.COPY.>"], storage="memory",
                      allow_atomic=True)
        with tempfile.TemporaryDirectory() as checkpoint:
            stream_df = (
                spark.readStream.format("jetstream").option("servers", server.url).option("stream", "SRC")
                .option("minPartitions", 2).option("maxMessagesPerTrigger", 200_000).load()
            )
            query = (
                stream_df.selectExpr("replace(subject, 'src.', 'copy.') as subject", "data")
                .writeStream.format("jetstream").option("servers", server.url).option("stream", "COPY")
                .option("checkpointLocation", checkpoint).trigger(availableNow=True)
            )
            timed("streaming read->write (checkpointed)", args.messages, lambda: query.start().awaitTermination())
        spark.stop()

    saved = {
        "benchmark": "spark",
        "date": date,
        "machine": common.machine(),
        "versions": common.versions(("pyspark",), {"python": platform.python_version(), "java": java}),
        "messages": args.messages,
        "writes": args.writes,
        "size": args.size,
        "rounds": args.rounds,
        "results": summary(rates),
    }
    print_table(saved)
    if args.json:
        Path(args.json).write_text(json.dumps(saved, indent=2) + "\n")


def summary(rates: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """What the JSON keeps of each row: the median rate and every round's, its baseline, the ratio to it (of the
    medians) and each round's ratio (the row's rate over its baseline's in the same round)."""
    out: dict[str, dict[str, Any]] = {}
    for name, values in rates.items():
        got: dict[str, Any] = {"rate": statistics.median(values), "rounds": values}
        base = report.spark_baseline(name)
        if base is not None:
            got["baseline"] = base
            got["ratio"] = got["rate"] / statistics.median(rates[base])
            got["ratio rounds"] = [v / b for v, b in zip(values, rates[base], strict=False)]
        out[name] = got
    return out


def print_table(saved: dict[str, Any]) -> None:
    print("\n".join(["", *report.spark_heading(saved), *report.render(*report.spark_cells(saved), rst=False)]))


if __name__ == "__main__":
    main()
