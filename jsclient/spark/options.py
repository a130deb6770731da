"""Spark-facing options: one frozen, picklable object parsed from Spark's option map.

Pure data, any thread or process.  Spark lower-cases option keys, so keys are
matched case-insensitively; an unknown key is an error naming it (a typo
must not silently fall back to a default).  The keys Spark adds itself
(``checkpointLocation``, ``queryName``, ``path``) are accepted and ignored.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from ..jetstream.kv import check_bucket, check_key
from ..options import Options


def _bool(name: str, value: str) -> bool:
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise InvalidArgumentError(f"option {name} must be true or false, not {value!r}")


def _int(name: str, value: str, minimum: int = 0) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise InvalidArgumentError(f"option {name} must be >= {minimum}, not {number}")
    return number


def option_time(name: str, value: str) -> dt.datetime:
    """The ISO 8601 time an option names (UTC when it names no zone)."""
    try:
        parsed = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(f"option {name} must be an ISO 8601 time, not {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class SparkOptions:
    """Everything the jetstream data source and the executor connections accept.

    Frozen and picklable, so a UDF can capture it.  Build it with :meth:`parse`
    from the data source's option keys; every check runs when it is made.

    Attributes:
        servers: Comma-separated NATS URLs (option ``servers``); executors dial them too.
        stream: The stream read, or the stream written to (option ``stream``).
        subjects: Subject filters of a read (option ``subjects``, comma-separated); empty reads all.
        user: User name for user/password authentication.
        password: Password for ``user``.
        token: Authentication token.
        creds: Path of a ``.creds`` file (JWT and NKey seed).
        nkey: NKey seed.
        tls_ca_file: CA certificates that verify the server's certificate.
        tls_cert_file: Client certificate, for servers that ask for one.
        tls_key_file: Key of ``tls_cert_file``.
        starting_sequence: First sequence a batch read reads (option ``startingSequence``).
        starting_time: A batch read starts at the first message stored at or after this time
            (option ``startingTime``, ISO 8601, UTC when no zone is given).
        ending_sequence: Last sequence a batch read reads (option ``endingSequence``).
        ending_time: A batch read ends before the first message stored at or after this time
            (option ``endingTime``).
        min_partitions: At least this many Spark tasks per read (option ``minPartitions``).
        batch_size: Messages asked for per server request (option ``batchSize``).
        starting_offsets: Where a streaming query without a checkpoint starts (option
            ``startingOffsets``): ``earliest``, ``latest``, a sequence or an ISO 8601 time;
            ``None`` (not set) means ``earliest``.  A batch read accepts only ``earliest``.
        max_messages_per_trigger: At most this many messages per micro-batch of a streaming read
            (option ``maxMessagesPerTrigger``); ``None``, no limit.
        fail_on_data_loss: Raise :class:`~jsclient.DataLossError` when planned messages are gone
            (option ``failOnDataLoss``), rather than log them and go on.
        subject: Subject of every row written, for rows without a ``subject`` column; also finds
            the target stream when ``stream`` is not set (option ``subject``).
        ack_timeout: Seconds a write task waits for the server's answers (option ``ackTimeout``).
        max_pending: Sizes the message-id sink's window of unacknowledged publishes
            (option ``maxPending``).
        commit_prefix: Subject prefix of the atomic sink's commit markers (option ``commitPrefix``);
            ``None``, ``_jsclient.commits.<stream>``.
        bucket: The key-value bucket read or written as a table (option ``bucket``), instead of a stream.
        keys: Key filters of a bucket read (option ``keys``, comma-separated, wildcards allowed); empty
            reads every key.
        as_of_revision: A bucket's batch read gives the bucket as it was at this revision (option
            ``asOfRevision``); ``None``, as it is.
        include_deletes: A bucket's batch read also gives deleted and purged keys, with an ``operation``
            column (option ``includeDeletes``).
        object_store: The object store read or written as binary files (option ``objectStore``).
        include_content: An object store read gives each object's bytes in a ``content`` column (option
            ``includeContent``); false lists the objects only.
        filter_pushdown: Whether a batch read of a stream or a bucket takes the filters Spark pushes (option
            ``filterPushdown``); ``None``, where Spark keeps a pushed read with its one query (see
            :doc:`/guides/spark-pushdown`).
        given: The fields :meth:`parse` found among the option keys, so that an option given at its default
            value is still one that was given (and refused where it does not apply).
        trace_context: The trace context the driver's OpenTelemetry instrumentation put into the options
            (keys ``jsclient.trace.<field>``: ``jsclient.trace.traceparent``, ``jsclient.trace.tracestate``,
            whatever the propagator writes), as (field, value) pairs: the executors' spans of the read or write
            are its children (``jsclient.instrumentation.spark``).  Never checked, never compared.
    """

    servers: str = "nats://127.0.0.1:4222"
    stream: str | None = None
    subjects: tuple[str, ...] = ()
    user: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
    token: str | None = dataclasses.field(default=None, repr=False)
    creds: str | None = None
    nkey: str | None = dataclasses.field(default=None, repr=False)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    # -- reading --
    starting_sequence: int | None = None
    starting_time: dt.datetime | None = None
    ending_sequence: int | None = None
    ending_time: dt.datetime | None = None
    min_partitions: int = 1
    batch_size: int = 100_000
    starting_offsets: str | None = None
    max_messages_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    # -- writing --
    subject: str | None = None
    ack_timeout: float = 30.0
    max_pending: int = 4000
    commit_prefix: str | None = None
    # -- buckets and object stores --
    bucket: str | None = None
    keys: tuple[str, ...] = ()
    as_of_revision: int | None = None
    include_deletes: bool = False
    object_store: str | None = None
    include_content: bool = True
    filter_pushdown: bool | None = None
    given: frozenset[str] = dataclasses.field(default=frozenset(), repr=False, compare=False)
    trace_context: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False, compare=False)

    #: Spark option key (lower-cased) -> field name.
    KEYS = {
        "servers": "servers",
        "stream": "stream",
        "subjects": "subjects",
        "user": "user",
        "password": "password",
        "token": "token",
        "creds": "creds",
        "nkey": "nkey",
        "tls_ca_file": "tls_ca_file",
        "tls_cert_file": "tls_cert_file",
        "tls_key_file": "tls_key_file",
        "startingsequence": "starting_sequence",
        "startingtime": "starting_time",
        "endingsequence": "ending_sequence",
        "endingtime": "ending_time",
        "minpartitions": "min_partitions",
        "batchsize": "batch_size",
        "startingoffsets": "starting_offsets",
        "maxmessagespertrigger": "max_messages_per_trigger",
        "failondataloss": "fail_on_data_loss",
        "subject": "subject",
        "acktimeout": "ack_timeout",
        "maxpending": "max_pending",
        "commitprefix": "commit_prefix",
        "bucket": "bucket",
        "keys": "keys",
        "asofrevision": "as_of_revision",
        "includedeletes": "include_deletes",
        "objectstore": "object_store",
        "includecontent": "include_content",
        "filterpushdown": "filter_pushdown",
    }
    #: Keys Spark itself puts into a data source's options (lower-cased), accepted and ignored.
    SPARK_KEYS = frozenset({"path", "paths", "checkpointlocation", "queryname"})
    #: Option keys under this prefix (lower-cased) carry trace context to the executors (``trace_context``).
    TRACE_PREFIX = "jsclient.trace."

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> SparkOptions:
        """Options from the data source's option keys (matched case-insensitively).

        Args:
            options: Option keys (``startingSequence``, ``minPartitions``, ...) to values, as Spark
                passes them (strings) or as Python values.

        Returns:
            The checked options.

        Raises:
            InvalidArgumentError: An unknown key (named), a value of the wrong kind, or options
                that contradict each other.
        """
        fields: dict[str, Any] = {}
        trace: list[tuple[str, str]] = []
        for raw_key, value in options.items():
            lowered = str(raw_key).lower()
            if lowered.startswith(cls.TRACE_PREFIX):  # the instrumentation's, never a user's typo to name
                trace.append((lowered[len(cls.TRACE_PREFIX):], str(value)))
                continue
            key = lowered.replace("-", "_")
            if key in cls.SPARK_KEYS:
                continue
            name = cls.KEYS.get(key) or cls.KEYS.get(key.replace("_", ""))
            if name is None:
                known = ", ".join(sorted(set(cls.KEYS)))
                raise InvalidArgumentError(f"unknown jetstream option {raw_key!r}; known options: {known}")
            fields[name] = cls._convert(name, raw_key, value)
        return cls(**fields, given=frozenset(fields), trace_context=tuple(sorted(trace)))

    @staticmethod
    def _convert(name: str, key: str, value: Any) -> Any:
        if value is None:
            return None
        if name in ("subjects", "keys"):
            return tuple(s.strip() for s in str(value).split(",") if s.strip())
        if name in ("starting_sequence", "ending_sequence"):
            return _int(key, value, 1)
        if name in ("min_partitions", "batch_size", "max_pending"):
            return _int(key, value, 1)
        if name in ("max_messages_per_trigger", "as_of_revision"):
            return _int(key, value, 1)
        if name in ("starting_time", "ending_time"):
            return option_time(key, value)
        if name in ("fail_on_data_loss", "include_deletes", "include_content", "filter_pushdown"):
            return _bool(key, value)
        if name == "ack_timeout":
            try:
                seconds = float(value)
            except ValueError:
                raise InvalidArgumentError(f"option {key} must be a number of seconds, not {value!r}") from None
            if seconds <= 0:
                raise InvalidArgumentError(f"option {key} must be > 0, not {value!r}")
            return seconds
        return str(value)

    def __post_init__(self) -> None:
        self._check_target()
        if self.starting_sequence is not None and self.starting_time is not None:
            raise InvalidArgumentError("set startingSequence or startingTime, not both")
        if self.ending_sequence is not None and self.ending_time is not None:
            raise InvalidArgumentError("set endingSequence or endingTime, not both")
        if (
            self.starting_sequence is not None
            and self.ending_sequence is not None
            and self.ending_sequence < self.starting_sequence
        ):
            raise InvalidArgumentError("endingSequence is before startingSequence")
        self.connection_options()  # validates servers, auth and TLS now, on the driver

    def _check_target(self) -> None:
        """One target (a stream, a bucket or an object store), and only the options that apply to it."""
        named = [name for name, value in (
            ("stream", self.stream), ("bucket", self.bucket), ("objectStore", self.object_store)
        ) if value]
        if len(named) > 1:
            raise InvalidArgumentError(
                f"set one of the options stream, bucket and objectStore, not {' and '.join(named)}"
            )
        for store in (self.bucket, self.object_store):
            if store:
                check_bucket(store)
        stream_only = (("subjects", "subjects"), ("subject", "subject"), ("commitPrefix", "commit_prefix"))
        if self.bucket or self.object_store:
            for name, field in stream_only:
                if self._is_set(field):
                    instead = " (use keys)" if name == "subjects" and self.bucket else ""
                    raise InvalidArgumentError(f"option {name} applies to streams, not to {named[0]}s{instead}")
        if not self.bucket:
            bucket_only = (("keys", "keys"), ("asOfRevision", "as_of_revision"), ("includeDeletes", "include_deletes"))
            for option, field in bucket_only:
                if self._is_set(field):
                    raise InvalidArgumentError(f"option {option} applies to buckets (option bucket)")
        if not self.object_store and self._is_set("include_content"):
            raise InvalidArgumentError("option includeContent applies to object stores (option objectStore)")
        if self.object_store and self.filter_pushdown is not None:
            raise InvalidArgumentError("option filterPushdown applies to streams and buckets, not to objectStores")
        for key in self.keys:
            check_key(key, allow_wildcards=True)

    def refuse_unused(self, unused: Mapping[str, str], what: str) -> None:
        """Refuse the options in ``unused`` (field -> option key) set away from their defaults: ``what`` (a read
        or write of some target, named in the message) would ignore them.

        Args:
            unused: The fields that ``what`` does not use, with their option keys.
            what: What the options were given to, as the message names it ("a write to a bucket").

        Raises:
            InvalidArgumentError: One of them is set; the message names it and ``what``.
        """
        for field, key in unused.items():
            if self._is_set(field):
                raise InvalidArgumentError(f"option {key} does not apply to {what}")

    def _is_set(self, field: str) -> bool:
        """Whether the option of ``field`` was given (even at its default value) or holds another value."""
        default = next(f.default for f in dataclasses.fields(self) if f.name == field)
        return field in self.given or getattr(self, field) != default

    def require_stream(self) -> str:
        """The ``stream`` option, which a read needs.

        Returns:
            The stream's name.

        Raises:
            InvalidArgumentError: The option ``stream`` is not set.
        """
        if not self.stream:
            raise InvalidArgumentError("the jetstream data source needs the option stream")
        return self.stream

    def connection_options(self) -> Options:
        """The connection options these name (servers, credentials, TLS), as :func:`jsclient.connect` takes them.

        Returns:
            Options for :func:`jsclient.connect`, equal for equal settings (a cache key).

        Raises:
            InvalidArgumentError: A bad server URL, or credentials or TLS files that do not go together.
        """
        return Options.build(
            [s.strip() for s in self.servers.split(",") if s.strip()],
            name="jsclient-spark",
            user=self.user,
            password=self.password,
            token=self.token,
            creds_file=self.creds,
            nkey_seed=self.nkey,
            tls_ca_file=self.tls_ca_file,
            tls_cert_file=self.tls_cert_file,
            tls_key_file=self.tls_key_file,
            pending_msgs_limit=4_000_000,
            pending_bytes_limit=1 << 31,
        )


def spark_options(options: SparkOptions | Mapping[str, Any]) -> SparkOptions:
    """``options`` as SparkOptions: kept when it is one, else parsed from the data source's option keys."""
    return options if isinstance(options, SparkOptions) else SparkOptions.parse(options)
