"""jsclient.instrumentation on the Spark data source: executors' spans under the driver's, on real Spark.

The driver is this process, instrumented with the in-memory SDK (the ``otel`` fixture).  The executors'
Python workers get a ``sitecustomize`` (tests/otel_worker) that instruments jsclient in them and writes their
spans and counters to a file, as a user's OpenTelemetry setup on the executors would: the ``workers`` fixture
registers the data source again with that directory on the workers' ``PYTHONPATH`` (Spark starts a Python
daemon of its own for each environment) and puts the session back afterwards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import jsclient
import jsclient.spark
from jsclient.instrumentation.spark import TRACE_PREFIX, trace_options
from jsclient.server import NatsServer
from jsclient.spark import SparkOptions

from .otelkit import Otel

pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")

HERE = Path(__file__).parent


class Exported:
    """What the executors' workers exported: their spans, and the last counters each worker process sent."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def spans(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["record"] == "span" and r["name"] == name]

    def children(self, parent: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["record"] == "span" and r["parent_span_id"] == parent["span_id"]]

    def total(self, metric: str, **attributes: Any) -> float:
        """The sum over worker processes of ``metric``'s points whose attributes are exactly ``attributes``."""
        last: dict[int, list[dict[str, Any]]] = {}
        for r in self.records():
            if r["record"] == "metrics":
                last[r["pid"]] = r["points"]
        return sum(
            p["value"] for points in last.values() for p in points
            if p["name"] == metric and p["attributes"] == attributes
        )


