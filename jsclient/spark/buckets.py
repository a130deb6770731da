"""Key-value buckets as tables (option ``bucket``): short policies over the stream source and sink.

A bucket is the stream ``KV_<bucket>``, whose subjects are
``$KV.<bucket>.<key>`` and whose sequences are the revisions (ADR-8), so:

batch read (:class:`BucketReader`)
    The driver lists the keys, names only, from the server's subject index
    (``stream_info`` with a subjects filter), and splits them, sorted, into
    ``minPartitions`` key ranges.  Each task reads its keys' last values by
    multi-subject direct gets (ADR-31, server 2.11+: up to 1,024 keys a
    request, :meth:`~jsclient.jetstream.bulk.BulkReader.last_values`), at
    ``asOfRevision`` when it is set.  The values go from the server to the
    tasks, never through the driver.  From a 2.10 server, one direct get
    per key (and ``asOfRevision`` is refused).
streaming read (:func:`change_reader`)
    The stream reader over the bucket's stream, filtered to its keys: one
    row per change, offsets are revisions; each record batch is reshaped.
writes (:class:`BucketWriter`, :class:`BucketStreamWriter`)
    The stream sink, in the same two modes (:mod:`.sink`), with each row's
    key, value and operation made into a subject, a payload and the
    bucket's operation headers (:class:`BucketRows`).

Where each piece runs is as in :mod:`.source`: constructors and
``partitions`` in driver-side Python workers, ``read``/``write`` in executor
workers; everything pickled holds options and plain values only.
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..errors import DirectGetDisabledError, InvalidArgumentError, MessageNotFoundError
from ..headers import encode_line
from ..jetstream import features
from ..jetstream.kv import DEL, OPERATION_HEADER, PURGE, PUT, check_key, entry_operation, open_bucket
from . import sink
from .arrow import MARKER_REASON, replies_to_batch, stored_to_batch
from .connections import bulk_reader, connection
from .options import SparkOptions
from .pushdown import push_key_filters
from .source import BULK_BYTES, BatchWriter, StreamReader, StreamWriter, check_batch_options, data_lost

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.datasource import Filter

    from ..jetstream.context import JetStream

log = logging.getLogger("jsclient.spark")

SCHEMA = "key string, value binary, revision long, created timestamp, operation string"
#: A bucket write's columns: ``key`` and ``value`` always, ``operation`` optionally.
WRITE_COLUMNS = ("key", "value", "operation")
#: A row's operation (``operation`` column, any case; null is a put) -> the headers its message carries.
_OPERATION_LINES = {
    "put": b"",
    "delete": encode_line(OPERATION_HEADER, DEL),
    "del": encode_line(OPERATION_HEADER, DEL),
    "purge": encode_line(OPERATION_HEADER, PURGE) + encode_line("Nats-Rollup", "sub"),
}
_NO_LIMIT = (1 << 63) - 1
#: Keys per record batch where each key is a direct get of its own (a server before 2.11).
GETS_PER_BATCH = 1024


@dataclass(frozen=True)
class BucketTarget:
    """The bucket's stream and key prefix, found on the driver; ``opts`` are the options of that stream."""

    bucket: str
    stream: str
    prefix: str  # "$KV.<bucket>." (the origin's, for a mirror)
    opts: SparkOptions

    @classmethod
    def find(cls, opts: SparkOptions, *, writing: bool) -> BucketTarget:
        """Open the bucket (driver side): BucketNotFoundError names a missing one before any task runs."""
        bucket = opts.bucket
        assert bucket is not None
        kv = open_bucket(connection(opts).jetstream(timeout=30), bucket)
        if writing and kv.origin is not None:
            raise InvalidArgumentError(
                f"bucket {bucket!r} mirrors bucket {kv.origin!r} and takes no writes: write to {kv.origin!r}"
            )
        prefix = f"$KV.{kv.origin or bucket}."
        subjects = tuple(prefix + key for key in opts.keys) or (prefix + ">",)
        stream_opts = dataclasses.replace(
            opts, bucket=None, keys=(), as_of_revision=None, include_deletes=False, stream=kv.stream,
            subjects=() if writing else subjects, given=frozenset(),  # the user's options were checked as a bucket's
        )
        return cls(bucket, kv.stream, prefix, stream_opts)


