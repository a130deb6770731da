"""`make bench-spark`: the jetstream data source against single-process baselines, in one run.

Baselines (one plain Python process, no Spark): reading the stream with the
:class:`~jsclient.jetstream.bulk.BulkReader` the Spark tasks read with
(pulls from a consumer of its own, the messages left as the reader cuts
them), replaying it with an ordered consumer (kept for reference), and
publishing with ``publish_async`` three ways: plain, with a message id per
message (the guarantee of the sink's ``msgid`` mode), and as atomic
``publish_batch`` calls of 1,000 (the guarantee of its atomic mode).
Spark rows: a batch read with 1 and 4 partitions (each read materialised by
Spark's no-op sink), a filtered batch read keeping 1 % of the stream's 100
subjects with its filter pushed to the server and with filter pushdown off
(4 partitions; its rate counts the stream's messages, which the query
covers, so that it compares with the whole reads), a DataFrame write with 2
partitions into a stream with atomic batches (exactly once by commit
markers; against the atomic loop) and into one without (message ids;
against the message-id loop), each also against the plain loop, a bucket of
``--keys`` keys read in 4 partitions (against ``kv.keys()`` and a
``kv.get`` per key in one process) and written in 2 partitions into a
bucket with atomic batches (against a ``kv.put`` loop), and a checkpointed
streaming read->write query (2 partitions, 200,000 rows per trigger,
AvailableNow) against the Spark bound: the same query over rows made in
memory into a sink that drops them (:mod:`benchmarks.spark_bound`).

Every row's CPU is measured over its timed part from ``/proc``, in two
parts: nats-server's, and everything else this process started (itself,
Spark's JVM and its Python workers: the CPU of every live process of the
tree, with what its ended children left in its ``cutime``/``cstime``), per
row.  Of the first part, the JVM's JIT compiler threads' share is kept
apart too: it moves between rounds by more than the rows' differences.
Prints rows/s, the ratio of each Spark row to its baseline and both
CPU figures; ``--json FILE`` also keeps every round's figures with the
versions (jsclient, pyspark, nats-server, Python, Java), the machine and
the date, as ``make bench --json`` does (``make bench-spark`` writes
docs/_data/bench-spark.json, which the docs draw their table and chart
from); ``--from-json FILE`` prints an earlier file's table.  Measurements
only; no assertion.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import common, report, spark_bound
from benchmarks.report import SPARK_BOUND as BOUND
from benchmarks.report import SPARK_BULK as BULK
from benchmarks.report import SPARK_KV_PUT as KV_PUT
from benchmarks.report import SPARK_KV_READ as KV_READ
from benchmarks.report import SPARK_PUBLISH as PUBLISH
from benchmarks.report import SPARK_PUBLISH_ATOMIC as PUBLISH_ATOMIC
from benchmarks.report import SPARK_PUBLISH_MSGID as PUBLISH_MSGID
from benchmarks.report import SPARK_REPLAY as REPLAY
from benchmarks.report import SPARK_STREAM as STREAM
from jsclient.server import NatsServer

#: The filtered read's filter: one subject of the stream's 100.
ONE_PERCENT = "subject = 'src.7'"
#: Messages per publish_batch call of the atomic loop: the server's limit.
ATOMIC_BATCH = 1000
#: The streaming rows' query shape: partitions, and rows per trigger.
STREAM_PARTS, PER_TRIGGER = 2, 200_000
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """A process's parent and its CPU seconds (user + sys, with what its ended children left it); None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / TICKS


#: Thread names (as /proc shows them, cut to 15 characters) of the JVM's JIT compilers.
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def _jit_threads(pid: int) -> dict[int, float]:
    """CPU seconds so far of each JIT compiler thread of process ``pid``, by thread id (none for other programs)."""
    out: dict[int, float] = {}
    try:
        tasks = list(os.scandir(f"/proc/{pid}/task"))
    except OSError:
        return out
    for task in tasks:
        try:
            text = Path(task.path, "stat").read_text()
        except OSError:
            continue
        if text[text.find("(") + 1 : text.rfind(")")] in JIT_THREADS:
            fields = text[text.rfind(")") + 2 :].split()
            out[int(task.name)] = (int(fields[11]) + int(fields[12])) / TICKS
    return out


@dataclass(frozen=True)
class Reading:
    """CPU seconds so far: of this process's tree less nats-server's subtree (``tree``), of nats-server, and of
    each JIT compiler thread of the tree (``jit``, by thread id)."""

    tree: float
    server: float
    jit: dict[int, float]

    def jit_since(self, before: Reading) -> float:
        """The compiler threads' CPU seconds since ``before``; a thread that ended between the two is missed,
        so this is at least what they took."""
        return sum(seconds - before.jit.get(tid, 0.0) for tid, seconds in self.jit.items())


