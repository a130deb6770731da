"""The Spark bound of ``make bench-spark``'s streaming row: the same query with no JetStream in it.

Format ``membound``: a streaming source that makes rows of the jetstream
source's schema in memory and a streaming sink that drops them.  Run with
the options the jetstream row uses (``minPartitions``,
``maxMessagesPerTrigger``, a checkpoint, ``Trigger.AvailableNow``), the
query pays for Spark alone (planning, the checkpoint, the JVM's side of
the Python workers, Arrow both ways), which no source or sink written in
Python can avoid; what the jetstream query costs beyond it is its own.
The source's rows cost next to nothing to make (columns cut from one
template per worker process, only ``seq`` made per batch), so that the
bound is a bound.  ``register`` pickles this module by value: Spark's
workers need not find ``benchmarks`` on their path.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from jsclient.spark.arrow import SCHEMA, arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

NAME = "membound"
#: Rows per record batch a task yields: about what one of the jetstream source's pulls (4 MiB) brings of
#: 100-byte messages.
BATCH_ROWS = 40_000
#: Subjects the rows take turns on, as the benchmark's stream does.
SUBJECTS = 100

_template: pa.RecordBatch | None = None  # per worker process: the columns every batch is cut from


def _rows(first: int, count: int) -> pa.RecordBatch:
    """``count`` rows from sequence ``first``: a slice of the process's template, with its own ``seq``."""
    global _template
    import pyarrow as pa

    if _template is None or _template.num_rows < count:
        n = max(count, BATCH_ROWS)
        _template = pa.RecordBatch.from_arrays(
            [
                pa.array([f"src.{i % SUBJECTS}" for i in range(n)], pa.string()),
                pa.array([b"x" * 100] * n, pa.binary()),
                pa.nulls(n, pa.map_(pa.string(), pa.list_(pa.string()))),
                pa.array(["SRC"] * n, pa.string()),
                pa.array(range(n), pa.int64()),
                pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
            ],
            schema=arrow_schema(),
        )
    cut = _template.slice(0, count)
    return cut.set_column(4, "seq", pa.array(range(first, first + count), pa.int64()))


class Span(InputPartition):
    """Sequences first..last (inclusive) for one task."""

    def __init__(self, index: int, first: int, last: int) -> None:
        super().__init__(index)
        self.first = first
        self.last = last


class BoundReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets as the jetstream source keeps them (``{"seq": next}``), over ``rows`` rows made in memory."""

    def __init__(self, rows: int, parts: int, per_trigger: int | None) -> None:
        self.rows = rows
        self.parts = parts
        self.per_trigger = per_trigger

    def initialOffset(self) -> dict[str, Any]:
        return {"seq": 1}

    def getDefaultReadLimit(self) -> Any:
        return ReadMaxRows(self.per_trigger) if self.per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing: every row is there from the start."""

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        first = start["seq"] if start is not None else 1
        end = self.rows + 1
        if isinstance(limit, ReadMaxRows):
            end = min(end, first + limit.max_rows)
        return {"seq": end}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[Span]:
        first, last = start["seq"], end["seq"] - 1
        if last < first:
            return []
        size = math.ceil((last - first + 1) / self.parts)
        return [Span(i, lo, min(last, lo + size - 1)) for i, lo in enumerate(range(first, last + 1, size))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Span)
        for lo in range(partition.first, partition.last + 1, BATCH_ROWS):
            yield _rows(lo, min(BATCH_ROWS, partition.last + 1 - lo))

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release."""


class Dropped(WriterCommitMessage):
    """What a task of the dropping sink reports: how many rows it took."""

    def __init__(self, rows: int) -> None:
        self.rows = rows


class DropWriter(DataSourceStreamArrowWriter):
    """Takes every record batch of a task and keeps nothing."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Dropped:
        return Dropped(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was kept."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was kept."""


class BoundSource(DataSource):
    """``readStream.format("membound").option("rows", N)`` and ``writeStream.format("membound")``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        per_trigger = self.options.get("maxmessagespertrigger")
        return BoundReader(int(self.options["rows"]), int(self.options.get("minpartitions", 1)),
                           int(per_trigger) if per_trigger else None)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return DropWriter()


def register(spark: SparkSession) -> None:
    """The ``membound`` format in this session, this module pickled whole to the workers."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(BoundSource)
