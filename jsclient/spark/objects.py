"""Object stores as binary files (option ``objectStore``), in the shape of Spark's ``binaryFile`` source.

Where each piece runs (see SPARK-NOTES): :func:`schema`, :class:`ObjectReader`
and its ``partitions``, and :class:`ObjectWriter`'s ``__init__`` in a
driver-side Python worker; ``read`` and ``write`` in executor workers forked
from ``pyspark.daemon``, each on the task's thread with the per-process
connection of :mod:`jsclient.spark.connections`.  The partitions and the
writer are pickled to the executors: they hold only :class:`SparkOptions`
and plain values.

A read lists the store once, on the driver, and splits the live objects
(links and deleted objects left out) into ``minPartitions`` groups balanced
by bytes.  Each task reads its objects' bytes itself, never through the
driver, by the client's object reader, which checks every object's size and
SHA-256 digest at its end.  A row is the version listed when the read was
planned, or nothing: an object replaced or deleted before its task reads it
is data loss (``failOnDataLoss``: an error, or skipped with a warning).

A write puts each row as one object with ``ObjectStore.put``, which stores
the description after every chunk is acked and purges a failed put's chunks:
each object is whole or not there, and every put is finished before
``write()`` returns.  There is nothing to commit or undo on the driver.
"""

from __future__ import annotations

import datetime as dt
import heapq
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql.datasource import DataSourceReader, DataSourceWriter, InputPartition, WriterCommitMessage

try:  # record batches straight to write(), as the stream sink has them (source.py)
    from pyspark.sql.datasource import DataSourceArrowWriter
except ImportError:  # pragma: no cover - older Spark: rows (see _rows)
    DataSourceArrowWriter = DataSourceWriter  # type: ignore[assignment,misc]

from ..errors import InvalidArgumentError, ObjectNotFoundError
from .connections import connection
from .options import SparkOptions
from .source import data_lost

if TYPE_CHECKING:
    import pyarrow as pa

    from ..jetstream.objectstore import ObjectInfo, ObjectStore

SCHEMA = "name string, size long, modified timestamp, digest string, content binary"
#: The schema of a listing (``includeContent=false``).
LISTING = "name string, size long, modified timestamp, digest string"
#: Content bytes a task gathers into one record batch before it hands them to Spark (one larger object
#: is a batch of its own).
BATCH_BYTES = 4 << 20
#: The largest object a row can carry: Spark and Arrow's binary values hold at most 2 GiB - 1 bytes.
MAX_CONTENT = (1 << 31) - 1

#: Options of streams that neither a read nor a write of an object store uses: field -> option key.
_STREAM_OPTIONS = {
    "starting_sequence": "startingSequence",
    "starting_time": "startingTime",
    "ending_sequence": "endingSequence",
    "ending_time": "endingTime",
    "batch_size": "batchSize",
    "starting_offsets": "startingOffsets",
    "max_messages_per_trigger": "maxMessagesPerTrigger",
    "max_pending": "maxPending",
}
#: Options of an object store's read that its write does not use.
_READ_OPTIONS = {
    "min_partitions": "minPartitions",
    "fail_on_data_loss": "failOnDataLoss",
    "include_content": "includeContent",
}


def schema(opts: SparkOptions) -> str:
    """The columns of a read: ``binaryFile``'s, without ``content`` for a listing (``includeContent=false``)."""
    return SCHEMA if opts.include_content else LISTING


def _store(opts: SparkOptions) -> ObjectStore:
    """The store the options name, on this process's connection (ObjectStoreNotFoundError if there is none)."""
    assert opts.object_store is not None  # the data source dispatches here only when the option is set
    return connection(opts).jetstream(timeout=opts.ack_timeout).object_store(opts.object_store)


class Listed(NamedTuple):
    """One object as the driver listed it: the version a task must read."""

    name: str
    size: int
    modified: dt.datetime | None
    digest: str
    nuid: str


class ObjectGroup(InputPartition):
    """The objects one task reads (sorted by name)."""

    def __init__(self, index: int, objects: list[Listed]) -> None:
        super().__init__(index)
        self.objects = objects


def plan(infos: Iterable[ObjectInfo], opts: SparkOptions) -> list[ObjectGroup]:
    """Split the live objects into ``minPartitions`` groups (fewer when there are fewer objects), balanced by bytes.

    Largest first, each to the group with the fewest bytes so far: no group
    ends more than the largest object above the lightest.  Always at least
    one group, which Spark would otherwise fill in with a partition of its own.
    """
    listed = sorted(
        (Listed(i.name, i.size, i.mtime, i.digest, i.nuid) for i in infos if not i.deleted and i.link is None),
        key=lambda o: (-o.size, o.name),
    )
    if opts.include_content:
        for obj in listed:
            if obj.size > MAX_CONTENT:
                raise InvalidArgumentError(
                    f"object {obj.name!r} ({obj.size} bytes) is larger than a row's content can be (2 GiB - 1): "
                    "list the store with includeContent=false and read that object with the client "
                    "(ObjectStore.get_file)"
                )
    groups: list[list[Listed]] = [[] for _ in range(max(1, min(opts.min_partitions, len(listed))))]
    lightest = [(0, i) for i in range(len(groups))]
    for obj in listed:
        load, i = heapq.heappop(lightest)
        groups[i].append(obj)
        heapq.heappush(lightest, (load + obj.size, i))
    return [ObjectGroup(i, sorted(group)) for i, group in enumerate(groups)]


