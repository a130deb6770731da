"""The ``jetstream`` PySpark data source: batch read, streaming read, batch and streaming write.

Where each piece runs (see SPARK-NOTES): ``schema``/``reader``/``writer``/
``partitions`` in a driver-side Python worker; ``read``/``write`` in executor
workers forked from ``pyspark.daemon`` (each takes the per-process
connection from :mod:`jsclient.spark.connections`); a streaming reader's
offset methods in one long-lived driver-side worker.  Every object Spark
pickles here holds only :class:`SparkOptions` and plain values.

Offsets are stream sequences (``{"seq": next_to_read, "created": ...}``,
with the stream's creation time so that a stream deleted and made again is
noticed) kept by Spark's checkpoint; nothing is acked on the server, so a
replay reads the same messages.  ``commit()`` does nothing on purpose: Spark
does not call it reliably.  Each planned range carries how many messages
the stream held in it when it was planned; a read that finds fewer is data
loss (``failOnDataLoss``).

A task reads its range through a consumer of its own (ack policy none, in
memory, one replica, deleted at the end, and by the server after
CONSUMER_IDLE should the task die), pulled in bulk: a third of the server's
work per message of batched direct gets.  Only streams that keep messages by
interest or as a work queue are read by direct get (where a consumer would
count as interest, or take the work), so they need allow_direct: without it
such a read is refused when it is planned (:func:`check_readable`), before
any task runs; from a server before 2.11, which has no batched direct get,
one message per request.  Either way the
replies are decoded to Arrow in bulk (:mod:`.arrow`; a pull's runs of
plain messages are cut from its bytes there too); writes go through
:mod:`.sink`.

The server applies the read's subject filters: several at once where they
do not overlap (a consumer's ``filter_subjects``, or direct gets asked one
filter after another), else one filter covering them, narrowed here.  A
batch read's filters from Spark narrow its options first (``pushFilters``,
:mod:`.pushdown`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
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

try:  # Spark >= 4.1: record batches straight to write(), no Row per row
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - older Spark: rows, turned into record batches here
    DataSourceArrowWriter = DataSourceWriter  # type: ignore[assignment,misc]
    DataSourceStreamArrowWriter = DataSourceStreamWriter  # type: ignore[assignment,misc]

from ..errors import (
    DataLossError,
    DirectGetDisabledError,
    Error,
    InvalidArgumentError,
    MessageNotFoundError,
    NoRespondersError,
)
from ..jetstream import features
from ..jetstream.api import ConsumerConfig, Duration
from ..jetstream.direct import count_matching, no_direct
from . import sink
from .arrow import cut_deliveries, parts_to_batches, replies_to_batch, subject_filter_regex
from .connections import bulk_reader, connection
from .options import SparkOptions, option_time
from .pushdown import covering, disjoint, distinct, push_stream_filters

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.datasource import Filter

    from ..jetstream.api import StreamInfo
    from ..jetstream.context import JetStream

    Decoded = tuple[pa.RecordBatch, int, pa.Array]

log = logging.getLogger("jsclient.spark")

#: Bytes one bulk request asks for at most (the messages: batchSize, 100,000 unless set).  The server
#: counts subjects, stored headers and payloads only; on the wire a reply is up to three times that (its
#: delivery headers and the protocol line), and two requests may be answering at once: this keeps them
#: well inside the server's per-client pending limit (64 MiB), past which it drops replies.
BULK_BYTES = 4 << 20
#: Seconds without a pull after which the server removes a task's consumer (a task that died before deleting it).
CONSUMER_IDLE = 300.0
#: At most this many subject filters go to the server (a consumer's filter_subjects, or direct gets one filter after
#: another, each counted when planned); more are read as one filter covering them and narrowed on the client.
MAX_SERVER_FILTERS = 100


class SequenceRange(InputPartition):
    """Stream sequences first..last (inclusive) for one Spark task.

    ``expected``: how many messages matching the server-side filter the
    stream held in the range when it was planned (None where that cannot be
    asked: streams without direct get).  ``pull``: read through a consumer
    (else by direct get).
    """

    def __init__(self, index: int, first: int, last: int, expected: int | None = None, *, pull: bool = True) -> None:
        super().__init__(index)
        self.first = first
        self.last = last
        self.expected = expected
        self.pull = pull


def split_range(first: int, last: int, parts: int) -> list[SequenceRange]:
    if last < first:
        return []
    total = last - first + 1
    parts = max(1, min(parts, total))
    size = math.ceil(total / parts)
    return [SequenceRange(i, lo, min(last, lo + size - 1)) for i, lo in enumerate(range(first, last + 1, size))]


def server_filters(opts: SparkOptions) -> tuple[tuple[str, ...], str | None]:
    """The subject filters the server applies, and the pattern the client keeps rows to after (None: none needed).

    Several filters go to the server only when they do not overlap (a
    consumer refuses overlapping ``filter_subjects``, and direct gets asked
    filter by filter would read a message twice) and are not too many;
    others are read as one filter that covers them, and narrowed here.
    """
    subjects = distinct(opts.subjects)
    if not subjects:
        return (">",), None
    if len(subjects) <= MAX_SERVER_FILTERS and disjoint(subjects):
        return subjects, None
    return (covering(subjects),), subject_filter_regex(subjects)


def _count(js: JetStream, stream: str, subjects: tuple[str, ...], seq: int) -> int | None:
    """How many stored messages from ``seq`` on match one of the (disjoint) filters; None where the server cannot
    count."""
    total = 0
    for subject in subjects:
        found = count_matching(js, stream, subject, seq)
        if found is None:
            return None
        total += found
    return total


def plan_ranges(js: JetStream, opts: SparkOptions, first: int, last: int, info: StreamInfo) -> list[SequenceRange]:
    """Split first..last into tasks, each knowing how many messages the stream holds in it now, and how to read.

    The counts come from the server's pending counts at each boundary, asked
    lowest first: a message stored meanwhile can only lower an expectation,
    so a count never reports loss that did not happen.  A server before 2.11
    cannot count (its direct gets carry no pending count): its ranges expect
    nothing, as on a stream without direct get.
    """
    check_readable(opts, info)
    ranges = split_range(first, last, opts.min_partitions)
    direct = info.config.allow_direct is True
    for r in ranges:
        r.pull = not direct or info.config.retention not in ("interest", "workqueue")
    if not ranges or not direct:
        return ranges
    stream, (subjects, _) = opts.require_stream(), server_filters(opts)
    counts = [_count(js, stream, subjects, r.first) for r in ranges]
    counts.append(_count(js, stream, subjects, last + 1))
    known = [c for c in counts if c is not None]
    if len(known) != len(counts):
        return ranges
    for i, r in enumerate(ranges):
        r.expected = max(0, known[i] - known[i + 1])
    return ranges


def check_readable(opts: SparkOptions, info: StreamInfo) -> None:
    """Refuse a stream that only direct get may read and that does not allow it (driver side, before any task).

    A consumer of the reader's own would count as interest on an interest
    stream (what it is delivered may then be removed) and would take the work
    on a work-queue stream, so those are read by direct get alone.
    """
    retention = info.config.retention
    if retention in ("interest", "workqueue") and info.config.allow_direct is not True:
        kind = "interest" if retention == "interest" else "work queue"
        raise DirectGetDisabledError(
            503, 0,
            f"the jetstream source reads stream {opts.require_stream()!r} ({kind} retention) by direct get only, "
            "since a consumer of its own would disturb it, and the stream does not allow direct get: "
            "set allow_direct=True on the stream (js.update_stream)",
        )


def data_lost(opts: SparkOptions, what: str) -> None:
    """Raise (failOnDataLoss=true) or log what was skipped."""
    if opts.fail_on_data_loss:
        raise DataLossError(f"{what}; set failOnDataLoss=false to skip what is gone")
    log.warning("jetstream source: data loss, skipped: %s", what)


def read_range(opts: SparkOptions, part: SequenceRange) -> Iterator[pa.RecordBatch]:
    """The range's messages (matching the subject filters) as Arrow record batches (executor side)."""
    stream = opts.require_stream()
    js = connection(opts).jetstream(timeout=max(30.0, opts.ack_timeout))
    if part.expected is None and js.stream_info(stream).state.first_seq > part.first:
        data_lost(opts, f"stream {stream!r} no longer holds sequence {part.first}, planned to be read")
    subjects, regex = server_filters(opts)
    read = 0
    seqs: list[pa.Array] = []
    for batch, in_range, seq in (_pulled if part.pull else _got)(js, opts, part, subjects, regex):
        read += in_range
        seqs.append(seq)
        if batch.num_rows:
            yield batch
    if part.expected is not None and read < part.expected:
        _check_missing(js, opts, part, read, seqs)