def cpu_split(server_pid: int) -> Reading:
    """CPU so far of this process's tree, split as :class:`Reading` says.

    Every live process of the tree counts with its ended and reaped
    children (``cutime``/``cstime``), so a Python worker that exits between
    two readings still counts, in its parent.
    """
    stats = {int(e.name): got for e in os.scandir("/proc") if e.name.isdigit() and (got := _stat(int(e.name)))}
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    tree = 0.0
    jit: dict[int, float] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        if pid == server_pid or pid not in stats:
            continue
        tree += stats[pid][1]
        jit.update(_jit_threads(pid))
        todo.extend(children.get(pid, ()))
    server = stats.get(server_pid)
    return Reading(tree, server[1] if server else 0.0, jit)


@dataclass(frozen=True)
class Round:
    """One timed run of a row: rows per second, and CPU microseconds per row outside nats-server and in it, and
    the JIT compilers' part of the first."""

    rate: float
    cpu_us: float
    server_us: float
    jit_us: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=100_000, help="keys of the bucket read and written")
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=3, help="baselines and Spark rows take turns this many times")
    parser.add_argument("--json", default="", help="also write the results, every round's figures, to this file")
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
    from jsclient.jetstream.api import ConsumerConfig, Duration
    from jsclient.jetstream.bulk import BulkReader
    from jsclient.spark.source import BULK_BYTES, CONSUMER_IDLE

    payload = b"x" * args.size
    rounds: dict[str, list[Round]] = {}

    with NatsServer() as server, jsclient.connect(server.url) as nc:
        assert server.proc is not None
        server_pid = server.proc.pid

        def timed(name: str, count: int, run: Callable[[], object]) -> None:
            before = cpu_split(server_pid)
            start = time.perf_counter()
            run()
            wall = time.perf_counter() - start
            after = cpu_split(server_pid)
            per_row = 1e6 / count
            rounds.setdefault(name, []).append(Round(
                count / wall, (after.tree - before.tree) * per_row, (after.server - before.server) * per_row,
                after.jit_since(before) * per_row,
            ))

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

        bulk = BulkReader(nc.options)

        def bulk_read() -> None:
            """What one Spark task does to read (a consumer of its own, pulled in bulk), for the whole stream."""
            name = "BULK"
            js.add_consumer("SRC", ConsumerConfig(
                name=name, deliver_policy="all", ack_policy="none", mem_storage=True, num_replicas=1,
                inactive_threshold=Duration(CONSUMER_IDLE),
            ))
            got = 0
            for lines, _, _ in bulk.pull("SRC", name, args.messages, batch=min(100_000, args.messages),
                                         max_bytes=BULK_BYTES, timeout=60):
                got += len(lines)
            js.delete_consumer("SRC", name)
            assert got >= args.messages, got

        def publish_loop(msg_ids: bool) -> Callable[[], None]:
            def run() -> None:
                js.add_stream(name="PLAIN", subjects=["plain.*"], storage="memory", duplicate_window=600)
                if msg_ids:
                    for i in range(args.writes):
                        js.publish_async(f"plain.{i % 8}", payload, msg_id=str(i))
                else:
                    for i in range(args.writes):
                        js.publish_async(f"plain.{i % 8}", payload)
                js.publish_async_completed(timeout=600)
                js.delete_stream("PLAIN")
            return run

        def atomic_loop() -> None:
            js.add_stream(name="PLAIN", subjects=["plain.*"], storage="memory", allow_atomic=True)
            for lo in range(0, args.writes, ATOMIC_BATCH):
                js.publish_batch([(f"plain.{i % 8}", payload) for i in range(lo, min(args.writes, lo + ATOMIC_BATCH))])
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
        spark_bound.register(spark)
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

        def streaming(jetstream: bool, rows: int) -> Callable[[], None]:
            """The checkpointed read->write query over the last ``rows`` of SRC into COPY (``jetstream``), or over
            ``rows`` made in memory into a sink that drops them (the bound)."""
            def run() -> None:
                if jetstream:
                    source = spark.readStream.format("jetstream").option("servers", server.url).option(
                        "stream", "SRC").option("startingOffsets", str(args.messages - rows + 1))
                    js.add_stream(name="COPY", subjects=["copy.*", "_jsclient.commits.COPY.>"], storage="memory",
                                  allow_atomic=True)
                else:
                    source = spark.readStream.format(spark_bound.NAME).option("rows", rows)
                stream_df = source.option("minPartitions", STREAM_PARTS).option(
                    "maxMessagesPerTrigger", PER_TRIGGER).load()
                writer = stream_df.selectExpr("replace(subject, 'src.', 'copy.') as subject", "data").writeStream
                if jetstream:
                    writer = writer.format("jetstream").option("servers", server.url).option("stream", "COPY")
                else:
                    writer = writer.format(spark_bound.NAME)
                with tempfile.TemporaryDirectory() as checkpoint:
                    writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start(
                    ).awaitTermination()
                if jetstream:
                    js.delete_stream("COPY")
            return run

        # Warm-up: Python workers, imports and the JIT of both directions.
        reader.option("minPartitions", 1).load().write.format("noop").mode("overwrite").save()
        reader.option("filterPushdown", "true").load().where(ONE_PERCENT).write.format("noop").mode(
            "overwrite"
        ).save()  # the pushed filter's path
        spark_write("WARM", True)()
        js.delete_stream("WARM")
        bucket.write.format("noop").mode("overwrite").save()
        for jetstream in (False, True):  # one trigger of each streaming query
            streaming(jetstream, min(PER_TRIGGER, args.messages))()

        for _ in range(args.rounds):
            timed(BULK, args.messages, bulk_read)
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
            timed(PUBLISH, args.writes, publish_loop(msg_ids=False))
            timed(PUBLISH_MSGID, args.writes, publish_loop(msg_ids=True))
            timed(PUBLISH_ATOMIC, args.writes, atomic_loop)
            for name, atomic in (("atomic batches + markers", True), ("message ids", False)):
                stream = "DSTA" if atomic else "DSTM"
                timed(f"spark write, 2 partitions, {name}", args.writes, spark_write(stream, atomic))
                js.delete_stream(stream)
            timed(KV_READ, args.keys, kv_read)
            timed("spark bucket read, 4 partitions", args.keys, lambda: bucket.write.format("noop").mode(
                "overwrite").save())
            timed(KV_PUT, args.keys, kv_put_loop)
            timed("spark bucket write, 2 partitions, atomic batches + markers", args.keys, spark_bucket_write)
            timed(BOUND, args.messages, streaming(False, args.messages))
            timed(STREAM, args.messages, streaming(True, args.messages))
        bulk.close()
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
        "results": summary(rounds),
    }
    print_table(saved)
    if args.json:
        Path(args.json).write_text(json.dumps(saved, indent=2) + "\n")


