"""The ``jetstream`` PySpark data source: batch read, streaming read, batch and streaming write.

Where each piece runs (see SPARK-NOTES): ``schema``/``reader``/``partitions``
in a driver-side Python worker; ``read``/``write`` in executor workers forked
from ``pyspark.daemon`` (each takes the per-process connection from
:mod:`jsclient.spark.connections`); a streaming reader's offset methods in one
long-lived driver-side worker.  Every object Spark pickles here holds only
:class:`SparkOptions` and plain values.

Offsets are stream sequences (``{"seq": next_to_read}``) kept by Spark's
checkpoint; nothing is acked on the server, so a replay reads the same
messages.  ``commit()`` does nothing on purpose: Spark does not call it
reliably.  Writes wait for every publish ack before a task returns and give
each row a deterministic ``Nats-Msg-Id`` (unless a ``msg_id`` column gives
one), so a retried task or replayed micro-batch is deduplicated by the stream.
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

try:  # Spark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older Spark: no read limits, no AvailableNow
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

from ..errors import InvalidArgumentError, JetStreamError, MessageNotFoundError
from .connections import connection
from .options import SparkOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from ..jetstream.context import JetStream
    from ..jetstream.direct import StoredMessage

SCHEMA = (
    "subject string, data binary, headers map<string,array<string>>, stream string, seq long, timestamp timestamp"
)


class DataLossError(JetStreamError):
    """The stream no longer holds messages a query still needs (failOnDataLoss)."""


class SequenceRange(InputPartition):
    """Stream sequences first..last (inclusive) for one Spark task."""

    def __init__(self, index: int, first: int, last: int) -> None:
        super().__init__(index)
        self.first = first
        self.last = last


def split_range(first: int, last: int, parts: int) -> list[SequenceRange]:
    if last < first:
        return []
    total = last - first + 1
    parts = max(1, min(parts, total))
    size = math.ceil(total / parts)
    return [SequenceRange(i, lo, min(last, lo + size - 1)) for i, lo in enumerate(range(first, last + 1, size))]


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching: ``*`` one token, ``>`` the rest."""
    p_tokens = pattern.split(".")
    s_tokens = subject.split(".")
    for i, token in enumerate(p_tokens):
        if token == ">":
            return len(s_tokens) > i
        if i >= len(s_tokens) or (token != "*" and token != s_tokens[i]):
            return False
    return len(p_tokens) == len(s_tokens)


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("subject", pa.string()),
            ("data", pa.binary()),
            ("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
            ("stream", pa.string()),
            ("seq", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def to_arrow(rows: Sequence[StoredMessage]) -> pa.RecordBatch:
    import pyarrow as pa

    headers = [
        [(name, m.headers.get_all(name)) for name in m.headers] if len(m.headers) else None for m in rows
    ]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.subject for m in rows], pa.string()),
            pa.array([m.data for m in rows], pa.binary()),
            pa.array(headers, pa.map_(pa.string(), pa.list_(pa.string()))),
            pa.array([m.stream for m in rows], pa.string()),
            pa.array([m.seq for m in rows], pa.int64()),
            pa.array([m.time for m in rows], pa.timestamp("us", tz="UTC")),
        ],
        schema=_arrow_schema(),
    )


def read_range(opts: SparkOptions, first: int, last: int) -> Iterator[pa.RecordBatch]:
    """Sequences first..last matching the subject filter, as Arrow record batches (executor side)."""
    stream = opts.require_stream()
    js = connection(opts).jetstream(timeout=max(30.0, opts.ack_timeout))
    info = js.stream_info(stream)
    if not info.config.allow_direct:
        yield from _read_ordered(js, opts, first, last)
        return
    filters = opts.subjects or (">",)
    server_filter = filters[0] if len(filters) == 1 else ">"
    seq = first
    while seq <= last:
        rows: list[StoredMessage] = []
        batch = js.direct_get_batch(stream, server_filter, batch=min(opts.batch_size, last - seq + 1), seq=seq)
        newest = None
        for msg in batch:
            if msg.seq > last:
                break
            newest = msg.seq
            if len(filters) == 1 or any(subject_matches(f, msg.subject) for f in filters):
                rows.append(msg)
        if rows:
            yield to_arrow(rows)
        if newest is None or not batch.num_pending:
            return
        seq = newest + 1