@pytest.fixture(scope="module")
def workers(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    """The data source registered for workers that instrument jsclient and export to a file; put back after."""
    exported = tmp_path_factory.mktemp("otel") / "workers.jsonl"
    environment = spark.sparkContext.environment
    saved = dict(environment)
    paths = (str(HERE / "otel_worker"), os.environ.get("PYTHONPATH"))
    environment["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    environment["JSCLIENT_OTEL_FILE"] = str(exported)
    jsclient.spark.register(spark)
    try:
        yield Exported(exported)
    finally:
        environment.clear()
        environment.update(saved)
        jsclient.spark.register(spark)


def traceparent(context: Any) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def by_partition(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(spans, key=lambda s: s["attributes"]["messaging.nats.spark.partition_id"])


def fill(js: jsclient.JetStream, stream: str, count: int) -> None:
    js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    for i in range(count):
        js.publish_async(f"{stream.lower()}.{i % 2}", b"%010d" % i)
    js.publish_async_completed(timeout=30)


def test_trace_options_carry_the_current_context_and_nothing_without_one(otel: Otel) -> None:
    assert trace_options() == {}
    assert TRACE_PREFIX == SparkOptions.TRACE_PREFIX  # the instrumentation does not import jsclient.spark for it
    with otel.tracer.start_as_current_span("job") as job:
        options = trace_options()
    context = job.get_span_context()
    assert options["jsclient.trace.traceparent"] == traceparent(context)
    parsed = SparkOptions.parse({"stream": "S", **options, "jsclient.trace.tracestate": "k=v"})
    assert dict(parsed.trace_context) == {"traceparent": options["jsclient.trace.traceparent"], "tracestate": "k=v"}
    assert parsed == SparkOptions.parse({"stream": "S"})  # not a user's option: never compared, never refused


def test_a_batch_read_gives_one_span_per_partition_under_the_drivers_span(
    spark: Any, server: NatsServer, js: jsclient.JetStream, otel: Otel, workers: Exported
) -> None:
    fill(js, "TRREAD", 40)
    with otel.tracer.start_as_current_span("job") as job:
        df = (
            spark.read.format("jetstream").option("servers", server.url).option("stream", "TRREAD")
            .option("minPartitions", 2).load()
        )
        assert df.select("data").count() == 40
    reads = by_partition(workers.spans("receive TRREAD"))
    assert len(reads) == 2, reads
    context = job.get_span_context()
    for span in reads:
        assert span["kind"] == "CONSUMER"
        assert (span["trace_id"], span["parent_span_id"]) == (context.trace_id, context.span_id)
    assert [s["attributes"] for s in reads] == [
        {
            "messaging.system": "nats", "messaging.operation.name": "receive", "messaging.operation.type": "receive",
            "messaging.destination.name": "TRREAD", "messaging.nats.stream": "TRREAD",
            "messaging.nats.spark.first_sequence": first, "messaging.nats.spark.last_sequence": first + 19,
            "messaging.nats.spark.partition_id": partition, "messaging.nats.spark.attempt": 0,
            "messaging.batch.message_count": 20, "messaging.nats.spark.payload_bytes": 200,
        }
        for partition, first in ((0, 1), (1, 21))
    ]
    # The cached connection's calls in the task are the read's children (its consumer made and deleted).
    for span in reads:
        names = [c["name"] for c in workers.children(span)]
        assert "jetstream CONSUMER.CREATE" in names, names
    assert workers.total(
        "messaging.client.consumed.messages", **{
            "messaging.system": "nats", "messaging.operation.name": "receive", "messaging.destination.name": "TRREAD"
        }
    ) == 40


def test_without_instrumentation_on_the_driver_nothing_travels(
    spark: Any, server: NatsServer, js: jsclient.JetStream, workers: Exported
) -> None:
    fill(js, "TRBARE", 10)
    tracer = TracerProvider().get_tracer("tests")  # a span is current, but jsclient is not instrumented here
    with tracer.start_as_current_span("job") as job:
        df = spark.read.format("jetstream").option("servers", server.url).option("stream", "TRBARE").load()
        assert df.count() == 10
    [read] = workers.spans("receive TRBARE")
    assert read["parent_span_id"] is None
    assert read["trace_id"] != job.get_span_context().trace_id
    assert read["attributes"]["messaging.batch.message_count"] == 10


def test_a_batch_write_gives_one_span_per_task_and_counts_what_it_sent(
    spark: Any, server: NatsServer, js: jsclient.JetStream, otel: Otel, workers: Exported
) -> None:
    js.add_stream(name="TRWRITE", subjects=["trwrite.>"])
    sent = {"messaging.system": "nats", "messaging.operation.name": "publish"}
    before = workers.total("messaging.client.sent.messages", **sent)
    rows = spark.range(0, 60, numPartitions=2).selectExpr(
        "concat('trwrite.', id % 3) as subject", "lpad(cast(id as string), 4, '0') as data"
    )
    with otel.tracer.start_as_current_span("job") as job:
        rows.write.format("jetstream").option("servers", server.url).option("stream", "TRWRITE").mode("append").save()
    assert js.stream_info("TRWRITE").state.messages == 60
    writes = by_partition(workers.spans("publish TRWRITE"))
    assert len(writes) == 2, writes
    context = job.get_span_context()
    for partition, span in enumerate(writes):
        assert span["kind"] == "PRODUCER"
        assert (span["trace_id"], span["parent_span_id"]) == (context.trace_id, context.span_id)
        assert span["attributes"] == {
            "messaging.system": "nats", "messaging.operation.name": "publish", "messaging.operation.type": "send",
            "messaging.destination.name": "TRWRITE", "messaging.nats.stream": "TRWRITE",
            "messaging.nats.spark.partition_id": partition, "messaging.nats.spark.attempt": 0,
            "messaging.nats.spark.sink_mode": "msgid", "messaging.batch.message_count": 30,
            "messaging.nats.spark.payload_bytes": 120, "messaging.nats.spark.skipped": 0,
            "messaging.nats.spark.duplicates": 0,
        }
    # The sink's frames go out through the cached connection's publish_encoded, counted by messages.
    assert workers.total("messaging.client.sent.messages", **sent) - before == 60


def test_a_streaming_copy_gives_its_micro_batch_id_to_the_read_and_the_write(
    spark: Any, server: NatsServer, js: jsclient.JetStream, otel: Otel, workers: Exported, tmp_path: Path
) -> None:
    fill(js, "TRIN", 30)
    js.add_stream(name="TROUT", subjects=["trout.>"])
    with otel.tracer.start_as_current_span("query") as started:
        source = spark.readStream.format("jetstream").option("servers", server.url).option("stream", "TRIN").load()
        query = (
            source.selectExpr("replace(subject, 'trin.', 'trout.') as subject", "data")
            .writeStream.format("jetstream").option("servers", server.url).option("stream", "TROUT")
            .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
        )
    query.awaitTermination(120)
    assert query.exception() is None
    assert js.stream_info("TROUT").state.messages == 30
    [read] = workers.spans("receive TRIN")
    [write] = workers.spans("publish TROUT")
    context = started.get_span_context()
    for span in (read, write):
        assert (span["trace_id"], span["parent_span_id"]) == (context.trace_id, context.span_id)
        assert span["attributes"]["messaging.nats.spark.batch_id"] == 0
        assert span["attributes"]["messaging.batch.message_count"] == 30
    assert (read["attributes"]["messaging.nats.spark.first_sequence"],
            read["attributes"]["messaging.nats.spark.last_sequence"]) == (1, 30)


def test_spark_connect_builders_carry_the_context_for_the_jetstream_format_only(otel: Otel) -> None:
    """A Connect client's read and write builders are wrapped once imported (built here without a server)."""
    connect = pytest.importorskip("pyspark.sql.connect.readwriter", reason="install the connect extra")
    streaming = pytest.importorskip("pyspark.sql.connect.streaming.readwriter", reason="install the connect extra")
    with otel.tracer.start_as_current_span("job") as job:
        read = connect.DataFrameReader(None).format("jetstream")
        stream = streaming.DataStreamReader(None).format("JetStream")
        other = connect.DataFrameReader(None).format("json")
    context = job.get_span_context()
    expected = traceparent(context)
    assert read._options == {"jsclient.trace.traceparent": expected}
    assert stream._options == {"jsclient.trace.traceparent": expected}
    assert other._options == {}