def summary(rounds: dict[str, list[Round]]) -> dict[str, dict[str, Any]]:
    """What the JSON keeps of each row: the median rate, CPU per row outside nats-server and in it, and every
    round's; its baseline, the ratio to it (of the medians) and each round's ratio (the row's rate over its
    baseline's in the same round); a write's ratio to the plain loop; the streaming row's CPU (outside the
    server) over the bound's, of the medians and in each round, and in each round without the JIT compilers'."""

    def median(name: str, field: str) -> float:
        return float(statistics.median(getattr(r, field) for r in rounds[name]))

    def per_round(name: str, base: str, field: str) -> list[float]:
        return [getattr(r, field) / getattr(b, field) for r, b in zip(rounds[name], rounds[base], strict=False)]

    out: dict[str, dict[str, Any]] = {}
    for name, got in rounds.items():
        row: dict[str, Any] = {
            "rate": median(name, "rate"), "rounds": [r.rate for r in got],
            "cpu_us": median(name, "cpu_us"), "cpu_us rounds": [r.cpu_us for r in got],
            "server_us": median(name, "server_us"), "server_us rounds": [r.server_us for r in got],
            "jit_us": median(name, "jit_us"), "jit_us rounds": [r.jit_us for r in got],
        }
        base = report.spark_baseline(name)
        if base is not None and base in rounds:
            row["baseline"] = base
            row["ratio"] = row["rate"] / median(base, "rate")
            row["ratio rounds"] = per_round(name, base, "rate")
        plain = report.spark_plain(name)
        if plain is not None and plain in rounds:
            row["plain"] = plain
            row["plain ratio"] = row["rate"] / median(plain, "rate")
        if name == STREAM and BOUND in rounds:
            row["cpu ratio"] = row["cpu_us"] / median(BOUND, "cpu_us")
            row["cpu ratio rounds"] = per_round(name, BOUND, "cpu_us")
            less_jit = [(r.cpu_us - r.jit_us) / (b.cpu_us - b.jit_us) for r, b in zip(got, rounds[BOUND], strict=False)
                        if b.cpu_us > b.jit_us]
            if less_jit:
                row["cpu ratio less JIT rounds"] = less_jit
        out[name] = row
    return out


def print_table(saved: dict[str, Any]) -> None:
    print("\n".join(["", *report.spark_heading(saved), *report.render(*report.spark_cells(saved), rst=False),
                     "", *report.spark_notes(saved)]))


if __name__ == "__main__":
    main()
