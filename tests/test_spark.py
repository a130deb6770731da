"""The jetstream PySpark data source on a local Spark (local[2], tasks retried up to 3 times)."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import jsclient
import jsclient.spark
from jsclient.server import NatsServer
from jsclient.spark import SparkOptions

from .conftest import server_release

pyspark_sql = pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")


def fill(js: jsclient.JetStream, stream: str, subjects: list[str], n: int, allow_direct: bool = True) -> None:
    js.add_stream(name=stream, subjects=[s.rsplit(".", 1)[0] + ".>" for s in subjects[:1]], allow_direct=allow_direct)
    for i in range(n):
        js.publish_async(subjects[i % len(subjects)], b"%d" % i, headers={"Row": str(i)} if i % 2 else None)
    js.publish_async_completed(timeout=60)


def test_batch_read_10k_four_partitions(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    fill(js, "EVENTS", ["ev.a", "ev.b"], 10_000)
    df = (
        spark.read.format("jetstream")
        .option("servers", server.url)
        .option("stream", "EVENTS")
        .option("minPartitions", 4)
        .option("batchSize", 1500)
        .load()
    )
    assert df.rdd.getNumPartitions() == 4
    assert [f.name for f in df.schema.fields] == ["subject", "data", "headers", "stream", "seq", "timestamp"]
    rows = df.collect()
    assert sorted(r.seq for r in rows) == list(range(1, 10_001))
    by_seq = {r.seq: r for r in rows}
    first, second = by_seq[1], by_seq[2]
    assert (first.subject, bytes(first.data), first.stream, first.headers) == ("ev.a", b"0", "EVENTS", None)
    assert (second.subject, bytes(second.data), second.headers) == ("ev.b", b"1", {"Row": ["1"]})
    assert isinstance(first.timestamp, dt.datetime)


def test_subject_filtered_range_read(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    fill(js, "RANGE", ["rg.x", "rg.y", "rg.z"], 300)
    df = (
        spark.read.format("jetstream")
        .option("servers", server.url)
        .option("stream", "RANGE")
        .option("subjects", "rg.y")
        .option("startingSequence", 50)
        .option("endingSequence", 149)
        .option("minPartitions", 3)
        .load()
    )
    seqs = sorted(r.seq for r in df.select("seq", "subject").collect())
    assert seqs == [s for s in range(50, 150) if (s - 1) % 3 == 1]
    two = (
        spark.read.format("jetstream")
        .option("servers", server.url)
        .option("stream", "RANGE")
        .option("subjects", "rg.x,rg.z")
        .option("endingSequence", 9)
        .load()
    )
    assert sorted(r.subject for r in two.collect()) == ["rg.x"] * 3 + ["rg.z"] * 3


def test_time_range_without_direct_get(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    """startingTime is a get by start_time (2.11+); a 2.10 server's refusal reaches the user through Spark's
    planning error, before any task runs, naming the feature."""
    js.add_stream(name="TIMED", subjects=["timed"])  # no allow_direct: the task's consumer reads it all the same
    for i in range(5):
        js.publish("timed", b"early%d" % i)
    time.sleep(0.2)
    cut = dt.datetime.now(dt.UTC)
    time.sleep(0.2)
    for i in range(5):
        js.publish("timed", b"late%d" % i)
    df = (
        spark.read.format("jetstream")
        .option("servers", server.url)
        .option("stream", "TIMED")
        .option("startingTime", cut.isoformat())
    )
    if server_release() < (2, 11):
        with pytest.raises(Exception, match=r"get by start_time needs nats-server 2\.11 or newer"):
            df.load().collect()
        return
    assert sorted(bytes(r.data) for r in df.load().collect()) == [b"late%d" % i for i in range(5)]


def test_streaming_micro_batches_and_restart(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    fill(js, "LIVE", ["live.x"], 100)
    seen: list[tuple[int, list[int]]] = []

    def collect(batch_df: Any, batch_id: int) -> None:
        seen.append((batch_id, sorted(r.seq for r in batch_df.select("seq").collect())))

    def run() -> None:
        stream_df = (
            spark.readStream.format("jetstream")
            .option("servers", server.url)
            .option("stream", "LIVE")
            .option("maxMessagesPerTrigger", 30)
            .load()
        )
        query = (
            stream_df.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)

    run()
    sizes = [len(seqs) for _, seqs in seen if seqs]
    assert sizes == [30, 30, 30, 10]
    assert [s for _, seqs in seen for s in seqs] == list(range(1, 101))
    seen.clear()
    for i in range(100, 120):
        js.publish("live.x", b"%d" % i)
    run()  # restarted from the checkpoint: only the new messages
    assert [s for _, seqs in seen for s in seqs] == list(range(101, 121))


def test_fail_on_data_loss(spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path) -> None:
    fill(js, "LOSS", ["loss.x"], 50)
    js.purge_stream("LOSS", seq=21)  # sequences 1..20 are gone

    def start(fail: str) -> Any:
        stream_df = (
            spark.readStream.format("jetstream")
            .option("servers", server.url)
            .option("stream", "LOSS")
            .option("startingOffsets", "1")
            .option("failOnDataLoss", fail)
            .load()
        )
        return (
            stream_df.writeStream.format("memory")
            .queryName(f"loss_{fail}")
            .option("checkpointLocation", str(tmp_path / fail))
            .trigger(availableNow=True)
            .start()
        )

    query = start("true")
    with pytest.raises(Exception, match=r"no longer holds sequences 1\.\.20"):
        query.awaitTermination(120)
    query = start("false")
    query.awaitTermination(120)
    assert sorted(r.seq for r in spark.sql("select seq from loss_false").collect()) == list(range(21, 51))


def test_kv_udf_one_connection_per_worker(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    from pyspark.sql.functions import udf

    kv = js.create_key_value("lookup")
    for i in range(10):
        kv.put(f"k{i}", b"value-%d" % i)
    opts = SparkOptions.parse({"servers": server.url})

    @udf("string")
    def enrich(key: str) -> str:
        import jsclient.spark.connections as cache

        value = jsclient.spark.kv_get(opts, "lookup", key)
        return f"{os.getpid()}|{cache.opened}|{value.decode() if value else ''}"

    df = spark.range(400, numPartitions=8).selectExpr("concat('k', cast(id % 12 as string)) as key")
    out = [r[0] for r in df.select(enrich("key")).collect()]
    opened: dict[str, set[str]] = defaultdict(set)
    values = []
    for text in out:
        pid, count, value = text.split("|")
        opened[pid].add(count)
        values.append(value)
    # Each worker opened no connection while it ran these 400 lookups but the one it keeps (the count before
    # depends on which tests the shared workers ran first).
    assert all(len(counts) == 1 for counts in opened.values()), opened
    assert values.count("") == sum(1 for i in range(400) if i % 12 >= 10)
    assert jsclient.spark.kv_get_many(opts, "lookup", ["k1", "nope", "k9", None]) == [
        b"value-1", None, b"value-9", None,
    ]


def test_options_are_checked(spark: Any, server: NatsServer) -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="unknown jetstream option 'strem'"):
        SparkOptions.parse({"strem": "X"})
    parsed = SparkOptions.parse({"startingsequence": "5", "MINPARTITIONS": "3", "stream": "S"})
    assert (parsed.starting_sequence, parsed.min_partitions) == (5, 3)
    with pytest.raises(jsclient.InvalidArgumentError, match="minpartitions"):
        SparkOptions.parse({"minpartitions": "zero"})
    with pytest.raises(Exception, match="unknown jetstream option"):
        spark.read.format("jetstream").option("servers", server.url).option("bogus", "1").load().collect()