def _pulled(
    js: JetStream, opts: SparkOptions, part: SequenceRange, subjects: tuple[str, ...], regex: str | None
) -> Iterator[Decoded]:
    """The range through a consumer of the task's own (filtered by ``subjects``), removed at the end."""
    stream = opts.require_stream()
    name = f"jsclient_spark_{secrets.token_hex(8)}"
    config = ConsumerConfig(
        name=name, deliver_policy="by_start_sequence", opt_start_seq=part.first, ack_policy="none",
        mem_storage=True, num_replicas=1, inactive_threshold=Duration(CONSUMER_IDLE),
    )
    if subjects == (">",):
        filtered: dict[str, Any] = {}
    elif len(subjects) == 1:
        filtered = {"filter_subject": subjects[0]}
    else:
        filtered = {"filter_subjects": list(subjects)}
    js.add_consumer(stream, config, **filtered)
    try:
        with bulk_reader(opts) as reader:
            for parts in reader.pull_runs(
                stream, name, part.last, batch=_batch(opts, part), max_bytes=BULK_BYTES, timeout=js.timeout,
                cut=cut_deliveries,
            ):
                yield from parts_to_batches(parts, stream, part.last, regex)
    finally:
        with contextlib.suppress(Error):
            js.delete_consumer(stream, name)