def _read_ordered(js: JetStream, opts: SparkOptions, first: int, last: int) -> Iterator[pa.RecordBatch]:
    """Fallback for streams without allow_direct: an ordered consumer over the range."""
    from ..jetstream.api import ConsumerConfig
    from ..jetstream.direct import StoredMessage
    from ..message import Msg

    stream = opts.require_stream()
    cfg = ConsumerConfig(deliver_policy="by_start_sequence", opt_start_seq=first)
    if opts.subjects:
        cfg = ConsumerConfig(
            deliver_policy="by_start_sequence", opt_start_seq=first, filter_subjects=list(opts.subjects)
        )
    sub = js.subscribe(stream=stream, ordered=True, config=cfg)
    rows: list[StoredMessage] = []
    try:
        while True:
            try:
                msg = sub.next_msg(timeout=5)
            except TimeoutError:
                break
            meta = msg.metadata
            if meta.sequence.stream > last:
                break
            headers = msg.headers.copy()
            for name, value in (
                ("Nats-Stream", stream),
                ("Nats-Subject", msg.subject),
                ("Nats-Sequence", str(meta.sequence.stream)),
                ("Nats-Time-Stamp", meta.timestamp.isoformat()),
            ):
                headers[name] = value
            rows.append(StoredMessage(Msg.make(msg.subject, msg.data, header=headers.encode())))
            if len(rows) >= opts.batch_size:
                yield to_arrow(rows)
                rows = []
            if meta.sequence.stream >= last or meta.num_pending == 0:
                break
        if rows:
            yield to_arrow(rows)
    finally:
        sub.unsubscribe()


