"""Key-value buckets as Spark tables, on real Spark and a real nats-server, the way pipelines use them.

A bucket of 100,000 keys is read in four partitions and compared with the
plain client's view; a bucket is read as of a past revision; a batch write
whose task fails after it has provably written is retried after the
bucket's duplicate window; a checkpointed streaming write into a bucket is
SIGKILLed mid-write and restarted; a streaming read of changes goes through
puts, deletes and purges.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import jsclient
import jsclient.spark
from jsclient.server import NatsServer

from .conftest import server_release

pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")

from .test_spark_sink import _fail_once_after_stored, _write_8000, kill_mid_writes

HERE = Path(__file__).parent


def bucket_read(spark: Any, url: str, bucket: str, **options: Any) -> Any:
    reader = spark.read.format("jetstream").option("servers", url).option("bucket", bucket)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def history(js: jsclient.JetStream, bucket: str) -> dict[str, list[tuple[bytes, str]]]:
    """Every entry the bucket's stream holds, per key, in revision order: (value, operation)."""
    kv = js.key_value(bucket)
    subjects = js.stream_info(f"KV_{bucket}", subjects_filter=f"$KV.{bucket}.>").state.subjects or {}
    return {s.split(".", 2)[2]: [(e.value, e.operation) for e in kv.history(s.split(".", 2)[2])] for s in subjects}


def atomic_bucket(js: jsclient.JetStream, bucket: str, *, window: float = 1.0, history: int = 64) -> None:
    """A bucket whose stream takes atomic batches and the sink's commit markers, with a short dedupe window."""
    js.create_key_value(bucket, history=history)
    config = js.stream_info(f"KV_{bucket}").config
    js.update_stream(
        config, allow_atomic=True, duplicate_window=window,
        subjects=[*config.subjects, f"_jsclient.commits.KV_{bucket}.>"],
    )


# -- batch read -------------------------------------------------------------------------------------------


