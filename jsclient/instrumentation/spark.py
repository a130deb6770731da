"""Spans of the ``jetstream`` Spark data source: one per partition read and per task write, on the executors,
children of the span that was current on the driver when the read or write was defined.

Where each piece runs (see :mod:`jsclient.spark.source`): the user's program
(the driver) only builds the read or write; the data source's ``reader()`` and
``writer()`` run in Python workers that the JVM starts, where no span of the
user's is current, and ``read()``/``write()`` in executor workers.  So the
trace context is taken in the user's program, when ``.format("jetstream")`` is
called on ``spark.read``, ``readStream``, ``df.write`` or ``writeStream``
(classic or Spark Connect; ``load(format=...)`` and the like go through it),
and added to the read's or write's options as ``jsclient.trace.<field>``
(``traceparent``, ``tracestate``: what the configured propagator writes);
:class:`~jsclient.spark.SparkOptions` keeps it in ``trace_context`` and never
takes it for a user's option.  Nothing is added while no span is current or
while jsclient is not instrumented, and nothing at all to other formats.

An executor's worker reports only where jsclient is instrumented in it: by
the user's OpenTelemetry setup there (``opentelemetry-instrument``, whose
``sitecustomize`` rides on ``PYTHONPATH`` into the workers Spark starts, or a
``sitecustomize`` of their own; see :doc:`/guides/spark`).  There each
partition read is a CONSUMER span ``receive <stream>`` and each task write a
PRODUCER span ``publish <stream>``, with the rows, payload bytes, sequence
range, partition and micro-batch; the cached connection's calls in the task
(JetStream API requests, a sink's publishes) are the span's children, and
count in the core metrics.  Spark ends its Python workers with ``os._exit``,
so each task flushes the worker's providers as its span ends (at most
:data:`FLUSH_MILLIS`); an exporter that fails is logged, never raised into the
task.

The modules wrapped here are heavy to import (pyspark, pyarrow): each is
wrapped when something imports it (:meth:`.Patches.when_imported`), so a
program that never uses Spark never loads them.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Generator, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import SpanKind

from .patches import Patches
from .telemetry import Operation, Telemetry, failed

if TYPE_CHECKING:
    from ..spark.options import SparkOptions
    from ..spark.sink import WritePlan
    from ..spark.source import SequenceRange


class _Writer(Protocol):
    """What a task's write wrapper reads of the data source's writers (a stream's, batch or streaming)."""

    opts: SparkOptions
    plan: WritePlan
    fields: list[str]

log = logging.getLogger("jsclient.instrumentation")

#: The data source's format name (:meth:`jsclient.spark.datasource.JetStreamDataSource.name`).
FORMAT = "jetstream"
#: Option keys under this prefix carry the driver's trace context (``jsclient.trace.traceparent``, ...); the
#: same as :attr:`jsclient.spark.SparkOptions.TRACE_PREFIX` (not imported from there: importing jsclient.spark
#: where Spark is never used would be waste).
TRACE_PREFIX = "jsclient.trace."
#: How long, at most, a task waits for its worker's spans and metrics to be exported as it ends.
FLUSH_MILLIS = 5_000
#: The modules of pyspark's read and write builders, and their classes whose ``format`` is wrapped.
_BUILDERS = {
    "pyspark.sql.readwriter": ("DataFrameReader", "DataFrameWriter"),
    "pyspark.sql.streaming.readwriter": ("DataStreamReader", "DataStreamWriter"),
    "pyspark.sql.connect.readwriter": ("DataFrameReader", "DataFrameWriter"),
    "pyspark.sql.connect.streaming.readwriter": ("DataStreamReader", "DataStreamWriter"),
}
#: The module of the data source's readers and writers (imported by an executor's worker as it unpickles them).
_TASKS = "jsclient.spark.source"


def install(patches: Patches, tel: Telemetry) -> None:
    for module, names in _BUILDERS.items():
        patches.when_imported(module, functools.partial(_builders, patches, names))
    patches.when_imported(_TASKS, functools.partial(_tasks, patches, tel))


def trace_options() -> dict[str, str]:
    """The options that carry the current trace context to a read's or write's executors.

    The instrumentation adds them by itself where ``.format("jetstream")`` is
    called; add them yourself where a read or write is built outside the span
    its tasks belong to: ``spark.read.format("jetstream").options(**trace_options())``.

    Returns:
        ``jsclient.trace.<field>`` to value for each field the configured propagator writes
        (``traceparent``, ``tracestate``); empty when no span is current.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {TRACE_PREFIX + key.lower(): value for key, value in carrier.items()}


# -- the driver: the user's read and write builders ---------------------------------------


def _builders(patches: Patches, names: tuple[str, ...], module: ModuleType) -> None:
    for name in names:
        builder = getattr(module, name, None)
        if isinstance(builder, type) and "format" in builder.__dict__:
            patches.wrap(builder, "format", _format)


def _format(original: Callable[..., Any]) -> Callable[..., Any]:
    def format(self: Any, source: str, *args: Any, **kwargs: Any) -> Any:
        builder = original(self, source, *args, **kwargs)
        if isinstance(source, str) and source.lower() == FORMAT:
            for key, value in trace_options().items():
                builder.option(key, value)
        return builder

    return format


# -- the executors: partition reads and task writes ---------------------------------------


def _tasks(patches: Patches, tel: Telemetry, source: ModuleType) -> None:
    ranges = source.SequenceRange
    for reader in (source.BatchReader, source.StreamReader):
        patches.wrap(reader, "read", lambda original: _read(tel, ranges, original))
    for writer in (source.BatchWriter, source.StreamWriter):
        patches.wrap(writer, "write", lambda original: _write(tel, original))


def _parent(opts: SparkOptions) -> otel_context.Context | None:
    """The driver's context the options carry (None: none came, and the span is a root)."""
    if not opts.trace_context:
        return None
    return propagate.extract(dict(opts.trace_context))


def _task_attributes() -> dict[str, Any]:
    """The Spark task's partition and attempt, and its micro-batch in a streaming query."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return {}
    attrs: dict[str, Any] = {
        "messaging.nats.spark.partition_id": ctx.partitionId(),
        "messaging.nats.spark.attempt": ctx.attemptNumber(),
    }
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    if batch is not None:
        attrs["messaging.nats.spark.batch_id"] = int(batch)
    return attrs


def _payload_bytes(batch: Any, column: str | None) -> int:
    """The bytes of a record batch's payload column (0 without one)."""
    if column is None or column not in batch.schema.names:
        return 0
    import pyarrow.compute as pc

    total = pc.sum(pc.binary_length(batch.column(column))).as_py()
    return int(total or 0)


def flush(tel: Telemetry) -> None:
    """Export what the worker's providers hold: Spark ends its Python workers without running exit handlers."""
    providers = (
        tel.tracer_provider or trace.get_tracer_provider(),
        tel.meter_provider or metrics.get_meter_provider(),
    )
    for provider in providers:
        force = getattr(provider, "force_flush", None)
        if force is None:
            continue
        try:
            force(timeout_millis=FLUSH_MILLIS)
        except Exception:
            log.exception("jsclient.instrumentation: flushing %s at the end of a Spark task failed", provider)


def _read(
    tel: Telemetry, ranges: type[SequenceRange], original: Callable[..., Generator[Any, None, None]]
) -> Callable[..., Iterator[Any]]:
    def read(self: Any, partition: Any) -> Iterator[Any]:
        batches = original(self, partition)
        if not isinstance(partition, ranges):  # Spark's stand-in for a read planned to nothing
            return batches
        return _traced_read(tel, self.opts, partition, batches)

    return read


def _traced_read(
    tel: Telemetry, opts: SparkOptions, part: SequenceRange, batches: Generator[Any, None, None]
) -> Iterator[Any]:
    """The partition's record batches, read inside its span (current while the read works, not while Spark
    consumes a batch), which ends with the read."""
    op = Operation.RECEIVE
    stream = opts.stream or ""
    extra = {
        "messaging.nats.stream": stream,
        "messaging.nats.spark.first_sequence": part.first,
        "messaging.nats.spark.last_sequence": part.last,
        **_task_attributes(),
    }
    span = tel.tracer.start_span(
        tel.name(op, stream), context=_parent(opts), kind=SpanKind.CONSUMER,
        attributes=tel.attributes(op, None, stream, extra=extra),
    )
    started = time.perf_counter()
    metric = tel.metric_attributes(op, stream)
    rows = size = 0

    def within() -> Any:
        return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    try:
        while True:
            with within():
                batch = next(batches, None)
            if batch is None:
                break
            rows += batch.num_rows
            size += _payload_bytes(batch, "data")
            yield batch
    except GeneratorExit:  # Spark stopped reading early (a limit): not an error
        raise
    except BaseException as exc:
        failed(span, exc)
        metric = {**metric, "error.type": type(exc).__qualname__}
        raise
    finally:
        try:
            with within():
                batches.close()  # the read's own cleanup (its consumer deleted), inside its span
        finally:
            span.set_attribute("messaging.batch.message_count", rows)
            span.set_attribute("messaging.nats.spark.payload_bytes", size)
            span.end()
            tel.consumed.add(rows, metric)
            tel.duration.record(time.perf_counter() - started, metric)
            flush(tel)


class _Counted:
    """The rows handed to a task's write, counted as they pass (record batches, or rows on older pyspark)."""

    def __init__(self, rows: Iterator[Any], column: str | None) -> None:
        self.rows = rows
        self.column = column
        self.count = 0
        self.bytes = 0

    def __iter__(self) -> Iterator[Any]:
        for item in self.rows:
            num_rows = getattr(item, "num_rows", None)
            if num_rows is None:
                self.count += 1
            else:
                self.count += num_rows
                self.bytes += _payload_bytes(item, self.column)
            yield item


def _write(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    def write(self: _Writer, iterator: Iterator[Any]) -> Any:
        op = Operation.PUBLISH
        stream = self.plan.stream
        extra = {**_task_attributes(), "messaging.nats.spark.sink_mode": self.plan.mode.value}
        if stream:
            extra["messaging.nats.stream"] = stream
        attrs = tel.attributes(op, None, stream or "", extra=extra)
        if not stream:  # rows name their subjects, and no stream was named
            del attrs["messaging.destination.name"]
        column = next((c for c in ("data", "value") if c in self.fields), None)
        counted = _Counted(iterator, column)
        try:
            with tel.span(
                tel.name(op, stream) if stream else op.op_name, SpanKind.PRODUCER, attrs, context=_parent(self.opts)
            ) as span:
                try:
                    commit = original(self, iter(counted))
                finally:
                    span.set_attribute("messaging.batch.message_count", counted.count)
                    span.set_attribute("messaging.nats.spark.payload_bytes", counted.bytes)
                for field in ("skipped", "duplicates"):
                    span.set_attribute(f"messaging.nats.spark.{field}", getattr(commit, field, 0))
                return commit
        finally:
            flush(tel)

    return write
