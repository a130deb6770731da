"""The ``jetstream`` PySpark data source: which reader and writer an option map gets.

Runs where Spark calls a data source (a driver-side Python worker, see
SPARK-NOTES); holds only the parsed :class:`SparkOptions`.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

from ..errors import InvalidArgumentError
from . import buckets, objects
from .arrow import SCHEMA
from .options import SparkOptions
from .source import BatchReader, BatchWriter, StreamReader, StreamWriter, UnpushedBatchReader


def pushes_by_default() -> bool:
    """Whether this Spark keeps the read a pushdown planned with its one query: Spark's source keeps it with
    the scan from the release that adds limit pushdown for Python data sources (``DataSourceReader.pushLimit``);
    before, with the DataFrame (see :meth:`JetStreamDataSource.pushing`)."""
    return hasattr(DataSourceReader, "pushLimit")


#: Options a read of a stream does not use: the sink's.
_NOT_READ = {"subject": "subject", "max_pending": "maxPending", "commit_prefix": "commitPrefix"}
#: Options a write to a stream does not use: the reads'.
_NOT_WRITTEN = {
    "subjects": "subjects", "starting_sequence": "startingSequence", "starting_time": "startingTime",
    "ending_sequence": "endingSequence", "ending_time": "endingTime", "min_partitions": "minPartitions",
    "batch_size": "batchSize", "starting_offsets": "startingOffsets",
    "max_messages_per_trigger": "maxMessagesPerTrigger", "fail_on_data_loss": "failOnDataLoss",
}


def refuse_overwrite(overwrite: bool) -> None:
    """A batch write adds messages, revisions or objects and replaces nothing, so mode("overwrite") is refused."""
    if overwrite:
        raise InvalidArgumentError(
            "the jetstream sink appends (messages, bucket revisions, objects) and cannot overwrite its target: "
            "write with mode('append'), after emptying the target yourself if that is what you want"
        )


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream")`` / ``readStream`` / ``write`` / ``writeStream``.

    The option ``stream`` names a stream (this module), ``bucket`` a
    key-value bucket (:mod:`.buckets`) and ``objectStore`` an object store
    (:mod:`.objects`); :class:`SparkOptions` refuses more than one.
    """

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = SparkOptions.parse(options)

    def schema(self) -> str:
        if self.parsed.object_store:
            return objects.schema(self.parsed)
        if self.parsed.bucket:
            return buckets.SCHEMA
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        if self.parsed.object_store:
            return objects.ObjectReader(self.parsed)
        pushing = self.pushing()
        if self.parsed.bucket:
            return buckets.BucketReader(self.parsed) if pushing else buckets.UnpushedBucketReader(self.parsed)
        self.parsed.refuse_unused(_NOT_READ, "a read of a stream (it filters with subjects)")
        return BatchReader(self.parsed) if pushing else UnpushedBatchReader(self.parsed)

    def refuse_pushdown_option(self, what: str) -> None:
        if self.parsed.filter_pushdown is not None:
            raise InvalidArgumentError(f"option filterPushdown applies to batch reads, not to {what}")

    def pushing(self) -> bool:
        """Whether a batch read takes Spark's filters: the option ``filterPushdown``, else where it is safe.

        Spark before limit pushdown (``DataSourceReader.pushLimit``, after
        4.3) keeps the read a pushdown planned for the whole DataFrame, not
        for its one query: a later query of the same DataFrame, unfiltered,
        would read only what the first one's filters let through.  There
        filters are pushed only when a read asks for it.
        """
        chosen = self.parsed.filter_pushdown
        return pushes_by_default() if chosen is None else chosen

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        self.refuse_pushdown_option("a streaming read (Spark pushes filters to batch reads only)")
        if self.parsed.object_store:
            raise InvalidArgumentError("an object store is read in batch only (spark.read), not as a stream")
        if self.parsed.bucket:
            return buckets.change_reader(self.parsed)
        self.parsed.refuse_unused(_NOT_READ, "a read of a stream (it filters with subjects)")
        return StreamReader(self.parsed)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        refuse_overwrite(overwrite)
        self.refuse_pushdown_option("a write")
        if self.parsed.object_store:
            return objects.ObjectWriter(self.parsed, schema)
        if self.parsed.bucket:
            return buckets.BucketWriter(self.parsed, schema)
        self.parsed.refuse_unused(_NOT_WRITTEN, "a write to a stream")
        return BatchWriter(self.parsed, schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        self.refuse_pushdown_option("a write")
        # ``overwrite`` is the complete output mode here: each micro-batch is the whole result, appended.
        if self.parsed.object_store:
            raise InvalidArgumentError("an object store is written in batch only (df.write), not as a stream")
        if self.parsed.bucket:
            return buckets.BucketStreamWriter(self.parsed, schema)
        self.parsed.refuse_unused(_NOT_WRITTEN, "a write to a stream")
        return StreamWriter(self.parsed, schema)


class UnpushedJetStreamDataSource(JetStreamDataSource):
    """The ``jetstream`` format for a session whose ``spark.sql.python.filterPushdown.enabled`` is false.

    Spark fails a read there whose reader overrides ``pushFilters``, so this
    one's stream reads push nothing (:func:`jsclient.spark.register` picks it).
    """

    def pushing(self) -> bool:
        if self.parsed.filter_pushdown:
            raise InvalidArgumentError(
                "option filterPushdown=true needs the session's spark.sql.python.filterPushdown.enabled=true "
                "(set it, then call jsclient.spark.register(spark) again)"
            )
        return False