def test_a_bucket_of_100k_keys_read_in_four_partitions_equals_the_clients_view(
    spark: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    kv = js.create_key_value("BIG", history=2)
    for i in range(100_000):
        js.publish_async(f"$KV.BIG.k{i:06d}", b"v%d" % i)
    js.publish_async_completed(timeout=120)
    for i in range(0, 100_000, 997):
        kv.put(f"k{i:06d}", b"again-%d" % i)  # a second revision
    for i in range(5, 100_000, 4999):
        kv.delete(f"k{i:06d}")
    kv.purge("k000007")
    df = bucket_read(spark, server.url, "BIG", minPartitions=4)
    assert df.rdd.getNumPartitions() == 4
    assert [f.name for f in df.schema.fields] == ["key", "value", "revision", "created", "operation"]
    rows = {r.key: r for r in df.collect()}
    keys = kv.keys()
    assert sorted(rows) == sorted(keys)
    assert len(keys) == 100_000 - len(range(5, 100_000, 4999)) - 1
    for key in keys:
        entry = kv.get(key)
        row = rows[key]
        assert (bytes(row.value), row.revision, row.operation) == (entry.value, entry.revision, "PUT"), key
        assert abs(row.created.timestamp() - entry.created.timestamp()) < 0.001

    with_deletes = {r.key: r.operation for r in bucket_read(spark, server.url, "BIG", includeDeletes=True)
                    .select("key", "operation").collect()}
    assert {k for k, op in with_deletes.items() if op == "DEL"} == {f"k{i:06d}" for i in range(5, 100_000, 4999)}
    assert {k for k, op in with_deletes.items() if op == "PURGE"} == {"k000007"}


def test_keys_filters_read_only_those_keys(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    kv = js.create_key_value("FILTERED")
    for key in ("eu.fr.paris", "eu.de.berlin", "us.ny", "us.ca", "asia"):
        kv.put(key, key.encode())
    got = sorted(r.key for r in bucket_read(spark, server.url, "FILTERED", keys="eu.>,us.ny").collect())
    assert got == ["eu.de.berlin", "eu.fr.paris", "us.ny"]
    assert bucket_read(spark, server.url, "FILTERED", keys="nowhere.*").collect() == []


def test_as_of_revision_is_the_bucket_as_it_was(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    kv = js.create_key_value("ASOF", history=64)
    state: dict[str, bytes] = {}
    snapshots: dict[int, dict[str, bytes]] = {}
    for step in range(600):
        key = f"k{step % 37}"
        if step % 11 == 5 and key in state:
            revision = kv.delete(key)
            del state[key]
        else:
            revision = kv.put(key, b"%d" % step)
            state[key] = b"%d" % step
        snapshots[revision] = dict(state)
    if server_release() < (2, 11):  # no multi-subject gets: refused, through Spark's planning error
        with pytest.raises(Exception, match=r"multi-subject direct get needs nats-server 2\.11 or newer"):
            bucket_read(spark, server.url, "ASOF", asOfRevision=100).collect()
        return
    for revision in (1, 100, 333, 599, max(snapshots)):
        df = bucket_read(spark, server.url, "ASOF", asOfRevision=revision, minPartitions=3)
        got = {r.key: bytes(r.value) for r in df.collect()}
        assert got == snapshots[revision], revision
        assert all(r.revision <= revision for r in df.collect())


# -- batch write ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("atomic", [False, pytest.param(True, marks=pytest.mark.needs_server("2.12"))],
                         ids=["message-ids", "atomic"])
def test_a_batch_write_applies_puts_deletes_and_purges_in_order(
    spark: Any, server: NatsServer, js: jsclient.JetStream, atomic: bool
) -> None:
    name = "WRITTEN_ATOMIC" if atomic else "WRITTEN"
    if atomic:
        atomic_bucket(js, name, window=120, history=10)
    else:
        js.create_key_value(name, history=10)
    kv = js.key_value(name)
    kv.put("gone", b"old")
    kv.put("purged", b"old")
    rows = [
        ("a", b"1", "put"), ("a", b"2", None), ("b", b"x", "PUT"), ("gone", None, "delete"),
        ("purged", None, "purge"), ("a", b"3", "put"),
    ]
    df = spark.createDataFrame(rows, "key string, value binary, operation string").coalesce(1)
    df.write.format("jetstream").option("servers", server.url).option("bucket", name).mode("append").save()
    assert sorted(kv.keys()) == ["a", "b"]  # the atomic sink's markers are not keys
    assert [e.value for e in kv.history("a")] == [b"1", b"2", b"3"]  # the DataFrame's order
    assert kv.get("b").value == b"x"
    assert [e.operation for e in kv.history("gone")] == ["PUT", "DEL"]
    assert [e.operation for e in kv.history("purged")] == ["PURGE"]  # the purge rolled the history up
    assert js.stream_info(f"KV_{name}").state.messages == 7 + (1 if atomic else 0)  # 2 before, 6 rows, a marker

    bad = spark.createDataFrame(
        [("c", b"1", "put"), ("d", b"2", "upsert")], "key string, value binary, operation string"
    )
    with pytest.raises(Exception, match="operation 'upsert'; it must be put, delete or purge"):
        bad.coalesce(1).write.format("jetstream").option("servers", server.url).option("bucket", name).mode(
            "append").save()


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_a_bucket_write_retried_after_the_window_adds_no_revision_twice(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    atomic_bucket(js, "ONCE", window=1.0)
    flag = tmp_path / "failed"
    failing = _fail_once_after_stored(server.url, "KV_ONCE", 1.0, str(flag), "$KV.ONCE.p0.>")
    _write_8000(spark, server.url, "KV_ONCE", failing, bucket="ONCE")
    assert int(flag.read_text()) >= 999, "the failed attempt had stored no rows: the retry proved nothing"
    entries = history(js, "ONCE")
    assert sum(len(v) for v in entries.values()) == 8000  # no revision twice, none lost
    for p in range(4):
        for k in range(50):
            ids = [int(value) for value, _ in entries[f"p{p}.k{k}"]]
            assert ids == [i for i in range(p * 2000, (p + 1) * 2000) if i % 50 == k]  # each once, in order


def test_without_atomic_batches_a_late_bucket_retry_writes_twice_as_the_docs_say(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """The same failure into a bucket without allow_atomic: message ids dedupe only within duplicate_window."""
    js.create_key_value("TWICE", history=64)
    js.update_stream(js.stream_info("KV_TWICE").config, duplicate_window=1.0)
    flag = tmp_path / "failed"
    failing = _fail_once_after_stored(server.url, "KV_TWICE", 1.0, str(flag), "$KV.TWICE.p0.>")
    _write_8000(spark, server.url, "KV_TWICE", failing, bucket="TWICE")
    total = sum(len(v) for v in history(js, "TWICE").values())
    assert total - 8000 >= int(flag.read_text()) >= 999


# -- streaming --------------------------------------------------------------------------------------------


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_a_streaming_write_into_a_bucket_killed_and_restarted_is_exactly_once(
    server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """SIGKILL the whole query while a micro-batch is being written into the bucket, wait out its 1 s
    duplicate_window, restart from the checkpoint (three times in ``make soak``); then let it finish.  Each
    key's history must hold each of its inputs once."""
    total, keys = 9_000, 300
    js.add_stream(name="SRC", subjects=["src.>"], allow_direct=True)
    atomic_bucket(js, "DSTKV", window=1.0, history=64)
    for i in range(total):
        js.publish_async(f"src.k{i % keys}", b"%d" % i)
    js.publish_async_completed(timeout=60)
    checkpoint = tmp_path / "checkpoint"
    command = [sys.executable, str(HERE / "spark_stream_child.py"), server.url, str(checkpoint), "0.0005", "DSTKV"]

    def stored() -> int:
        return js.stream_info("KV_DSTKV", subjects_filter="$KV.DSTKV.>").state.messages

    def in_write(planned: int) -> bool:
        try:
            found = js.direct_get_batch("KV_DSTKV", "_jsclient.commits.KV_DSTKV.>", max_messages=10_000)
        except jsclient.MessageNotFoundError:
            return False
        return any(json.loads(m.data)["batch"] == planned and json.loads(m.data)["rows"] > 0 for m in found)

    kill_mid_writes(command, checkpoint, stored, in_write, kills=1)
    entries = history(js, "DSTKV")
    assert sum(len(v) for v in entries.values()) == total
    for k in range(keys):  # each input once (the query's two partitions write a key's rows in either order)
        assert sorted(int(v) for v, _ in entries[f"k{k}"]) == list(range(k, total, keys))


def test_a_streaming_read_of_changes_gives_every_change_once_in_order(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    kv = js.create_key_value("CHANGES", history=64)
    expected: list[tuple[str, bytes, str]] = []
    for step in range(300):
        key = f"k{step % 7}"
        if step % 13 == 4:
            kv.delete(key)
            expected.append((key, b"", "DEL"))
        elif step % 29 == 9:
            kv.purge(key)
            expected.append((key, b"", "PURGE"))
        else:
            kv.put(key, b"%d" % step)
            expected.append((key, b"%d" % step, "PUT"))
    out = tmp_path / "out"
    query = (
        spark.readStream.format("jetstream").option("servers", server.url).option("bucket", "CHANGES")
        .option("maxMessagesPerTrigger", 50).option("minPartitions", 2).load()
        .writeStream.format("parquet").option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )
    query.awaitTermination(180)
    rows = spark.read.parquet(str(out)).collect()
    # A purge rolls up its key's history: the changes before it are gone, and the stream says so (deleted).
    kept = js.stream_info("KV_CHANGES").state.messages
    assert len(rows) == kept
    by_revision = sorted(rows, key=lambda r: r.revision)
    assert len({r.revision for r in rows}) == len(rows)  # each change once
    per_key: dict[str, list[tuple[bytes, str]]] = defaultdict(list)
    for r in by_revision:
        per_key[r.key].append((bytes(r.value), r.operation))
    for key, changes in per_key.items():
        assert changes == [(e.value, e.operation) for e in kv.history(key)], key
    assert sum(1 for r in rows if r.operation == "DEL") > 0 and sum(1 for r in rows if r.operation == "PURGE") > 0
    assert len(expected) == 300

    only = tmp_path / "only"
    (
        spark.readStream.format("jetstream").option("servers", server.url).option("bucket", "CHANGES")
        .option("keys", "k3").option("startingOffsets", 100).load()
        .writeStream.format("parquet").option("path", str(only))
        .option("checkpointLocation", str(tmp_path / "checkpoint-only")).trigger(availableNow=True).start()
    ).awaitTermination(180)
    k3 = sorted((r.revision, bytes(r.value), r.operation) for r in spark.read.parquet(str(only)).collect())
    assert k3 == [(e.revision, e.value, e.operation) for e in kv.history("k3") if e.revision >= 100]


# -- refusals ---------------------------------------------------------------------------------------------


def test_bad_bucket_options_are_clear_errors_before_any_task_runs(
    spark: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    js.create_key_value("REFUSED")

    def fails(make: Any, match: str) -> None:
        with pytest.raises(Exception, match=match):
            make()

    fails(lambda: bucket_read(spark, server.url, "REFUSED", stream="S").collect(),
          "set one of the options stream, bucket and objectStore")
    fails(lambda: bucket_read(spark, server.url, "NOSUCH").collect(), "bucket 'NOSUCH' not found")
    fails(lambda: bucket_read(spark, server.url, "REFUSED", subjects="a").collect(), "use keys")
    fails(lambda: bucket_read(spark, server.url, "REFUSED", keys="a..b").collect(), "empty token")
    fails(lambda: bucket_read(spark, server.url, "REFUSED", startingSequence=3).collect(),
          "option startingSequence does not apply to a batch read of a bucket .it reads as of asOfRevision.")
    fails(lambda: bucket_read(spark, server.url, "REFUSED", batchSize=10).collect(), "option batchSize does not apply")
    fails(lambda: spark.createDataFrame([("k", b"v")], "key string, value binary").write.format("jetstream")
          .option("servers", server.url).option("bucket", "REFUSED").option("keys", "k").mode("append").save(),
          "option keys does not apply to a write to a bucket")
    df = spark.createDataFrame([("k", "text")], "key string, value string")
    fails(lambda: df.write.format("jetstream").option("servers", server.url).option("bucket", "REFUSED")
          .mode("append").save(), "value column must be binary")
    extra = spark.createDataFrame([("k", b"v", 1)], "key string, value binary, n int")
    fails(lambda: extra.write.format("jetstream").option("servers", server.url).option("bucket", "REFUSED")
          .mode("append").save(), "not n")
    fails(lambda: spark.createDataFrame([("k", b"v")], "key string, value binary").write.format("jetstream")
          .option("servers", server.url).option("bucket", "NOSUCH").mode("append").save(), "not found")
    js.create_key_value("MIRRORED", mirror="REFUSED")
    fails(lambda: spark.createDataFrame([("k", b"v")], "key string, value binary").write.format("jetstream")
          .option("servers", server.url).option("bucket", "MIRRORED").mode("append").save(), "takes no writes")
    assert js.stream_info("KV_REFUSED").state.messages == 0  # nothing was written
    assert js.stream_info("KV_MIRRORED").state.messages == 0


def test_as_of_revision_outside_the_bucket_is_refused(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    kv = js.create_key_value("AGED", history=10)
    for i in range(10):
        kv.put("k", b"%d" % i)
    kv.put("other", b"x")
    js.purge_stream("KV_AGED", seq=6)  # revisions 1..5 are gone
    if server_release() < (2, 11):
        with pytest.raises(Exception, match=r"multi-subject direct get needs nats-server 2\.11 or newer"):
            bucket_read(spark, server.url, "AGED", asOfRevision=11).collect()
        return
    with pytest.raises(Exception, match=r"past bucket 'AGED'.s last revision, 11"):
        bucket_read(spark, server.url, "AGED", asOfRevision=12).collect()
    with pytest.raises(Exception, match="no longer holds revisions before 6"):
        bucket_read(spark, server.url, "AGED", asOfRevision=3).collect()
    assert bucket_read(spark, server.url, "AGED", asOfRevision=3, failOnDataLoss=False).collect() == []
    with pytest.raises(Exception, match="no longer holds revisions before 6"):
        bucket_read(spark, server.url, "AGED", asOfRevision=5).collect()  # the newest revision gone
    assert {r.key for r in bucket_read(spark, server.url, "AGED", asOfRevision=11).collect()} == {"k", "other"}
    # History 10: "k" at revision 10 was its 10th value; ten more puts replace it beyond the history.
    for i in range(10):
        kv.put("k", b"later%d" % i)
    assert {r.key for r in bucket_read(spark, server.url, "AGED", asOfRevision=11).collect()} == {"other"}


# -- filters pushed down ----------------------------------------------------------------------------------


def test_a_pushed_key_filter_reads_only_the_matching_keys(
    spark: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    """Counted at the server (varz out_msgs): the pushed read gets its keys' values only, the unpushed read every
    key's; the rows are the same."""
    from pyspark.sql.functions import col

    from .test_spark_pushdown import out_msgs, pushdown_off

    spark.conf.set(jsclient.spark.PUSHDOWN_CONF, "true")  # register() sets it only where reads push by default
    jsclient.spark.register(spark)

    js.create_key_value("PUSHED")
    for i in range(3000):
        js.publish_async(f"$KV.PUSHED.region{i % 100}.k{i}", b"%d" % i)
    js.publish_async_completed(timeout=60)

    def read(df: Any) -> tuple[list[tuple[str, bytes]], int]:
        before = out_msgs(server)
        rows = sorted((r.key, bytes(r.value)) for r in df.collect())
        return rows, out_msgs(server) - before

    table = bucket_read(spark, server.url, "PUSHED", minPartitions=2, filterPushdown="true")
    expected = sorted((f"region7.k{i}", b"%d" % i) for i in range(7, 3000, 100))
    pushed, sent = read(table.filter(col("key").startswith("region7.")))
    assert pushed == expected and sent < 300, sent  # 30 values, and the planning's few replies
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        table.filter(col("key").startswith("region7.")).explain("formatted")
    assert "StringStartsWith(key,region7.)" in shown.getvalue(), shown.getvalue()
    pushed_in, _ = read(table.filter(col("key").isin("region7.k7", "region7.k107")))
    assert pushed_in == [("region7.k107", b"107"), ("region7.k7", b"7")]
    with pushdown_off(spark):
        unpushed, sent_all = read(bucket_read(spark, server.url, "PUSHED").filter(col("key").startswith("region7.")))
    spark.conf.unset(jsclient.spark.PUSHDOWN_CONF)
    jsclient.spark.register(spark)
    assert unpushed == expected and sent_all >= 3000


def test_a_bucket_write_refuses_overwrite(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    js.create_key_value("NOOVERWRITE")
    df = spark.createDataFrame([("k", b"v")], "key string, value binary")
    with pytest.raises(Exception, match=r"cannot overwrite its target: write with mode\('append'\)"):
        df.write.format("jetstream").option("servers", server.url).option("bucket", "NOOVERWRITE").mode(
            "overwrite").save()
    assert js.stream_info("KV_NOOVERWRITE").state.messages == 0


def test_changes_purged_before_a_streaming_read_reached_them_are_loss(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """A query reads 50 changes; 50 more come and the bucket's stream is purged before it runs again: its restart
    from the checkpoint raises DataLossError, and with failOnDataLoss=false reads on from what is there."""
    kv = js.create_key_value("LOSSY", history=64)
    for i in range(50):
        kv.put(f"k{i % 5}", b"%d" % i)
    checkpoint = str(tmp_path / "checkpoint")

    def run(**options: Any) -> Any:
        reader = spark.readStream.format("jetstream").option("servers", server.url).option("bucket", "LOSSY")
        for key, value in options.items():
            reader = reader.option(key, value)
        query = (reader.load().writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination(180)
        return query

    assert run().exception() is None
    for i in range(50, 100):
        kv.put(f"k{i % 5}", b"%d" % i)
    js.purge_stream("KV_LOSSY")
    kv.put("after", b"purge")
    with pytest.raises(Exception, match=r"DataLossError: stream 'KV_LOSSY' no longer holds sequences 51\.\.100"):
        run()
    assert run(failOnDataLoss="false").exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.revision for r in rows) == [*range(1, 51), 101]  # the first 50, then what came after the purge