def _got(
    js: JetStream, opts: SparkOptions, part: SequenceRange, subjects: tuple[str, ...], regex: str | None
) -> Iterator[Decoded]:
    """The range by batched direct gets (streams a consumer would disturb), one (disjoint) subject filter after
    another: a direct get takes one."""
    stream = opts.require_stream()
    with bulk_reader(opts) as reader:
        try:
            for subject in subjects:
                for headers, payloads in reader.read(
                    stream, subject, part.first, part.last,
                    batch=_batch(opts, part), max_bytes=BULK_BYTES, timeout=js.timeout,
                ):
                    yield replies_to_batch(headers, payloads, stream, part.last, regex)
        except NoRespondersError:
            raise no_direct(js, stream) from None


def _batch(opts: SparkOptions, part: SequenceRange) -> int:
    """Messages one request asks for: at most the range's size, so that the request that runs past the range's
    end (the server does not know it) brings no more than that."""
    return min(opts.batch_size, part.last - part.first + 1)


def _check_missing(js: JetStream, opts: SparkOptions, part: SequenceRange, read: int, seqs: list[pa.Array]) -> None:
    """Fewer messages than planned: loss, unless messages deleted one by one (which the stream lists) explain it.

    Without a subject filter the missing sequences are known exactly; with
    filters, a deleted message may or may not have matched, so deletes in the
    range explain up to their number.
    """
    stream = opts.require_stream()
    state = js.stream_info(stream, deleted_details=True).state
    deleted = {d for d in state.deleted or () if part.first <= d <= part.last and d >= state.first_seq}
    missing = part.expected - read  # type: ignore[operator]
    if server_filters(opts)[0] == (">",):
        got: set[int] = set()
        for chunk in seqs:
            got.update(chunk.to_pylist())
        gone = sorted(s for s in range(part.first, part.last + 1) if s not in got and s not in deleted)
        if not gone:
            return
        what = f"sequences {_ranges(gone)}"
        missing = len(gone)
    elif missing <= len(deleted):
        return
    else:
        missing -= len(deleted)
        what = f"{missing} of them"
    data_lost(
        opts,
        f"stream {stream!r} held {part.expected} messages in sequences {part.first}..{part.last} when they were "
        f"planned, and {read} were left to read: {what} purged or expired meanwhile",
    )