# -- reading ----------------------------------------------------------------------------------------------


def to_entries(batch: pa.RecordBatch, prefix: str, *, deletes: bool) -> pa.RecordBatch:
    """A stream-shaped record batch (:data:`.arrow.SCHEMA`) as bucket rows; without ``deletes``, live keys only."""
    import pyarrow as pa
    import pyarrow.compute as pc

    headers = batch.column("headers")
    operations: list[str] = [PUT] * batch.num_rows
    ops = pc.map_lookup(headers, OPERATION_HEADER, "first")  # null where a row has no such header
    reasons = pc.map_lookup(headers, MARKER_REASON, "first")
    for i in pc.indices_nonzero(pc.or_(pc.is_valid(ops), pc.is_valid(reasons))).to_pylist():
        op, reason = ops[i].as_py(), reasons[i].as_py()
        operations[i] = entry_operation(op[0] if op else None, reason[0] if reason else None)
    rows = pa.RecordBatch.from_arrays(
        [
            pc.utf8_slice_codeunits(batch.column("subject"), len(prefix)),
            batch.column("data"),
            batch.column("seq"),
            batch.column("timestamp"),
            pa.array(operations, pa.string()),
        ],
        names=["key", "value", "revision", "created", "operation"],
    )
    if deletes:
        return rows
    return rows.filter(pc.equal(rows.column("operation"), PUT))


class KeyRange(InputPartition):
    """One task's keys (sorted, a contiguous range of the listing), compressed: a listing may hold millions."""

    def __init__(self, index: int, target: BucketTarget, keys: list[str], up_to: int | None) -> None:
        super().__init__(index)
        self.stream = target.stream
        self.prefix = target.prefix
        self.packed = zlib.compress("\n".join(keys).encode(), 1)
        self.up_to = up_to

    def names(self) -> list[str]:
        return zlib.decompress(self.packed).decode().split("\n")


#: Options a batch read of a bucket does not use (field -> option key): it reads as of asOfRevision.
_NOT_READ = {
    "starting_sequence": "startingSequence", "starting_time": "startingTime", "ending_sequence": "endingSequence",
    "ending_time": "endingTime", "batch_size": "batchSize", "max_pending": "maxPending",
}
#: Options a write to a bucket does not use.
_NOT_WRITTEN = {
    **{field: key for field, key in _NOT_READ.items() if field != "max_pending"},
    "keys": "keys", "as_of_revision": "asOfRevision", "include_deletes": "includeDeletes",
    "min_partitions": "minPartitions", "filter_pushdown": "filterPushdown", "starting_offsets": "startingOffsets",
    "max_messages_per_trigger": "maxMessagesPerTrigger", "fail_on_data_loss": "failOnDataLoss",
}


def check_options(opts: SparkOptions, *, reading: bool) -> None:
    """Refuse the options a bucket's batch read or write would not use (driver side, before any task runs)."""
    if reading:
        check_batch_options(opts)
        opts.refuse_unused(_NOT_READ, "a batch read of a bucket (it reads as of asOfRevision)")
    else:
        opts.refuse_unused(_NOT_WRITTEN, "a write to a bucket")