def _batch(rows: list[Listed], contents: list[bytes] | None) -> pa.RecordBatch:
    import pyarrow as pa

    columns = {
        "name": pa.array([r.name for r in rows], pa.string()),
        "size": pa.array([r.size for r in rows], pa.int64()),
        "modified": pa.array([r.modified for r in rows], pa.timestamp("us", tz="UTC")),
        "digest": pa.array([r.digest for r in rows], pa.string()),
    }
    if contents is not None:
        columns["content"] = pa.array(contents, pa.binary())
    return pa.RecordBatch.from_pydict(columns)


def _content(store: ObjectStore, obj: Listed, opts: SparkOptions) -> bytes | None:
    """The planned version's bytes, checked against its size and digest; None when it is gone and may be skipped."""
    gone = f"object {obj.name!r} of object store {store.bucket!r}, listed when the read was planned,"
    try:
        with store.get(obj.name) as reader:
            if reader.info.nuid != obj.nuid:
                data_lost(opts, f"{gone} was replaced before it was read")
                return None
            return reader.readall()
    except ObjectNotFoundError:
        data_lost(opts, f"{gone} was deleted or replaced before it was read")
        return None


def read_group(opts: SparkOptions, group: ObjectGroup) -> Iterator[pa.RecordBatch]:
    """The group's rows (executor side): a listing's at once, else its objects' bytes in batches of BATCH_BYTES."""
    if not opts.include_content:
        if group.objects:
            yield _batch(group.objects, None)
        return
    store = _store(opts)
    rows: list[Listed] = []
    contents: list[bytes] = []
    held = 0
    for obj in group.objects:
        if rows and held + obj.size > BATCH_BYTES:
            yield _batch(rows, contents)
            rows, contents, held = [], [], 0
        content = _content(store, obj, opts)
        if content is not None:
            rows.append(obj)
            contents.append(content)
            held += len(content)
    if rows:
        yield _batch(rows, contents)


class ObjectReader(DataSourceReader):
    """``spark.read.format("jetstream").option("objectStore", NAME)``: one row per live object."""

    def __init__(self, opts: SparkOptions) -> None:
        opts.refuse_unused(_STREAM_OPTIONS, "a read of an object store")
        self.opts = opts

    def partitions(self) -> list[ObjectGroup]:
        """List the store once (ObjectStoreNotFoundError here, before any task, when there is none)."""
        return plan(_store(self.opts).list(), self.opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ObjectGroup)
        yield from read_group(self.opts, partition)


def check_columns(schema: Any) -> None:
    """Refuse, on the driver, a DataFrame that is not (``name`` string, ``content`` binary), naming the problem."""
    from pyspark.sql.types import BinaryType, StringType

    types = {f.name: f.dataType for f in schema.fields}
    shape = "an object store is written from the columns name (string) and content (binary)"
    unknown = sorted(set(types) - {"name", "content"})
    if unknown:
        raise InvalidArgumentError(f"unknown column {unknown[0]!r}: {shape}; drop or rename the others")
    for column, kind, what in (("name", StringType, "the object's name"), ("content", BinaryType, "its bytes")):
        wanted = kind().simpleString()
        if column not in types:
            raise InvalidArgumentError(f"missing column {column!r} ({wanted}, {what}): {shape}")
        if not isinstance(types[column], kind):
            cast = " (cast('binary') stores text as its UTF-8 bytes)" if column == "content" else ""
            raise InvalidArgumentError(
                f"column {column!r} is {types[column].simpleString()}, not {wanted}: cast it to {wanted}{cast}"
            )


def _rows(iterator: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """(name, content) of each row: from Arrow record batches, or Rows where pyspark has no Arrow writers."""
    for item in iterator:
        if hasattr(item, "num_rows"):
            names, contents = item.column("name"), item.column("content")
            for i in range(item.num_rows):
                buffer = contents[i].as_buffer()  # the batch's own memory, not a copy
                yield names[i].as_py(), None if buffer is None else memoryview(buffer)
        else:  # pragma: no cover - pyspark without Arrow writers
            yield item["name"], item["content"]


class ObjectWriter(DataSourceArrowWriter):
    """``df.write.format("jetstream").option("objectStore", NAME).mode("append").save()``: a row, an object."""

    def __init__(self, opts: SparkOptions, schema: Any) -> None:
        opts.refuse_unused({**_STREAM_OPTIONS, **_READ_OPTIONS}, "a write of an object store")
        check_columns(schema)
        _store(opts)  # the store exists: ObjectStoreNotFoundError now, before any task
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        """Put every row in order (a later row of the same name replaces an earlier one), each put acked."""
        store = _store(self.opts)
        for name, content in _rows(iterator):
            if name is None or content is None:
                what = "name" if name is None else f"content (object {name!r})"
                raise InvalidArgumentError(f"a row's {what} is null: every row must name an object and give its bytes")
            store.put(name, content, timeout=self.opts.ack_timeout)
        return WriterCommitMessage()