def _ranges(seqs: list[int]) -> str:
    """1,2,3,7 -> '1..3, 7' (sorted input)."""
    out: list[str] = []
    start = prev = seqs[0]
    for s in [*seqs[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(f"{start}..{prev}" if prev != start else str(start))
        if s is not None:
            start = prev = s
    return ", ".join(out)


def _resolve_time(js: JetStream, stream: str, when: Any) -> int | None:
    """The first sequence stored at or after ``when`` (None if there is none)."""
    try:
        return js.get_msg(stream, start_time=when).seq
    except MessageNotFoundError:
        return None


def check_batch_options(opts: SparkOptions) -> None:
    """Refuse the streaming-only options on a batch read (driver side, when the read is planned)."""
    spec = opts.starting_offsets
    if spec is not None and spec.strip().lower() != "earliest":
        raise InvalidArgumentError(
            f"startingOffsets={spec} applies to streaming reads; a batch read starts at startingSequence or "
            "startingTime (startingOffsets=earliest, the default start, is accepted)"
        )
    if spec is not None and (opts.starting_sequence is not None or opts.starting_time is not None):
        given = "startingSequence" if opts.starting_sequence is not None else "startingTime"
        raise InvalidArgumentError(f"set startingOffsets=earliest or {given}, not both")
    if opts.max_messages_per_trigger is not None:
        raise InvalidArgumentError(
            "maxMessagesPerTrigger applies to streaming reads; a batch read reads its whole range "
            "(end it sooner with endingSequence or endingTime)"
        )


def check_stream_options(opts: SparkOptions) -> None:
    """Refuse the batch-only options on a streaming read, and a bad startingOffsets (driver side, at the start)."""
    spec = (opts.starting_offsets or "earliest").strip().lower()
    if spec not in ("earliest", "latest") and not spec.isdigit():
        try:
            option_time("startingOffsets", opts.starting_offsets or "")
        except InvalidArgumentError:
            raise InvalidArgumentError(
                f"option startingOffsets must be earliest, latest, a sequence or an ISO 8601 time, "
                f"not {opts.starting_offsets!r}"
            ) from None
    starts = ("a streaming read starts at startingOffsets (earliest, latest, a sequence or an ISO 8601 time), "
              "and a restarted query at its checkpoint")
    ends = ("a streaming read has no end: use a batch read, or Trigger.AvailableNow to stop at what the stream "
            "holds when the query starts")
    for value, name, instead in (
        (opts.starting_sequence, "startingSequence", starts),
        (opts.starting_time, "startingTime", starts),
        (opts.ending_sequence, "endingSequence", ends),
        (opts.ending_time, "endingTime", ends),
    ):
        if value is not None:
            raise InvalidArgumentError(f"{name} applies to batch reads; {instead}")


class BatchReader(DataSourceReader):
    """A batch read of a stream; Spark 4.1+ pushes its filters to :meth:`pushFilters` before planning it."""

    def __init__(self, opts: SparkOptions) -> None:
        self.opts = opts
        opts.require_stream()
        check_batch_options(opts)

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        """Read only what the filters Spark pushes let through, where the server can tell (driver side, before
        :meth:`partitions`, on the same object); what is left is Spark's to apply.

        Which filters narrow the read: :func:`.pushdown.push_stream_filters`.
        Time filters only where the server can look a time up (2.11+): the
        server is asked only when there is one.
        """
        times = any(getattr(f, "attribute", None) == ("timestamp",) for f in filters) and features.supports(
            connection(self.opts).server_info, features.START_TIME_GET
        )
        self.opts, kept = push_stream_filters(self.opts, filters, times=times)
        log.info(
            "jetstream source, stream %r: filters applied on the server: %s; left to Spark: %s; reading %s",
            self.opts.stream, [f for f in filters if not any(f is k for k in kept)] or "none", kept or "none",
            _describe_read(self.opts),
        )
        return kept

    def partitions(self) -> list[SequenceRange]:
        opts = self.opts
        stream = opts.require_stream()
        js = connection(opts).jetstream(timeout=30)
        info = js.stream_info(stream)
        state = info.state
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
        return plan_ranges(js, opts, first, last, info)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, SequenceRange):  # else Spark's stand-in for a read planned to no range
            yield from read_range(self.opts, partition)


class UnpushedBatchReader(BatchReader):
    """A batch read that pushes no filter, for sessions with ``spark.sql.python.filterPushdown.enabled`` false:
    Spark fails a read whose reader overrides pushFilters there.  (Before pyspark 4.1 nothing pushes.)"""

    pushFilters = getattr(DataSourceReader, "pushFilters", BatchReader.pushFilters)


def _describe_read(opts: SparkOptions) -> str:
    """What a batch read's options read, for the log: subjects, sequences and times."""
    if opts.ending_sequence == 0:
        return "nothing (no message passes the filters)"
    parts = [f"subjects {', '.join(opts.subjects)}" if opts.subjects else "every subject"]
    if opts.starting_sequence is not None or opts.ending_sequence is not None:
        parts.append(f"sequences {opts.starting_sequence or 1}..{opts.ending_sequence or 'last'}")
    if opts.starting_time is not None:
        parts.append(f"from the first message stored at or after {opts.starting_time.isoformat()}")
    if opts.ending_time is not None:
        parts.append(f"up to the last before {opts.ending_time.isoformat()}")
    return ", ".join(parts)


def _created(info: Any) -> str:
    return info.created.isoformat() if info.created is not None else ""


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SparkOptions) -> None:
        self.opts = opts
        opts.require_stream()
        check_stream_options(opts)
        self._target: int | None = None

    def _js(self) -> JetStream:
        return connection(self.opts).jetstream(timeout=30)

    def initialOffset(self) -> dict[str, Any]:
        opts = self.opts
        stream = opts.require_stream()
        js = self._js()
        info = js.stream_info(stream)
        check_readable(opts, info)
        state = info.state
        spec = (opts.starting_offsets or "earliest").strip().lower()
        if spec == "earliest":
            seq = max(state.first_seq, 1)
        elif spec == "latest":
            seq = state.last_seq + 1
        elif spec.isdigit():
            seq = max(int(spec), 1)
        else:
            resolved = _resolve_time(js, stream, option_time("startingOffsets", opts.starting_offsets or ""))
            seq = resolved if resolved is not None else state.last_seq + 1
        return {"seq": seq, "created": _created(info)}

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_messages_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def _recreated(self, start: dict[str, Any], info: Any) -> bool:
        """Whether the stream at ``start`` is not the one there now (deleted and made again)."""
        before = start.get("created")
        if before and _created(info) and before != _created(info):
            return True
        return bool(info.state.last_seq + 1 < start["seq"])  # sequences only grow in one stream

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        stream = self.opts.require_stream()
        info = self._js().stream_info(stream)
        check_readable(self.opts, info)
        end = info.state.last_seq + 1
        if start is not None and self._recreated(start, info):
            data_lost(
                self.opts,
                f"stream {stream!r} was deleted and created again (or emptied) after this query read up to "
                f"sequence {start['seq'] - 1}: the messages after that point are gone",
            )
            start = None  # failOnDataLoss=false: go on with the new stream from its start
        if self._target is not None:
            end = min(end, self._target)
        cap = self.opts.max_messages_per_trigger
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            cap = limit.max_rows
        elif ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable):
            cap = None
        first = start["seq"] if start is not None else max(info.state.first_seq, 1)
        if cap:
            end = min(end, first + cap)
        if start is not None:
            end = max(end, first)
        return {"seq": end, "created": _created(info)}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._js().stream_info(self.opts.require_stream()).state.last_seq + 1

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[SequenceRange]:
        stream = self.opts.require_stream()
        js = self._js()
        info = js.stream_info(stream)
        first, last = start["seq"], end["seq"] - 1
        if start.get("created") != end.get("created") and start.get("created") and end.get("created"):
            first = max(info.state.first_seq, 1)  # the stream was made again (loss already reported)
        if last < first:
            return []
        if first < info.state.first_seq:
            data_lost(
                self.opts,
                f"stream {stream!r} no longer holds sequences {first}..{info.state.first_seq - 1} "
                "that this query has not read (purged or expired)",
            )
            first = info.state.first_seq
        return plan_ranges(js, self.opts, first, last, info)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SequenceRange)
        yield from read_range(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, and nothing is acked on the server."""


def _task() -> tuple[Any, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx, ctx.partitionId() if ctx is not None else 0


def _batches(it: Iterator[Any], fields: list[str]) -> Iterator[pa.RecordBatch]:
    """Record batches from an Arrow writer's iterator, or from rows where pyspark has no Arrow writers."""
    if DataSourceArrowWriter is DataSourceWriter:  # pragma: no cover - pyspark without Arrow writers
        return sink.rows_to_batches(it, fields)
    return it


def _markers(messages: list[WriterCommitMessage | None]) -> list[str | None]:
    return [m.marker for m in messages if isinstance(m, sink.PublishedCommit)]


class BatchWriter(DataSourceArrowWriter):
    """A batch write to a stream; a bucket's write (:mod:`.buckets`) is this with its plan and row shape."""

    def __init__(
        self, opts: SparkOptions, schema: Any, *, plan: sink.WritePlan | None = None,
        shape: sink.RowShape | None = None,
    ) -> None:
        self.opts = opts
        self.fields = [f.name for f in schema.fields]
        self.plan = plan or sink.plan_write(opts)
        self.shape = shape
        # Made once on the driver and pickled to every task and retry: the same on all attempts.
        self.write_id = sink.new_write_id()

    def write(self, iterator: Iterator[Any]) -> sink.PublishedCommit:
        _, partition = _task()
        return sink.write_batches(
            self.opts, self.plan, _batches(iterator, self.fields), write=self.write_id, batch_id=0,
            partition=partition, shape=self.shape,
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task succeeded: trim each task's markers to the last one.

        Not to none: a zombie or speculative attempt that read "no marker"
        before anything was stored expects the marker subject to be empty, and
        would commit its rows a second time onto a subject purged to nothing.
        """
        sink.cleanup_markers(self.opts, self.plan, _markers(messages), keep=1)


class StreamWriter(DataSourceStreamArrowWriter):
    """A streaming write to a stream; a bucket's (:mod:`.buckets`) is this with its plan and row shape."""

    def __init__(
        self, opts: SparkOptions, schema: Any, *, plan: sink.WritePlan | None = None,
        shape: sink.RowShape | None = None,
    ) -> None:
        self.opts = opts
        self.fields = [f.name for f in schema.fields]
        self.plan = plan or sink.plan_write(opts)
        self.shape = shape

    def write(self, iterator: Iterator[Any]) -> sink.PublishedCommit:
        ctx, partition = _task()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        return sink.write_batches(
            self.opts, self.plan, _batches(iterator, self.fields), write=query or "query",
            batch_id=int(batch or 0), partition=partition, shape=self.shape,
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task of the micro-batch succeeded: keep only each partition's last marker."""
        sink.cleanup_markers(self.opts, self.plan, _markers(messages), keep=1)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: a replay of this micro-batch starts from the markers (or the message ids)."""


PublishedCommit = sink.PublishedCommit