class BucketReader(DataSourceReader):
    """A bucket's current entries (or as of a revision), one row per key, read in key ranges."""

    def __init__(self, opts: SparkOptions) -> None:
        check_options(opts, reading=True)
        self.opts = opts

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        """Filters on ``key`` narrow the keys listed and read (driver side, before :meth:`partitions`, on the
        same object); the others are Spark's to apply (:func:`.pushdown.push_key_filters`)."""
        self.opts, kept = push_key_filters(self.opts, filters)
        log.info("jetstream source, bucket %r: reading keys %s; left to Spark: %s",
                 self.opts.bucket, list(self.opts.keys) or "all", kept or "none")
        return kept

    def partitions(self) -> list[KeyRange]:
        opts = self.opts
        target = BucketTarget.find(opts, writing=False)
        js = connection(opts).jetstream(timeout=30)
        info = js.stream_info(target.stream)
        if info.config.allow_direct is not True:
            raise DirectGetDisabledError(
                503, 0,
                f"the jetstream source reads bucket {target.bucket!r} by direct get, and its stream "
                f"{target.stream!r} does not allow it: set allow_direct=True on the stream (js.update_stream)",
            )
        up_to = opts.as_of_revision
        if up_to is not None:
            js.require(features.MULTI_LAST_DIRECT_GET)  # a 2.10 server cannot read a key as of a revision
            state = info.state
            if up_to > state.last_seq:
                raise InvalidArgumentError(
                    f"asOfRevision={up_to} is past bucket {target.bucket!r}'s last revision, {state.last_seq}"
                )
            if up_to < state.first_seq:
                data_lost(opts, (
                    f"bucket {target.bucket!r} no longer holds revisions before {state.first_seq} "
                    f"(aged out or purged), so it cannot be read as of revision {up_to}"
                ))
        keys = self._listed(js, target)
        if not keys:
            return []
        parts = max(1, min(opts.min_partitions, len(keys)))
        size = -(-len(keys) // parts)
        return [KeyRange(i, target, keys[lo : lo + size], up_to) for i, lo in enumerate(range(0, len(keys), size))]

    @staticmethod
    def _listed(js: JetStream, target: BucketTarget) -> list[str]:
        """Every key the bucket holds a message for (deleted ones too: their markers), sorted."""
        found: set[str] = set()
        for subject_filter in target.opts.subjects:
            subjects = js.stream_info(target.stream, subjects_filter=subject_filter).state.subjects or {}
            found.update(s[len(target.prefix):] for s in subjects if s.startswith(target.prefix))
        return sorted(found)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KeyRange):  # no key listed: Spark reads one empty partition of its own
            return
        js = connection(self.opts).jetstream(timeout=max(30.0, self.opts.ack_timeout))
        subjects = [partition.prefix + key for key in partition.names()]
        if features.supports(js.conn.server_info, features.MULTI_LAST_DIRECT_GET):
            with bulk_reader(self.opts) as reader:
                for headers, payloads in reader.last_values(
                    partition.stream, subjects, up_to=partition.up_to, max_bytes=BULK_BYTES, timeout=js.timeout
                ):
                    yield from self._rows(replies_to_batch(headers, payloads, partition.stream, _NO_LIMIT)[0],
                                          partition)
            return
        if partition.up_to is not None:  # planned on a newer server than this task reached
            js.require(features.MULTI_LAST_DIRECT_GET)
        for lo in range(0, len(subjects), GETS_PER_BATCH):  # before 2.11: one direct get per key
            found = []
            for subject in subjects[lo : lo + GETS_PER_BATCH]:
                try:
                    found.append(js.direct_get(partition.stream, last_by_subj=subject))
                except MessageNotFoundError:  # gone since the listing
                    continue
            yield from self._rows(stored_to_batch(found), partition)

    def _rows(self, batch: pa.RecordBatch, partition: KeyRange) -> Iterator[pa.RecordBatch]:
        rows = to_entries(batch, partition.prefix, deletes=self.opts.include_deletes)
        if rows.num_rows:
            yield rows


class UnpushedBucketReader(BucketReader):
    """A bucket read that pushes no filter, for sessions with ``spark.sql.python.filterPushdown.enabled`` false
    (Spark fails a read whose reader overrides pushFilters there)."""

    pushFilters = getattr(DataSourceReader, "pushFilters", BucketReader.pushFilters)


class BucketChangeReader(StreamReader):
    """A bucket's changes as they come: the stream reader over its stream, rows reshaped."""

    def __init__(self, target: BucketTarget) -> None:
        super().__init__(target.opts)
        self.prefix = target.prefix

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for batch in super().read(partition):
            rows = to_entries(batch, self.prefix, deletes=True)
            if rows.num_rows:
                yield rows