def _resolve_time(js: JetStream, stream: str, when: Any) -> int | None:
    """The first sequence stored at or after ``when`` (None if there is none)."""
    try:
        return js.get_msg(stream, start_time=when).seq
    except MessageNotFoundError:
        return None


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = SparkOptions.parse(options)

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return BatchReader(self.parsed)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return StreamReader(self.parsed)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(self.parsed, schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(self.parsed, schema)


class BatchReader(DataSourceReader):
    def __init__(self, opts: SparkOptions) -> None:
        self.opts = opts
        opts.require_stream()

    def partitions(self) -> list[SequenceRange]:
        opts = self.opts
        stream = opts.require_stream()
        js = connection(opts).jetstream(timeout=30)
        state = js.stream_info(stream).state
        first = max(state.first_seq, 1)
        last = state.last_seq
        if opts.starting_sequence is not None:
            first = max(first, opts.starting_sequence)
        elif opts.starting_time is not None:
            resolved = _resolve_time(js, stream, opts.starting_time)
            first = resolved if resolved is not None else last + 1
        if opts.ending_sequence is not None:
            last = min(last, opts.ending_sequence)
        elif opts.ending_time is not None:
            after = _resolve_time(js, stream, opts.ending_time)
            if after is not None:
                last = min(last, after - 1)
        return split_range(first, last, opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SequenceRange)
        yield from read_range(self.opts, partition.first, partition.last)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SparkOptions) -> None:
        self.opts = opts
        opts.require_stream()
        self._target: int | None = None

    def _js(self) -> JetStream:
        return connection(self.opts).jetstream(timeout=30)

    def initialOffset(self) -> dict[str, int]:
        opts = self.opts
        stream = opts.require_stream()
        js = self._js()
        state = js.stream_info(stream).state
        spec = opts.starting_offsets.strip().lower()
        if spec == "earliest":
            return {"seq": max(state.first_seq, 1)}
        if spec == "latest":
            return {"seq": state.last_seq + 1}
        if spec.isdigit():
            return {"seq": max(int(spec), 1)}
        from .options import _time

        resolved = _resolve_time(js, stream, _time("startingOffsets", opts.starting_offsets))
        return {"seq": resolved if resolved is not None else state.last_seq + 1}

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_messages_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        state = self._js().stream_info(self.opts.require_stream()).state
        end = state.last_seq + 1
        if self._target is not None:
            end = min(end, self._target)
        cap = self.opts.max_messages_per_trigger
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap = limit.max_rows
        elif ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):
            cap = None
        if start is not None and cap:
            end = min(end, start["seq"] + cap)
        if start is not None:
            end = max(end, start["seq"])
        return {"seq": end}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._js().stream_info(self.opts.require_stream()).state.last_seq + 1

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[SequenceRange]:
        first, last = start["seq"], end["seq"] - 1
        if last < first:
            return []
        state = self._js().stream_info(self.opts.require_stream()).state
        if first < state.first_seq:
            if self.opts.fail_on_data_loss:
                raise DataLossError(
                    f"stream {self.opts.stream!r} no longer holds sequences {first}..{state.first_seq - 1} "
                    "that this query has not read (purged or expired); set failOnDataLoss=false to skip them"
                )
            first = state.first_seq
        return split_range(first, last, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SequenceRange)
        yield from read_range(self.opts, partition.first, partition.last)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, and nothing is acked on the server."""


class PublishedCommit(WriterCommitMessage):
    def __init__(self, published: int, duplicates: int) -> None:
        self.published = published
        self.duplicates = duplicates


def publish_rows(
    opts: SparkOptions, field_names: Sequence[str], rows: Iterator[Any], id_prefix: str
) -> PublishedCommit:
    """Publish every row, then wait for every ack (executor side); raises on the first failure."""
    subject_col = "subject" in field_names
    if not subject_col and not opts.subject:
        raise InvalidArgumentError("writing to jetstream needs a subject column or the option subject")
    has_headers = "headers" in field_names
    has_id = "msg_id" in field_names
    js = connection(opts).jetstream(timeout=opts.ack_timeout, publish_async_max_pending=opts.max_pending)
    in_flight: deque[Any] = deque()
    published = duplicates = 0

    def settle(fut: Any) -> None:
        nonlocal published, duplicates
        ack = fut.result(timeout=opts.ack_timeout + 5)
        published += 1
        duplicates += bool(ack.duplicate)

    for index, row in enumerate(rows):
        subject = str(row["subject"] if subject_col else opts.subject)
        data = row["data"]
        if isinstance(data, str):
            data = data.encode()
        elif data is None:
            data = b""
        headers = None
        if has_headers and row["headers"]:
            headers = {k: (list(v) if isinstance(v, (list, tuple)) else str(v)) for k, v in row["headers"].items()}
        msg_id = (row["msg_id"] if has_id else None) or f"{id_prefix}-{index}"
        in_flight.append(js.publish_async(subject, bytes(data), msg_id=msg_id, headers=headers))
        while in_flight and (in_flight[0].done() or len(in_flight) > 2 * opts.max_pending):
            settle(in_flight.popleft())
    while in_flight:
        settle(in_flight.popleft())
    return PublishedCommit(published, duplicates)


class BatchWriter(DataSourceWriter):
    def __init__(self, opts: SparkOptions, schema: Any) -> None:
        self.opts = opts
        self.fields = [f.name for f in schema.fields]
        # Made once on the driver and pickled to every task and retry: the same on all attempts.
        self.write_id = uuid.uuid4().hex

    def write(self, rows: Iterator[Any]) -> PublishedCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        return publish_rows(self.opts, self.fields, rows, f"{self.write_id}-{partition}")


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: SparkOptions, schema: Any) -> None:
        self.opts = opts
        self.fields = [f.name for f in schema.fields]

    def write(self, rows: Iterator[Any]) -> PublishedCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        partition = ctx.partitionId() if ctx is not None else 0
        return publish_rows(self.opts, self.fields, rows, f"{query or 'query'}-{batch or 0}-{partition}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every message was acked before its task returned."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: retries are deduplicated by Nats-Msg-Id."""
