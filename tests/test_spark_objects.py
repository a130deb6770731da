"""Object stores as binary files through the jetstream data source (option ``objectStore``), on a local Spark
(local[2,3]: tasks tried up to three times) and a real nats-server: what docs/guides/spark-objects.rst says."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient.jetstream.objectstore import encode_name
from jsclient.server import NatsServer
from jsclient.spark import SparkOptions

pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")

from jsclient.spark import objects

MIB = 1 << 20


def sha256_digest(data: bytes) -> str:
    """The digest the object store keeps: ``SHA-256=`` and the URL-safe base64 of the SHA-256."""
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def read(spark: Any, url: str, store: str, **options: Any) -> Any:
    reader = spark.read.format("jetstream").option("servers", url).option("objectStore", store)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def write(df: Any, url: str, store: str) -> None:
    df.write.format("jetstream").option("servers", url).option("objectStore", store).mode("append").save()


def as_local(when: dt.datetime) -> dt.datetime:
    """A UTC time as Spark gives a timestamp to Python: naive, in the local time zone."""
    return when.astimezone().replace(tzinfo=None)


@pytest.fixture
def no_jobs(spark: Any) -> Iterator[Callable[[], list[int]]]:
    """Runs the test's Spark calls in a job group of its own; the function gives the jobs that group started."""
    group = f"objects-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, "a refusal that must come before any task")
    yield lambda: list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


# -- reading and writing -----------------------------------------------------------------------