def change_reader(opts: SparkOptions) -> BucketChangeReader:
    """A streaming read of a bucket (driver side): the batch-only options refused before the query starts."""
    for value, name in ((opts.as_of_revision, "asOfRevision"), (opts.include_deletes, "includeDeletes")):
        if value:
            raise InvalidArgumentError(
                f"{name} applies to batch reads of a bucket; a streaming read gives every change from "
                "startingOffsets (a revision, earliest or latest), deletes and purges included"
            )
    return BucketChangeReader(BucketTarget.find(opts, writing=False))


# -- writing ----------------------------------------------------------------------------------------------


def check_write_schema(schema: Any) -> None:
    """The DataFrame written has ``key`` (string), ``value`` (binary) and maybe ``operation`` (string), no more."""
    from pyspark.sql.types import BinaryType, StringType

    fields = {f.name: f.dataType for f in schema.fields}
    unknown = sorted(set(fields) - set(WRITE_COLUMNS))
    if unknown:
        raise InvalidArgumentError(
            f"a bucket write takes the columns key, value and operation, not {', '.join(unknown)}"
        )
    for name, kind, hint in (
        ("key", StringType, ""),
        ("value", BinaryType, " (cast it: col('value').cast('binary'))"),
    ):
        if name not in fields:
            raise InvalidArgumentError(f"a bucket write needs a {name} column")
        if not isinstance(fields[name], kind):
            raise InvalidArgumentError(
                f"a bucket write's {name} column must be {kind().simpleString()}, not "
                f"{fields[name].simpleString()}{hint}"
            )
    if "operation" in fields and not isinstance(fields["operation"], StringType):
        raise InvalidArgumentError("a bucket write's operation column must be a string: put, delete or purge")


class BucketRows:
    """A bucket's rows as the sink's pieces: subject ``<prefix><key>``, the value, the operation's headers."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.checked: set[str] = set()  # keys already found valid

    def __call__(self, batch: pa.RecordBatch) -> sink.Columns:
        names = batch.schema.names
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        ops = batch.column("operation").to_pylist() if "operation" in names else [None] * len(keys)
        subjects: list[bytes] = []
        payloads: list[bytes] = []
        lines: list[bytes] = []
        for key, value, op in zip(keys, values, ops, strict=True):
            if key not in self.checked:
                check_key(key)
                self.checked.add(key)
            found = _OPERATION_LINES.get(op.lower() if isinstance(op, str) else "put" if op is None else "")
            if found is None:
                raise InvalidArgumentError(
                    f"bucket write: key {key!r} has operation {op!r}; it must be put, delete or purge (or null: put)"
                )
            if value is None and not found:
                raise InvalidArgumentError(
                    f"bucket write: key {key!r} is a put with a null value (put b'' for an empty value, or "
                    "delete the key)"
                )
            subjects.append((self.prefix + key).encode())
            payloads.append(b"" if found else value)
            lines.append(found)
        return sink.Columns.of(subjects, payloads, lines)


def writing(opts: SparkOptions, schema: Any) -> tuple[SparkOptions, sink.WritePlan, BucketRows]:
    """A bucket write's checks, and its stream's options, plan and row shape (driver side, before any task)."""
    check_options(opts, reading=False)
    check_write_schema(schema)
    target = BucketTarget.find(opts, writing=True)
    return target.opts, sink.plan_write(target.opts, bucket=target.bucket), BucketRows(target.prefix)


class BucketWriter(BatchWriter):
    """A batch write into a bucket: the stream sink's, rows reshaped by :class:`BucketRows`."""

    def __init__(self, opts: SparkOptions, schema: Any) -> None:
        stream_opts, plan, rows = writing(opts, schema)
        super().__init__(stream_opts, schema, plan=plan, shape=rows)


class BucketStreamWriter(StreamWriter):
    """A streaming write into a bucket: the stream sink's, rows reshaped by :class:`BucketRows`."""

    def __init__(self, opts: SparkOptions, schema: Any) -> None:
        stream_opts, plan, rows = writing(opts, schema)
        super().__init__(stream_opts, schema, plan=plan, shape=rows)


__all__ = [
    "SCHEMA", "BucketChangeReader", "BucketReader", "BucketRows", "BucketStreamWriter", "BucketTarget",
    "BucketWriter", "KeyRange", "UnpushedBucketReader", "change_reader", "check_options", "check_write_schema",
    "to_entries", "writing",
]
