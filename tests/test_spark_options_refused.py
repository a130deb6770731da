"""What the jetstream data source refuses, or honours, as docs/guides/spark.rst says (real Spark, real server).

* A stream kept by interest or as a work queue is read by direct get only:
  without ``allow_direct`` the read is refused when it is planned, and no
  consumer of the reader's touches the stream.
* An option that does not apply to the kind of read is refused by name,
  with the option to use instead (never silently ignored); so is a read's
  option given to a write, and the sink's given to a read, even at its
  default value.
* ``jsclient.spark.connection`` takes a mapping of option keys.
* Which mode the sink writes in, for each way of naming the target.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import jsclient
import jsclient.spark
from jsclient.server import NatsServer
from jsclient.spark import SparkOptions

from .conftest import server_release

pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")

from jsclient.spark.source import plan_ranges

# -- interest and work-queue streams need allow_direct ---------------------------------------


def _stream_without_direct(js: jsclient.JetStream, name: str, retention: str) -> None:
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], retention=retention, allow_direct=False)
    if retention == "interest":
        js.add_consumer(name, durable_name="keep", ack_policy="explicit")  # so that the stream keeps them
    for i in range(20):
        js.publish(f"{name.lower()}.x", b"%d" % i)


@pytest.mark.parametrize("retention", ["interest", "workqueue"])
def test_a_stream_only_direct_get_may_read_is_refused_without_allow_direct(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path, retention: str
) -> None:
    name = f"NODIRECT_{retention.upper()}"
    _stream_without_direct(js, name, retention)
    opts = SparkOptions.parse({"servers": server.url, "stream": name})
    with pytest.raises(jsclient.DirectGetDisabledError, match=r"direct get only.*set allow_direct=True"):
        plan_ranges(js, opts, 1, 20, js.stream_info(name))
    with pytest.raises(Exception, match=rf"stream '{name}' \({retention.replace('workqueue', 'work queue')} "
                       r"retention\) by direct get only.*allow_direct=True") as batch:
        spark.read.format("jetstream").option("servers", server.url).option("stream", name).load().collect()
    assert "stage failure" not in str(batch.value)  # refused when planned: no task ran
    query = (
        spark.readStream.format("jetstream").option("servers", server.url).option("stream", name).load()
        .writeStream.format("memory").queryName(f"nodirect_{retention}")
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    )
    with pytest.raises(Exception, match=r"by direct get only.*allow_direct=True"):
        query.awaitTermination(120)
    # Nothing of the reader's reached the stream: no consumer made, every message still there.
    assert js.consumer_names(name) == (["keep"] if retention == "interest" else [])
    assert js.stream_info(name).state.messages == 20
    if retention == "interest":
        assert js.consumer_info(name, "keep").num_pending == 20
    js.update_stream(name=name, subjects=[f"{name.lower()}.>"], retention=retention, allow_direct=True)
    df = spark.read.format("jetstream").option("servers", server.url).option("stream", name).load()
    assert sorted(r.seq for r in df.select("seq").collect()) == list(range(1, 21))  # by direct get, as promised
    assert js.stream_info(name).state.messages == 20


# -- connection() takes a mapping --------------------------------------------------------


def test_connection_takes_a_mapping_of_option_keys(server: NatsServer) -> None:
    from jsclient.spark import connections

    mapping = {"servers": server.url, "user": None}
    conn = jsclient.spark.connection(mapping)
    assert conn.is_connected
    assert jsclient.spark.connection(dict(mapping)) is conn  # one per process for equal settings
    assert jsclient.spark.connection(SparkOptions.parse(mapping)) is conn
    assert jsclient.spark.connection(SparkOptions.parse(mapping).connection_options()) is conn
    with pytest.raises(jsclient.InvalidArgumentError, match="unknown jetstream option 'sever'"):
        jsclient.spark.connection({"sever": server.url})
    connections.close_all()


# -- options that do not apply are refused by name ---------------------------------------


def _batch_read(spark: Any, server: NatsServer, stream: str, **options: Any) -> Any:
    reader = spark.read.format("jetstream").option("servers", server.url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_a_batch_read_refuses_streaming_options_by_name(spark: Any, server: NatsServer, js: jsclient.JetStream) -> None:
    js.add_stream(name="BATCHOPTS", subjects=["bo.>"], allow_direct=True)
    for i in range(10):
        js.publish("bo.x", b"%d" % i)
    instead = "applies to streaming reads; a batch read starts at startingSequence or startingTime"
    for spec in ("latest", "5", "2024-01-01T00:00:00Z"):
        with pytest.raises(Exception, match=rf"startingOffsets={spec} {instead}") as refused:
            _batch_read(spark, server, "BATCHOPTS", startingOffsets=spec).collect()
        assert "stage failure" not in str(refused.value)  # refused when planned: no task ran
    with pytest.raises(Exception, match="set startingOffsets=earliest or startingSequence, not both"):
        _batch_read(spark, server, "BATCHOPTS", startingOffsets="earliest", startingSequence=3).collect()
    with pytest.raises(Exception, match="maxMessagesPerTrigger applies to streaming reads; a batch read reads its "
                       "whole range"):
        _batch_read(spark, server, "BATCHOPTS", maxMessagesPerTrigger=3).collect()
    # A Kafka habit that means what it says: earliest, from the first message.
    js.purge_stream("BATCHOPTS", seq=4)
    rows = _batch_read(spark, server, "BATCHOPTS", startingOffsets="Earliest").select("seq").collect()
    assert sorted(r.seq for r in rows) == list(range(4, 11))


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("startingSequence", "3", "startingSequence applies to batch reads; a streaming read starts at "
         "startingOffsets"),
        ("startingTime", "2024-01-01T00:00:00Z", "startingTime applies to batch reads; a streaming read starts at "
         "startingOffsets"),
        ("endingSequence", "5", "endingSequence applies to batch reads; a streaming read has no end"),
        ("endingTime", "2999-01-01T00:00:00Z", "endingTime applies to batch reads; a streaming read has no end"),
        ("startingOffsets", "yesterday", "startingOffsets must be earliest, latest, a sequence or an ISO 8601 time, "
         "not 'yesterday'"),
    ],
)
def test_a_streaming_read_refuses_batch_options_by_name(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path, key: str, value: str, says: str
) -> None:
    js.add_stream(name="STREAMOPTS", subjects=["so.>"], allow_direct=True)
    for i in range(10):
        js.publish("so.x", b"%d" % i)
    with pytest.raises(Exception, match=says):
        query = (
            spark.readStream.format("jetstream").option("servers", server.url).option("stream", "STREAMOPTS")
            .option(key, value).load()
            .writeStream.format("memory").queryName(f"refused_{key.lower()}")
            .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
        )
        query.awaitTermination(120)
    assert not (tmp_path / "cp" / "commits" / "0").exists()  # no micro-batch ran


@pytest.mark.parametrize(
    ("side", "key", "value"),
    [
        ("write", "startingSequence", "3"),
        ("write", "minPartitions", "1"),  # at its default value: given, so refused all the same
        ("write", "subjects", "w.>"),
        ("write", "failOnDataLoss", "true"),
        ("stream write", "maxMessagesPerTrigger", "10"),
        ("stream write", "startingOffsets", "earliest"),
        ("read", "maxPending", "4000"),
        ("read", "subject", "w.x"),
        ("read", "commitPrefix", "_jsclient.commits.W"),
        ("stream read", "subject", "w.x"),
        ("read", "includeContent", "true"),
    ],
)
def test_a_read_refuses_the_sinks_options_and_a_write_the_reads(
    spark: Any, server: NatsServer, js: jsclient.JetStream, tmp_path: Path, side: str, key: str, value: str
) -> None:
    """Each refused when the read is planned or the write or query starts: nothing is read or written."""
    if "W" not in js.stream_names():
        js.add_stream(name="W", subjects=["w.>", "_jsclient.commits.W.>"], allow_direct=True,
                      allow_atomic=server_release() >= (2, 12))  # the refusal comes first on every server
        js.publish("w.x", b"0")
    says = rf"option {key} (does not apply to a (read of|write to) a stream|applies to object stores)"
    rows = spark.range(5).selectExpr("'w.x' as subject", "cast(cast(id as string) as binary) as data")
    with pytest.raises(Exception, match=says) as refused:
        if side == "write":
            rows.write.format("jetstream").option("servers", server.url).option("stream", "W").option(
                key, value).mode("append").save()
        elif side == "read":
            spark.read.format("jetstream").option("servers", server.url).option("stream", "W").option(
                key, value).load().collect()
        else:
            if side == "stream read":
                frame = spark.readStream.format("jetstream").option("servers", server.url).option(
                    "stream", "W").option(key, value).load().selectExpr("subject", "data")
                writer = frame.writeStream.format("memory").queryName(f"refused_read_{key.lower()}")
            else:
                frame = spark.readStream.format("rate").option("rowsPerSecond", 10).load().selectExpr(
                    "'w.x' as subject", "cast(cast(value as string) as binary) as data")
                writer = frame.writeStream.format("jetstream").option("servers", server.url).option(
                    "stream", "W").option(key, value)
            writer.option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start(
            ).awaitTermination(120)
    assert "stage failure" not in str(refused.value)  # refused before any task ran
    assert js.stream_info("W").state.messages == 1  # nothing written
    assert not (tmp_path / "cp" / "commits" / "0").exists()


def test_the_option_parser_keeps_startingoffsets_unset_apart_from_earliest() -> None:
    assert SparkOptions.parse({"stream": "S"}).starting_offsets is None
    assert SparkOptions.parse({"stream": "S", "startingOffsets": "earliest"}).starting_offsets == "earliest"


# -- the sink's mode, for each way of naming the target ----------------------------------


def _stored_ids(js: jsclient.JetStream, stream: str, subjects: str) -> list[str | None]:
    return [(m.headers or {}).get("Nats-Msg-Id") for m in js.direct_get_batch(stream, subjects, max_messages=10_000)]


def _markers(js: jsclient.JetStream, stream: str) -> int:
    try:
        return len(list(js.direct_get_batch(stream, f"_jsclient.commits.{stream}.>", max_messages=10_000)))
    except jsclient.MessageNotFoundError:
        return 0


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_the_sink_mode_for_each_way_of_naming_the_target(
    spark: Any, server: NatsServer, js: jsclient.JetStream, caplog: Any
) -> None:
    from jsclient.spark.sink import SinkMode, plan_write

    js.add_stream(name="ATOM", subjects=["atom.>", "_jsclient.commits.ATOM.>"], allow_atomic=True, allow_direct=True)
    js.add_stream(name="PLAIN", subjects=["plain.>"], allow_direct=True, duplicate_window=60)

    def write(prefix: str, *, subject_column: bool = True, **options: str) -> None:
        cols = [f"concat('{prefix}.', cast(id % 3 as string)) as subject"] if subject_column else []
        df = spark.range(30, numPartitions=2).selectExpr(*cols, "cast(cast(id as string) as binary) as data")
        writer = df.write.format("jetstream").option("servers", server.url).mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save()

    def mode(**options: str) -> SinkMode:
        return plan_write(SparkOptions.parse({"servers": server.url, **options})).mode

    # stream named (rows carry their subjects): atomic, exactly once; no message ids, a marker per task.
    assert mode(stream="ATOM") is SinkMode.ATOMIC
    write("atom.s", stream="ATOM")
    assert _stored_ids(js, "ATOM", "atom.s.>") == [None] * 30 and _markers(js, "ATOM") == 2
    # the subject option alone finds the stream: atomic as well.
    assert mode(subject="atom.one") is SinkMode.ATOMIC
    write("atom.one", subject_column=False, subject="atom.one")
    assert _stored_ids(js, "ATOM", "atom.one") == [None] * 30 and _markers(js, "ATOM") == 4
    # neither: the target is not known before the rows come, so message ids, even on an atomic stream.
    with caplog.at_level(logging.WARNING, logger="jsclient.spark"):
        assert mode() is SinkMode.MSGID
    assert "within the target stream's duplicate_window" in caplog.text
    write("atom.n")
    ids = _stored_ids(js, "ATOM", "atom.n.>")
    assert len(ids) == 30 and all(ids) and _markers(js, "ATOM") == 4
    # a stream without atomic batches: message ids.
    assert mode(stream="PLAIN") is SinkMode.MSGID
    write("plain", stream="PLAIN")
    ids = _stored_ids(js, "PLAIN", "plain.>")
    assert len(ids) == 30 and all(ids)
    # An atomic write's rows all go to the stream it names: a row for another stream fails the write, by name.
    with pytest.raises(Exception, match=r"subject 'plain\.\d' is not one of stream 'ATOM''s subjects"):
        write("plain", stream="ATOM")
    with pytest.raises(Exception, match=r"subject '_jsclient\.commits\.ATOM\.\d' is under the sink's commit prefix"):
        write("_jsclient.commits.ATOM", stream="ATOM")
    assert js.stream_info("PLAIN").state.messages == 30