def test_objects_round_trip_byte_for_byte(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    """0 B, 1 B and 50 MiB written through the Spark writer, checked with the plain client, read back through
    the Spark reader: the same bytes, and the digest the store keeps, which is the SHA-256 of the bytes."""
    store = js.create_object_store("files")
    data = {"empty": b"", "one": b"\x00", "dir/ünïcode name.bin": os.urandom(50 * MIB)}
    write(spark.createDataFrame(list(data.items()), "name string, content binary"), server.url, "files")

    infos = {info.name: info for info in store.list()}
    assert sorted(infos) == sorted(data)
    for name, content in data.items():
        assert store.get_bytes(name) == content
        assert (infos[name].size, infos[name].digest) == (len(content), sha256_digest(content))

    df = read(spark, server.url, "files")
    assert df.columns == ["name", "size", "modified", "digest", "content"]
    rows = {r.name: r for r in df.collect()}
    assert sorted(rows) == sorted(data)
    for name, content in data.items():
        row = rows[name]
        assert bytes(row.content) == content
        assert row.size == len(content)
        assert row.digest == infos[name].digest == sha256_digest(content)
        assert infos[name].mtime is not None and row.modified == as_local(infos[name].mtime)


def test_rows_of_one_name_in_one_task_last_wins(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    store = js.create_object_store("dups")
    rows = [("dup", b"first"), ("other", b"x"), ("dup", b"second"), ("dup", b"third")]
    write(spark.createDataFrame(rows, "name string, content binary").coalesce(1), server.url, "dups")
    assert store.get_bytes("dup") == b"third"
    assert sorted(i.name for i in store.list()) == ["dup", "other"]


def test_listing_without_content(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    """includeContent=false: no content column; each live object's name, size, time and digest, and no deleted
    object or link."""
    store = js.create_object_store("listed")
    sizes = {"a": 0, "b": 1, "c/d": 300_000}
    for name, size in sizes.items():
        store.put(name, b"x" * size)
    store.put("deleted", b"gone")
    store.delete("deleted")
    store.add_link("link", store.info("a"))
    df = read(spark, server.url, "listed", includeContent="false")
    assert df.columns == ["name", "size", "modified", "digest"]
    rows = {r.name: r for r in df.collect()}
    assert {name: r.size for name, r in rows.items()} == sizes
    for name, row in rows.items():
        info = store.info(name)
        assert row.digest == info.digest == sha256_digest(b"x" * sizes[name])
        assert info.mtime is not None and row.modified == as_local(info.mtime)
    # A read with content leaves the same objects out.
    assert sorted(r.name for r in read(spark, server.url, "listed").select("name").collect()) == sorted(sizes)


def test_a_read_in_several_partitions_returns_each_object_once(
    spark: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    store = js.create_object_store("parts")
    data = {f"obj-{i:02d}": os.urandom(i * 997) for i in range(40)}
    for name, content in data.items():
        store.put(name, content)
    df = read(spark, server.url, "parts", minPartitions=4)
    assert df.rdd.getNumPartitions() == 4
    rows = df.collect()
    assert Counter(r.name for r in rows) == Counter(list(data))
    assert all(bytes(r.content) == data[r.name] for r in rows)

    # The plan behind it: every object in one group, and no group more than the largest object above the lightest.
    groups = objects.plan(store.list(), SparkOptions.parse({"objectStore": "parts", "minPartitions": 4}))
    assert sorted(o.name for g in groups for o in g.objects) == sorted(data)
    loads = [sum(o.size for o in g.objects) for g in groups]
    assert max(loads) - min(loads) <= max(len(c) for c in data.values())

    # More partitions asked than objects: one task per object.  An empty store: no rows.
    assert read(spark, server.url, "parts", minPartitions=100).rdd.getNumPartitions() == 40
    js.create_object_store("empty")
    empty = read(spark, server.url, "empty", minPartitions=3)
    assert (empty.rdd.getNumPartitions(), empty.count()) == (1, 0)


def test_an_object_too_large_for_a_row_is_refused_when_planned() -> None:
    """Planned from descriptions alone: a 2 GiB object is refused with content, and listed without."""
    huge = jsclient.ObjectInfo(name="huge", bucket="b", nuid="n", size=1 << 31, chunks=16384, digest="SHA-256=x")
    with pytest.raises(jsclient.InvalidArgumentError, match=r"'huge' \(2147483648 bytes\) is larger than a row"):
        objects.plan([huge], SparkOptions.parse({"objectStore": "b"}))
    (group,) = objects.plan([huge], SparkOptions.parse({"objectStore": "b", "includeContent": "false"}))
    assert [o.name for o in group.objects] == ["huge"]


@pytest.mark.parametrize("change", ["delete", "replace"])
def test_an_object_changed_after_planning_is_data_loss(
    server: NatsServer, js: jsclient.JetStream, caplog: Any, change: str
) -> None:
    """Between planning (driver) and the task's read: an error by default, skipped with failOnDataLoss=false;
    never the new version under the planned row.  The reader's two halves are driven directly, as Spark would."""
    store = js.create_object_store("changing")
    store.put("kept", b"kept")
    store.put("changed", b"planned")
    readers = {
        fail: objects.ObjectReader(SparkOptions.parse({"servers": server.url, "objectStore": "changing",
                                                       "failOnDataLoss": fail}))
        for fail in ("true", "false")
    }
    plans = {fail: reader.partitions() for fail, reader in readers.items()}
    if change == "delete":
        store.delete("changed")
    else:
        store.put("changed", b"the next version")
    store.put("added", b"after the listing")

    planned = r"object 'changed' of object store 'changing', listed when the read was planned, was (deleted or )?rep"
    with pytest.raises(jsclient.DataLossError, match=planned):
        [batch for group in plans["true"] for batch in readers["true"].read(group)]
    with caplog.at_level(logging.WARNING, logger="jsclient.spark"):
        batches = [batch for group in plans["false"] for batch in readers["false"].read(group)]
    assert [(r["name"], r["content"]) for b in batches for r in b.to_pylist()] == [("kept", b"kept")]
    assert "object 'changed' of object store 'changing'" in caplog.text


def test_bytes_that_do_not_match_the_digest_fail_the_read(
    spark: Any, server: NatsServer, js: jsclient.JetStream
) -> None:
    """An object whose description names other bytes (stored here by hand) is never a row: the task fails."""
    store = js.create_object_store("corrupt")
    info = store.put("x", b"abc")
    wrong = dataclasses.replace(info, digest=sha256_digest(b"abd"))
    js.publish(f"$O.corrupt.M.{encode_name('x')}", wrong.to_json(), headers={"Nats-Rollup": "sub"})
    with pytest.raises(Exception, match=r"DigestMismatchError: object 'x': SHA-256 of the bytes read"):
        read(spark, server.url, "corrupt").collect()
    # A listing reads no bytes: it gives the description as it is.
    listed = read(spark, server.url, "corrupt", includeContent="false").collect()
    assert [(r.name, r.size, r.digest) for r in listed] == [("x", 3, sha256_digest(b"abd"))]


# -- refusals before any task ------------------------------------------------------------------


def test_a_missing_store_is_refused_before_any_task(
    spark: Any, server: NatsServer, js: jsclient.JetStream, no_jobs: Callable[[], list[int]]
) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match=r"ObjectStoreNotFoundError: object store 'nowhere' not found"):
        read(spark, server.url, "nowhere").collect()
    df = spark.createDataFrame([("a", b"a")], "name string, content binary")
    with pytest.raises(AnalysisException, match=r"ObjectStoreNotFoundError: object store 'nowhere' not found"):
        write(df, server.url, "nowhere")
    assert no_jobs() == []
    assert "nowhere" not in js.object_store_names()


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ("name string, content string", r"column 'content' is string, not binary: cast it to binary"),
        ("name string, content int", r"column 'content' is int, not binary"),
        ("name int, content binary", r"column 'name' is int, not string"),
        ("content binary", r"missing column 'name' \(string, the object's name\)"),
        ("name string", r"missing column 'content' \(binary, its bytes\)"),
        ("name string, content binary, path string", r"unknown column 'path'"),
    ],
)
def test_a_dataframe_of_the_wrong_shape_is_refused_before_any_task(
    spark: Any, server: NatsServer, js: jsclient.JetStream, no_jobs: Callable[[], list[int]],
    columns: str, message: str,
) -> None:
    from pyspark.errors import AnalysisException

    store = js.create_object_store("shapes")
    df = spark.createDataFrame([], columns)
    with pytest.raises(AnalysisException, match=f"InvalidArgumentError: {message}"):
        write(df, server.url, "shapes")
    assert no_jobs() == []
    assert store.list() == []


def test_options_that_do_not_apply_are_refused(spark: Any, server: NatsServer) -> None:
    with pytest.raises(jsclient.InvalidArgumentError, match="not stream and objectStore"):
        SparkOptions.parse({"objectStore": "x", "stream": "S"})
    with pytest.raises(jsclient.InvalidArgumentError, match="option startingSequence does not apply to a read"):
        objects.ObjectReader(SparkOptions.parse({"objectStore": "x", "startingSequence": 5}))
    for key, value in (("minPartitions", 2), ("includeContent", "false"), ("failOnDataLoss", "false")):
        with pytest.raises(jsclient.InvalidArgumentError, match=f"option {key} does not apply to a write"):
            objects.ObjectWriter(SparkOptions.parse({"objectStore": "x", key: value}), None)
    # Spark's default save mode is refused by Spark itself: a write says mode("append").
    df = spark.createDataFrame([("a", b"a")], "name string, content binary")
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("jetstream").option("servers", server.url).option("objectStore", "x").save()


def test_a_null_name_or_content_fails_the_write(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    """The task fails at the row; what it put before stays (nothing is rolled back)."""
    store = js.create_object_store("nulls")
    for rows, message in (([("first", b"1"), (None, b"x")], "a row's name is null"),
                          ([("second", b"2"), ("x", None)], "a row's content \\(object 'x'\\) is null")):
        df = spark.createDataFrame(rows, "name string, content binary").coalesce(1)
        with pytest.raises(Exception, match=message):
            write(df, server.url, "nulls")
    assert sorted((i.name, store.get_bytes(i.name)) for i in store.list()) == [("first", b"1"), ("second", b"2")]


# -- a task retried after it stored objects ------------------------------------------------------


def _fail_once_after_stored(url: str, store: str, flag: str) -> Any:
    """A UDF that, in partition 0's first attempt, waits until the writer has stored 50 of that partition's
    objects, records which versions are there, and fails the task."""
    from pyspark.sql.functions import udf

    @udf("binary")
    def pass_or_fail(i: int, content: bytes) -> bytes:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i == 250:
            with jsclient.connect(url) as nc:
                obs = nc.jetstream().object_store(store)
                stored: dict[str, tuple[str, float]] = {}
                for _ in range(1200):
                    stored = {o.name: (o.nuid, o.mtime.timestamp()) for o in obs.list() if int(o.name[4:]) < 300}
                    if len(stored) >= 50:
                        break
                    time.sleep(0.1)
            Path(flag).write_text(json.dumps(stored))
            raise RuntimeError(f"injected failure after {len(stored)} objects of partition 0 were stored")
        return content

    return pass_or_fail


def test_a_task_retried_after_it_stored_objects_leaves_each_once_and_whole(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path
) -> None:
    """600 rows of 1 KiB in two tasks; the first fails after it provably stored some objects, and Spark runs it
    again.  The UDF before the writer hands rows on 100 at a time, and the writer takes them in batches of
    50 here (not the session's 500), so that rows reach it while the UDF still has rows to fail at."""
    store = js.create_object_store("retried")
    flag = tmp_path / "failed"
    df = spark.range(0, 600, numPartitions=2).selectExpr(
        "id", "format_string('obj-%05d', id) as name", "cast(lpad(cast(id as string), 1024, '.') as binary) as content"
    )
    fail = _fail_once_after_stored(server.url, "retried", str(flag))
    batch = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        write(df.select("name", fail("id", "content").alias("content")), server.url, "retried")
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch)

    before = json.loads(flag.read_text())
    assert len(before) >= 50, "the failed attempt had stored no objects: the retry proved nothing"
    infos = {i.name: i for i in store.list()}
    assert sorted(infos) == [f"obj-{i:05d}" for i in range(600)]
    for i in range(600):
        expected = str(i).rjust(1024, ".").encode()
        name = f"obj-{i:05d}"
        assert store.get_bytes(name) == expected
        assert infos[name].digest == sha256_digest(expected)
    # The retry put partition 0's rows again: a newer version of each, with the same bytes.
    assert all(infos[name].nuid != nuid for name, (nuid, _) in before.items())
    assert all(infos[name].mtime.timestamp() > mtime for name, (_, mtime) in before.items())
