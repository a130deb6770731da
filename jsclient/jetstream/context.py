"""JetStream: the context users hold, a facade over the parts that do its work.

Runs on the calling (user) thread; every call is a request over the
connection's shared reply inbox.  The parts, each in a module of its own:
management of streams and consumers (:class:`~.admin.Admin`), publishing with
acks and the async-publish window (:class:`~.publisher.Publisher`, whose acks
are decoded on the connection's reader thread), subscriptions
(:class:`~.subscriber.Subscriber`), counters (:class:`~.counters.Counters`)
and the key-value and object store factories (:class:`~.stores.Stores`).
The publisher's window (guarded by its lock) is the only mutable state among
them, so one context may be shared by many threads; a forked child gets a new
window (see :mod:`.publisher`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Literal, overload

from ..deprecation import renamed_keywords
from ..errors import JetStreamAPIError
from ..headers import HeadersInput
from ..protocol import check_publish_subject
from ..timeouts import DEFAULT, Timeout, answer_limit, take_limit
from . import api, batch, fastbatch, features, msgopts
from .admin import Admin
from .api import (
    AccountInfo,
    ConsumerConfig,
    ConsumerInfo,
    PubAck,
    StoredMsg,
    StreamConfig,
    StreamInfo,
)
from .batch import AtomicBatch, BatchAck
from .counters import Counters
from .direct import LastRequest, StoredMessage
from .handles import Consumer, Stream, pull_consumer
from .kv import KeyValue, KeyValueStatus
from .objectstore import ObjectStore, ObjectStoreStatus
from .ordered import OrderedSubscription
from .publisher import PUBLISH_RETRY, Publisher, publish_options, window_size
from .pull import PullSubscription
from .push import PushSubscription
from .reads import Reads
from .stores import KEY_VALUE, OBJECT_STORE, Stores
from .subscriber import Subscriber

if TYPE_CHECKING:
    from ..connection import Connection
    from ..message import Msg


class JetStream(Reads):
    """JetStream on one connection.  Create with ``nc.jetstream()``.

    The direct gets and counter reads are those of :class:`.reads.Reads`.
    Each call's ``Raises`` lists the errors of its own; those every call may
    raise are listed once, here (:doc:`/guides/errors` says what to do with each).

    Args:
        conn: The connection whose requests it makes.
        prefix: The subject prefix of the JetStream API: ``$JS.API``, unless the account imports the API
            under another prefix.
        domain: The JetStream domain to use (a leaf node's, say); it sets ``prefix`` to ``$JS.<domain>.API``.
        timeout: Seconds every call waits for the server unless it is given its own ``timeout``; ``None``, no
            limit.
        publish_async_max_pending: How many :meth:`publish_async` acks may be outstanding before the next
            call waits for room.

    Raises:
        InvalidArgumentError: A bad ``domain``, ``prefix``, ``timeout`` (0 too) or
            ``publish_async_max_pending``.

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow, or two that do not go together; raised
            before anything is sent.
        FeatureNotSupportedError: The call, or an option given to it, needs a newer server than the
            connected one (the error names the release); raised before anything is sent.
        JetStreamNotEnabledError: No JetStream answered (not enabled, or not for this account or domain).
        JetStreamAPIError: Any other refusal by the server: a subclass names the case, ``err_code`` carries
            the server's code.
        TimeoutError: No answer within the call's ``timeout``, or the context's when it takes none.
        ConnectionClosedError: The connection is closed or draining.
        ReconnectBufferFullError: The connection is reconnecting, and the request or message does not fit
            the reconnect buffer; nothing was sent.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        prefix: str = "$JS.API",
        domain: str | None = None,
        timeout: float | None = 5.0,
        publish_async_max_pending: int = 4000,
    ) -> None:
        if domain is not None:
            api.check_name("domain", domain)
            prefix = f"$JS.{domain}.API"
        check_publish_subject(prefix, "JetStream API prefix")
        #: The wait of every call that takes no ``timeout`` or leaves it out (``NO_LIMIT`` for None).
        self.timeout = answer_limit(timeout)
        self.conn = conn
        self.prefix = prefix
        self.domain = domain
        #: (stream, subject) -> how to read its last message, once checked (see direct.read_last; a cache:
        #: losing it costs a check).
        self.last_requests: dict[tuple[str, str], LastRequest[StoredMessage]] = {}
        self.publish_async_max_pending = window_size(publish_async_max_pending)
        # The parts read conn, prefix, timeout and publish_async_max_pending from here at each call.
        self._admin = Admin(self)
        self._publisher = Publisher(self)
        self._subscriber = Subscriber(self)
        self._counters = Counters(self)
        self._stores = Stores(self)

    def __repr__(self) -> str:
        return f"<JetStream prefix={self.prefix!r} on {self.conn!r}>"

    def require(self, *needs: features.Feature) -> int:
        """The API level ``needs`` take; FeatureNotSupportedError, before sending, if the server is older.

        Args:
            *needs: The features (``jsclient.jetstream.features``) a call is about to use.

        Returns:
            The highest API level (ADR-44) among ``needs``; 0 when there are none.

        Raises:
            FeatureNotSupportedError: The connected server's API level is lower; it names the release needed.
        """
        return features.require(self.conn.server_info, list(needs))

    # -- account -----------------------------------------------------------------
    def account_info(self) -> AccountInfo:
        """The account's JetStream usage and limits.

        Returns:
            What the account uses (memory, storage, streams, consumers), its limits and its API level.
        """
        return self._admin.account_info()

    def api_level(self) -> int:
        """The JetStream API level (ADR-44) of the server answering for this account: 0 before 2.11.

        Asked of JetStream itself, not read from the connected server's INFO,
        which a leaf node may make older or newer than JetStream is.

        Returns:
            The API level; 0 for a server before 2.11.
        """
        return self.account_info().api.level

    # -- streams -------------------------------------------------------------------
    def add_stream(self, config: StreamConfig | None = None, **fields: Any) -> StreamInfo:
        """Create a stream (idempotent for an identical config).

        Args:
            config: The stream's configuration; left out, ``fields`` make it.
            **fields: :class:`StreamConfig` fields set on top of ``config`` (``name=``, ``subjects=``, ...).

        Returns:
            The stream's info.

        Raises:
            StreamNameInUseError: A stream of that name exists with another configuration.
            StreamSubjectOverlapError: Its subjects overlap another stream's.
            MaximumStreamsError: The account has as many streams as it may.
        """
        return self._admin.add_stream(config, fields)

    def update_stream(self, config: StreamConfig | None = None, **fields: Any) -> StreamInfo:
        """Change a stream; fields the server sent that jsclient does not know go back unchanged.

        Args:
            config: The stream's new configuration (say, its ``stream_info(name).config``, changed); left
                out, ``fields`` make it.
            **fields: :class:`StreamConfig` fields set on top of ``config``; ``name`` says which stream.

        Returns:
            The stream's info after the change.

        Raises:
            StreamNotFoundError: No stream of that name.
            JetStreamAPIError: The server refused the change (some fields cannot change), or any other
                refusal.
        """
        return self._admin.update_stream(config, fields)

    # -- ADR-37 handles ---------------------------------------------------------------
    def stream(self, name: str) -> Stream:
        """A handle on the stream ``name`` (StreamNotFoundError when there is none).

        Args:
            name: The stream's name.

        Returns:
            The stream's handle, its current info in ``cached_info``.

        Raises:
            StreamNotFoundError: No stream of that name.
        """
        return Stream(self, self.stream_info(name))

    def create_stream(self, config: StreamConfig | None = None, **fields: Any) -> Stream:
        """Create a stream (an identical one is fine) and return its handle.

        Args:
            config: The stream's configuration; left out, ``fields`` make it.
            **fields: :class:`StreamConfig` fields set on top of ``config`` (``name=``, ``subjects=``, ...).

        Returns:
            The stream's handle.

        Raises:
            StreamNameInUseError: A stream of that name exists with another configuration.
            StreamSubjectOverlapError: Its subjects overlap another stream's.
            MaximumStreamsError: The account has as many streams as it may.
        """
        return Stream(self, self.add_stream(config, **fields))

    def create_or_update_stream(self, config: StreamConfig | None = None, **fields: Any) -> Stream:
        """Create the stream, or change it to this config if it exists.

        Args:
            config: The stream's configuration; left out, ``fields`` make it.
            **fields: :class:`StreamConfig` fields set on top of ``config`` (``name=``, ``subjects=``, ...).

        Returns:
            The stream's handle.

        Raises:
            StreamSubjectOverlapError: A new stream's subjects overlap another stream's.
            MaximumStreamsError: The stream is new, and the account has as many streams as it may.
            JetStreamAPIError: The server refused the change (some fields cannot change), or any other
                refusal.
        """
        return Stream(self, self._admin.create_or_update_stream(config, fields))

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on a pull consumer (ConsumerNotFoundError when there is none).

        Args:
            stream: The stream's name.
            name: The consumer's name (for a durable, its durable name).

        Returns:
            The consumer's handle, its current info in ``cached_info``.

        Raises:
            InvalidArgumentError: A bad stream or consumer name, raised before anything is sent; or the
                consumer is a push consumer (the handles read pull consumers).
            ConsumerNotFoundError: No such consumer on the stream.
            StreamNotFoundError: No such stream.
        """
        return Consumer(self, self.consumer_info(stream, name))

    def create_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        """Create a pull consumer on ``stream`` (an identical one is fine) and return its handle.

        Args:
            stream: The stream's name.
            config: The consumer's configuration; left out, ``fields`` make it.  ``ack_policy`` defaults to
                explicit.
            **fields: :class:`ConsumerConfig` fields set on top of ``config`` (``durable_name=``,
                ``filter_subject=``, ...).

        Returns:
            The consumer's handle.

        Raises:
            InvalidArgumentError: A bad name, config or unknown field, or a ``deliver_subject`` (that makes a
                push consumer); raised before anything is sent.
            StreamNotFoundError: No such stream.
            ConsumerAlreadyExistsError: A consumer of that name exists with another configuration.
            MaximumConsumersError: The stream or account has as many consumers as it may.
        """
        return pull_consumer(self, stream, config, fields, action="create")

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        """Create a pull consumer on ``stream``, or change the one of that name to this config; its handle.

        Args:
            stream: The stream's name.
            config: The consumer's configuration; left out, ``fields`` make it.  ``ack_policy`` defaults to
                explicit.
            **fields: :class:`ConsumerConfig` fields set on top of ``config`` (``durable_name=``,
                ``filter_subject=``, ...).

        Returns:
            The consumer's handle.

        Raises:
            InvalidArgumentError: A bad name, config or unknown field, or a ``deliver_subject`` (that makes a
                push consumer); raised before anything is sent.
            StreamNotFoundError: No such stream.
            MaximumConsumersError: The consumer is new, and the stream or account has as many as it may.
            JetStreamAPIError: The server refused the change (some fields cannot change), or any other
                refusal.
        """
        return pull_consumer(self, stream, config, fields, action="")

    def delete_stream(self, name: str) -> bool:
        """Delete a stream, its messages and its consumers.

        Args:
            name: The stream's name.

        Returns:
            True once the server has deleted it.

        Raises:
            StreamNotFoundError: No stream of that name.
        """
        return self._admin.delete_stream(name)

    def stream_info(
        self, name: str, subjects_filter: str | None = None, *, deleted_details: bool = False
    ) -> StreamInfo:
        """Stream config and state; ``subjects_filter`` fills ``state.subjects`` (all pages).

        Args:
            name: The stream's name.
            subjects_filter: A subject (wildcards allowed): ``state.subjects`` then counts the messages of
                every subject it matches.
            deleted_details: Also list the sequences of deleted messages, in ``state.deleted``.

        Returns:
            The stream's config and state.

        Raises:
            StreamNotFoundError: No stream of that name.
        """
        return self._admin.stream_info(name, subjects_filter, deleted_details)

    def streams(self, subject: str | None = None) -> list[StreamInfo]:
        """Every stream (all pages), optionally only those listening on ``subject``.

        Args:
            subject: Only the streams whose subjects match this one (wildcards allowed); left out, all.

        Returns:
            The info of each stream.
        """
        return self._admin.streams(subject)

    def stream_names(self, subject: str | None = None) -> list[str]:
        """The name of every stream (all pages), optionally only of those listening on ``subject``.

        Args:
            subject: Only the streams whose subjects match this one (wildcards allowed); left out, all.

        Returns:
            The names.
        """
        return self._admin.stream_names(subject)

    def find_stream(self, subject: str) -> str:
        """The one stream that stores ``subject``; a clear error for none or several.

        Args:
            subject: A subject a stream listens on.

        Returns:
            The stream's name.

        Raises:
            StreamNotFoundError: No stream, or more than one, listens on ``subject``; the text says which.
        """
        return self._admin.find_stream(subject)

    def purge_stream(
        self, name: str, subject: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """Purge all, or one subject, or up to (not including) ``seq``, or all but ``keep``; the count.

        Args:
            name: The stream's name.
            subject: Purge only the messages on this subject (wildcards allowed); goes with ``seq`` or
                ``keep``.
            seq: Purge the messages below this stream sequence.
            keep: Keep this many of the newest messages and purge the rest.

        Returns:
            How many messages were purged.

        Raises:
            InvalidArgumentError: A bad name, subject or number, or both ``seq`` and ``keep``; raised before
                anything is sent.
            StreamNotFoundError: No stream of that name.
        """
        return self._admin.purge_stream(name, subject, seq, keep)

    def get_msg(
        self,
        stream: str,
        seq: int | None = None,
        last_by_subj: str | None = None,
        next_by_subj: str | None = None,
        start_time: dt.datetime | None = None,
        *,
        timeout: Timeout = DEFAULT,
    ) -> StoredMsg:
        """One stored message via STREAM.MSG.GET: by ``seq``, last by subject, next from ``seq``, or by time.

        The stream's leader answers, so the stream needs no ``allow_direct`` (``direct_get`` does).

        Args:
            stream: The stream's name.
            seq: The message at this stream sequence; with ``next_by_subj``, where the search starts.
            last_by_subj: The last message on this subject.
            next_by_subj: The first message on this subject (wildcards allowed) from ``seq`` on (from 1 when
                ``seq`` is left out), or from ``start_time`` on.
            start_time: The first message stored at or after this time (timezone-aware; server 2.11+).
            timeout: Seconds to wait for the answer; left out, the context's; ``None``, no limit.

        Returns:
            The stored message.

        Raises:
            InvalidArgumentError: A bad name, subject, sequence or time, none of the four ways, or two that do
                not go together; raised before anything is sent.
            FeatureNotSupportedError: ``start_time`` on a server before 2.11.
            MessageNotFoundError: No message matches.
            StreamNotFoundError: No such stream.
        """
        wait = answer_limit(timeout, self.timeout)
        return self._admin.get_msg(stream, seq, last_by_subj, next_by_subj, start_time, wait)

    def delete_msg(self, stream: str, seq: int, *, erase: bool = False) -> bool:
        """Delete one message (``erase`` overwrites it on disk).

        Args:
            stream: The stream's name.
            seq: The message's stream sequence.
            erase: Overwrite its bytes in storage too, rather than only mark it deleted.

        Returns:
            True once the server has deleted it.

        Raises:
            StreamNotFoundError: No such stream.
            JetStreamAPIError: No message at ``seq``, the stream denies deletes, or any other refusal.
        """
        return self._admin.delete_msg(stream, seq, erase)

    # -- key-value ---------------------------------------------------------------------
    def create_key_value(
        self,
        bucket: str,
        history: int = 1,
        ttl: float | None = None,
        max_bytes: int | None = None,
        storage: str = "file",
        replicas: int = 1,
        max_value_size: int | None = None,
        description: str | None = None,
        limit_marker_ttl: float | None = None,
        *,
        compression: bool = False,
        mirror: str | None = None,
        sources: list[str] | None = None,
    ) -> KeyValue:
        """Create a bucket (or bind to an identical one); ``limit_marker_ttl`` enables key TTLs (2.11+).

        ``mirror="b"`` makes a read-only copy of bucket ``b`` (reads are served
        by the copy; writes go to ``b``); ``sources=["a", "b"]`` copies the keys
        of those buckets into this one.

        Args:
            bucket: The bucket's name (letters, digits, ``-`` and ``_``); its stream is ``KV_<bucket>``.
            history: How many values to keep per key, 1 to 64.
            ttl: Seconds a value lives before the server removes it; left out or 0, for ever.
            max_bytes: The most the bucket may hold, in bytes (a put past it is refused); left out, no limit.
            storage: ``"file"`` or ``"memory"``.
            replicas: How many servers keep a copy, 1 to 5.
            max_value_size: The largest value, in bytes; left out, only the server's ``max_payload`` limits it.
            description: Free text, kept in the bucket's stream config.
            limit_marker_ttl: Whole seconds (at least 1) that the marker left by a key removed by age lives,
                so watchers see it go; it enables key TTLs.
            compression: Compress what the bucket stores (s2).
            mirror: The bucket to copy, read-only.
            sources: The buckets whose keys to copy into this one.

        Returns:
            The bucket.

        Raises:
            InvalidArgumentError: A bad name or option, or ``mirror`` with ``sources`` or
                ``limit_marker_ttl``; raised before anything is sent.
            FeatureNotSupportedError: ``limit_marker_ttl`` on a server before 2.11.
            StreamNameInUseError: The bucket exists with other options.
        """
        return self._stores.create_key_value(bucket, {
            "history": history, "ttl": ttl, "max_bytes": max_bytes, "max_value_size": max_value_size,
            "storage": storage, "replicas": replicas, "description": description,
            "limit_marker_ttl": limit_marker_ttl, "compression": compression, "mirror": mirror, "sources": sources,
        })

    def update_key_value(self, bucket: str, **options: Any) -> KeyValue:
        """Change a bucket: ``options`` are create_key_value's, and the ones not given take their defaults.

        Args:
            bucket: The bucket's name.
            **options: Options of :meth:`create_key_value` (``history=``, ``ttl=``, ...).

        Returns:
            The bucket.

        Raises:
            FeatureNotSupportedError: ``limit_marker_ttl`` on a server before 2.11.
            StreamNotFoundError: No such bucket (its stream ``KV_<bucket>`` does not exist).
            JetStreamAPIError: The server refused the change (some options cannot change), or any other
                refusal.
        """
        return self._stores.update_key_value(bucket, options)

    def key_value_names(self) -> list[str]:
        """The buckets of this account: streams named KV_<bucket> (mirrors, which have no subjects, too).

        Returns:
            The bucket names, sorted.
        """
        return self._stores.names(KEY_VALUE)

    def key_values(self) -> list[KeyValueStatus]:
        """The status of every bucket, from one stream listing.

        Returns:
            The status of each bucket, sorted by name.
        """
        return self._stores.statuses(KEY_VALUE)

    def key_value(self, bucket: str) -> KeyValue:
        """Bind to an existing bucket (BucketNotFoundError if there is none).

        Args:
            bucket: The bucket's name.

        Returns:
            The bucket.

        Raises:
            BucketNotFoundError: No such bucket.
        """
        return self._stores.key_value(bucket)

    def delete_key_value(self, bucket: str) -> bool:
        """Delete a bucket and every key in it.

        Args:
            bucket: The bucket's name.

        Returns:
            True once the server has deleted it.

        Raises:
            StreamNotFoundError: No such bucket (its stream ``KV_<bucket>`` does not exist).
        """
        return self._stores.delete_key_value(bucket)

    # -- object store (ADR-20) ----------------------------------------------------------
    def create_object_store(
        self,
        bucket: str,
        *,
        description: str | None = None,
        ttl: float | None = None,
        max_bytes: int | None = None,
        storage: str = "file",
        replicas: int = 1,
        placement: api.Placement | None = None,
        compression: bool = False,
        metadata: dict[str, str] | None = None,
    ) -> ObjectStore:
        """Create an object store (or bind to an identical one).

        Args:
            bucket: The store's name (letters, digits, ``-`` and ``_``); its stream is ``OBJ_<bucket>``.
            description: Free text, kept in the store's stream config.
            ttl: Seconds an object lives before the server removes it; left out or 0, for ever.
            max_bytes: The most the store may hold, in bytes (a put past it is refused); left out, no limit.
            storage: ``"file"`` or ``"memory"``.
            replicas: How many servers keep a copy, 1 to 5.
            placement: Which cluster, or servers of which tags, hold it.
            compression: Compress what the store keeps (s2).
            metadata: Names and values (str to str) kept with the store.

        Returns:
            The object store.

        Raises:
            StreamNameInUseError: The store exists with other options.
        """
        return self._stores.create_object_store(bucket, {
            "description": description, "ttl": ttl, "max_bytes": max_bytes, "storage": storage,
            "replicas": replicas, "placement": placement, "compression": compression, "metadata": metadata,
        })

    def object_store(self, bucket: str) -> ObjectStore:
        """Bind to an existing object store (ObjectStoreNotFoundError if there is none).

        Args:
            bucket: The store's name.

        Returns:
            The object store.

        Raises:
            ObjectStoreNotFoundError: No such object store.
        """
        return self._stores.object_store(bucket)

    def object_store_names(self) -> list[str]:
        """The object stores of this account: streams named OBJ_<bucket>.

        Returns:
            The store names, sorted.
        """
        return self._stores.names(OBJECT_STORE)

    def object_stores(self) -> list[ObjectStoreStatus]:
        """The status of every object store, from one stream listing.

        Returns:
            The status of each object store, sorted by name.
        """
        return self._stores.statuses(OBJECT_STORE)

    def delete_object_store(self, bucket: str) -> bool:
        """Delete an object store and every object in it.

        Args:
            bucket: The store's name.

        Returns:
            True once the server has deleted it.

        Raises:
            ObjectStoreNotFoundError: No such object store.
        """
        return self._stores.delete_object_store(bucket)

    # -- consumers -----------------------------------------------------------------
    def add_consumer(
        self, stream: str, config: ConsumerConfig | None = None, *, action: str = "", timeout: Timeout = DEFAULT,
        **fields: Any,
    ) -> ConsumerInfo:
        """Create or update a consumer; ``action`` "create" or "update" restricts to one.

        ``ack_policy`` defaults to explicit (the server's own default, none,
        would never redeliver a message), as in the handles' calls.

        Args:
            stream: The stream's name.
            config: The consumer's configuration; left out, ``fields`` make it.
            action: ``"create"``: refuse to change an existing consumer; ``"update"``: refuse to create one;
                ``""``: either.
            timeout: Seconds to wait for the server; left out, the context's; ``None``, no limit.
            **fields: :class:`ConsumerConfig` fields set on top of ``config`` (``durable_name=``, ...).

        Returns:
            The consumer's info.

        Raises:
            InvalidArgumentError: A bad name, config, field or ``action``, raised before anything is sent.
            StreamNotFoundError: No such stream.
            ConsumerAlreadyExistsError: ``action="create"``, and the consumer exists with another
                configuration.
            ConsumerDoesNotExistError: ``action="update"``, and there is no such consumer.
            MaximumConsumersError: The stream or account has as many consumers as it may.
            JetStreamAPIError: The server refused the change (some fields cannot change), or any other
                refusal.
        """
        return self._admin.add_consumer(stream, config, action, fields, timeout)

    def update_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> ConsumerInfo:
        """Change an existing consumer: :meth:`add_consumer` with ``action="update"``.

        Args:
            stream: The stream's name.
            config: The consumer's new configuration; left out, ``fields`` make it.
            **fields: :class:`ConsumerConfig` fields set on top of ``config``; ``durable_name`` or ``name``
                says which consumer.

        Returns:
            The consumer's info after the change.

        Raises:
            StreamNotFoundError: No such stream.
            ConsumerDoesNotExistError: There is no such consumer.
            JetStreamAPIError: The server refused the change (some fields cannot change), or any other
                refusal.
        """
        return self.add_consumer(stream, config, action="update", **fields)

    def consumer_info(self, stream: str, consumer: str, timeout: Timeout = DEFAULT) -> ConsumerInfo:
        """A consumer's config and state.

        Args:
            stream: The stream's name.
            consumer: The consumer's name (for a durable, its durable name).
            timeout: Seconds to wait for the server; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).

        Returns:
            The consumer's config and state.

        Raises:
            ConsumerNotFoundError: No such consumer on the stream.
            StreamNotFoundError: No such stream.
        """
        return self._admin.consumer_info(stream, consumer, answer_limit(timeout, self.timeout))

    def delete_consumer(self, stream: str, consumer: str) -> bool:
        """Delete a consumer.

        Args:
            stream: The stream's name.
            consumer: The consumer's name (for a durable, its durable name).

        Returns:
            True once the server has deleted it.

        Raises:
            ConsumerNotFoundError: No such consumer on the stream.
            StreamNotFoundError: No such stream.
        """
        return self._admin.delete_consumer(stream, consumer)

    def consumers(self, stream: str) -> list[ConsumerInfo]:
        """Every consumer of a stream (all pages).

        Args:
            stream: The stream's name.

        Returns:
            The info of each consumer.

        Raises:
            StreamNotFoundError: No such stream.
        """
        return self._admin.consumers(stream)

    def consumer_names(self, stream: str) -> list[str]:
        """The name of every consumer of a stream (all pages).

        Args:
            stream: The stream's name.

        Returns:
            The names.

        Raises:
            StreamNotFoundError: No such stream.
        """
        return self._admin.consumer_names(stream)

    def pause_consumer(self, stream: str, consumer: str, until: dt.datetime) -> api.ConsumerPause:
        """Stop deliveries until ``until`` (aware); heartbeats go on, so nothing counts them missed.

        Args:
            stream: The stream's name.
            consumer: The consumer's name (for a durable, its durable name).
            until: When deliveries start again by themselves (a timezone-aware datetime).

        Returns:
            The consumer's pause (whether it is paused, until when, and for how long still).

        Raises:
            InvalidArgumentError: A bad name, or ``until`` not a timezone-aware datetime; raised before
                anything is sent.
            FeatureNotSupportedError: A server before 2.11.
            ConsumerNotFoundError: No such consumer on the stream.
        """
        return self._admin.pause_consumer(stream, consumer, until)

    def resume_consumer(self, stream: str, consumer: str) -> api.ConsumerPause:
        """Deliver again now (a consumer that is not paused stays as it is).

        Args:
            stream: The stream's name.
            consumer: The consumer's name (for a durable, its durable name).

        Returns:
            The consumer's pause, now not paused.

        Raises:
            FeatureNotSupportedError: A server before 2.11.
            ConsumerNotFoundError: No such consumer on the stream.
        """
        return self._admin.resume_consumer(stream, consumer)

    def reset_consumer(self, stream: str, consumer: str, seq: int | None = None) -> api.ConsumerResetInfo:
        """Deliver again from stream sequence ``seq`` (None: from just past the ack floor); server 2.14+.

        Args:
            stream: The stream's name.
            consumer: The consumer's name (for a durable, its durable name).
            seq: The stream sequence to deliver from (at least 1); left out, from just past the ack floor.

        Returns:
            The consumer's info, with the sequence it delivers from next in ``reset_seq``.

        Raises:
            FeatureNotSupportedError: A server before 2.14.
            ConsumerNotFoundError: No such consumer on the stream.
        """
        return self._admin.reset_consumer(stream, consumer, seq)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Release a pinned_client group's pin: the next pull of any member gets it (ADR-42).

        Args:
            stream: The stream's name.
            consumer: The consumer's name (for a durable, its durable name).
            group: The priority group whose pin to release.

        Raises:
            FeatureNotSupportedError: A server before 2.11.
            ConsumerNotFoundError: No such consumer on the stream.
            JetStreamAPIError: Any other refusal by the server (a group the consumer does not have, say).
        """
        self._admin.unpin_consumer(stream, consumer, group)

    # -- subscribing -----------------------------------------------------------------
    @overload
    def subscribe(
        self, subject: str | None = None, *, durable: str | None = None, queue: str | None = None,
        stream: str | None = None, consumer: str | None = None, config: ConsumerConfig | None = None,
        callback: Callable[[Msg], None] | None = None, manual_ack: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False, heartbeat_alarm: float | None = None, ordered: Literal[False] = False,
        pending_msgs_limit: int | None = None, pending_bytes_limit: int | None = None,
    ) -> PushSubscription: ...

    @overload
    def subscribe(
        self, subject: str | None = None, *, durable: str | None = None, queue: str | None = None,
        stream: str | None = None, consumer: str | None = None, config: ConsumerConfig | None = None,
        callback: Callable[[Msg], None] | None = None, manual_ack: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False, heartbeat_alarm: float | None = None, ordered: Literal[True],
        pending_msgs_limit: int | None = None, pending_bytes_limit: int | None = None,
    ) -> OrderedSubscription: ...

    @overload
    def subscribe(
        self, subject: str | None = None, *, durable: str | None = None, queue: str | None = None,
        stream: str | None = None, consumer: str | None = None, config: ConsumerConfig | None = None,
        callback: Callable[[Msg], None] | None = None, manual_ack: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False, heartbeat_alarm: float | None = None, ordered: bool = False,
        pending_msgs_limit: int | None = None, pending_bytes_limit: int | None = None,
    ) -> PushSubscription | OrderedSubscription: ...

    @renamed_keywords(cb="callback")
    def subscribe(
        self, subject: str | None = None, *, durable: str | None = None, queue: str | None = None,
        stream: str | None = None, consumer: str | None = None, config: ConsumerConfig | None = None,
        callback: Callable[[Msg], None] | None = None, manual_ack: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False, heartbeat_alarm: float | None = None, ordered: bool = False,
        pending_msgs_limit: int | None = None, pending_bytes_limit: int | None = None,
    ) -> PushSubscription | OrderedSubscription:
        """A push subscription (ADR-15), or with ``ordered=True`` an ordered consumer (ADR-17).

        Args:
            subject: The subject to read (wildcards allowed); it also finds the stream when ``stream`` is left
                out, and filters a consumer created here.
            durable: The durable consumer to bind to, or to create (it outlives the subscription).
            queue: A queue group: its members share the consumer's messages.  Without ``durable`` or
                ``consumer``, it is the durable's name too.
            stream: The stream to read; left out, the one that stores ``subject``.
            consumer: An existing consumer to bind to.
            config: The configuration of a consumer to create; when binding to an existing one, the fields it
                sets must match that consumer's.
            callback: Called with each message on the subscription's own thread; left out, take the messages
                with ``next_msg``.
            manual_ack: With ``callback``, leave the acks to it; otherwise each message is acked once the
                callback returns.
            idle_heartbeat: Seconds between the server's heartbeats while it has nothing to deliver.
            flow_control: Have the server pace deliveries to what this subscription takes (needs
                ``idle_heartbeat``).
            heartbeat_alarm: Seconds of silence (no message, no heartbeat) after which HeartbeatsMissedError
                is reported; left out, three heartbeats.
            ordered: Make it an ordered consumer: every message once and in order, no acks, recreated after
                a gap.
            pending_msgs_limit: How many messages may wait in the subscription's queue before it drops them
                (a slow consumer; an ordered one recreates its consumer there, so they come again); left out,
                the connection's default.
            pending_bytes_limit: The same, in bytes.

        Returns:
            The push subscription, or with ``ordered=True`` the ordered one.

        Raises:
            InvalidArgumentError: A bad option, or two that do not go together (``durable`` with ``ordered``,
                say); raised before anything is sent.
            JetStreamSubscribeError: The existing consumer cannot serve this subscription (a pull consumer,
                one bound already, another filter, queue group or config).
            ConsumerNotFoundError: ``consumer`` names no consumer of the stream.
            StreamNotFoundError: No stream of that name, or no stream (or several) stores ``subject``.
            JetStreamAPIError: The server refused to create the consumer.
        """
        return self._subscriber.subscribe(
            subject, durable=durable, queue=queue, stream=stream, consumer=consumer, config=config, cb=callback,
            manual_ack=manual_ack, idle_heartbeat=idle_heartbeat, flow_control=flow_control,
            heartbeat_alarm=heartbeat_alarm, ordered=ordered, pending_msgs_limit=pending_msgs_limit,
            pending_bytes_limit=pending_bytes_limit,
        )

    def pull_subscribe(
        self,
        subject: str | None = None,
        durable: str | None = None,
        *,
        stream: str | None = None,
        consumer: str | None = None,
        config: ConsumerConfig | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> PullSubscription:
        """A pull subscription (ADR-13): ``fetch`` batches or iterate ``messages()``.

        ``group`` makes it a member of the consumer's priority group (ADR-42,
        server 2.11+); under pinned_client the pin is kept and renewed by itself.

        Args:
            subject: As :meth:`subscribe`'s.
            durable: The durable consumer to bind to, or to create; left out (with no ``consumer``), an
                ephemeral one.
            stream: As :meth:`subscribe`'s.
            consumer: As :meth:`subscribe`'s.
            config: As :meth:`subscribe`'s.
            group: The consumer's priority group to pull as a member of.
            min_pending: With ``group``, under the overflow policy: this member's pulls are served only while
                the consumer has at least this many messages pending.
            min_ack_pending: With ``group``, under the overflow policy: served only while at least this many
                acks are pending.
            priority: With ``group``, under the prioritized policy: this member's priority, 0 (served first)
                to 9.

        Returns:
            The pull subscription.

        Raises:
            InvalidArgumentError: A bad option, two that do not go together, or a membership the consumer's
                priority policy cannot serve.
            FeatureNotSupportedError: ``group`` on a server before 2.11, or a config that needs a newer one.
            JetStreamSubscribeError: The existing consumer cannot serve this subscription (a push consumer,
                another filter or config).
            ConsumerNotFoundError: ``consumer`` names no consumer of the stream.
            StreamNotFoundError: No stream of that name, or no stream (or several) stores ``subject``.
            JetStreamAPIError: The server refused to create the consumer.
        """
        return self._subscriber.pull_subscribe(
            subject, durable, stream=stream, consumer=consumer, config=config, group=group,
            min_pending=min_pending, min_ack_pending=min_ack_pending, priority=priority,
        )

    # -- publishing ------------------------------------------------------------------
    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        msg_id: str | None = None,
        expected_stream: str | None = None, expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None, expected_last_msg_id: str | None = None,
        headers: HeadersInput | None = None,
        timeout: Timeout = DEFAULT,
        ttl: msgopts.TTL | None = None,
        schedule: msgopts.Schedule | None = None, schedule_target: str | None = None,
        schedule_source: str | None = None, schedule_ttl: msgopts.TTL | None = None,
        schedule_time_zone: str | None = None,
    ) -> PubAck:
        """Publish and wait for the stream's ack.

        A ``ttl`` needs a stream with ``allow_msg_ttl`` (ADR-43), a ``schedule``
        one with ``allow_msg_schedules`` (ADR-51).  A 503 (no stream answered,
        as during a leader election) is retried a few times with backoff
        before NoStreamResponseError.

        Args:
            subject: Where to publish; a stream must store it.
            payload: The message body (bytes-like).
            msg_id: Sets ``Nats-Msg-Id``: the stream stores a message with this id once within its duplicate
                window.
            expected_stream: Refuse the message unless this stream stores it.
            expected_last_seq: Refuse the message unless the stream's last sequence is this.
            expected_last_subject_seq: Refuse the message unless the last message on ``subject`` has this
                sequence (0: there is none yet).
            expected_last_msg_id: Refuse the message unless the stream's last message has this ``msg_id``.
            headers: Headers to send with the message.
            timeout: Seconds to wait for the ack; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).
            ttl: Remove the message after this many whole seconds (at least 1), or ``"never"`` (it then outlives
                the stream's ``max_age``).
            schedule: Make the message a schedule: an aware ``datetime`` (once, then), a ``timedelta`` (every so
                often) or the ADR-51 text (``@every 5m``, ``@hourly``, a cron line of 6 fields, ...).
                Repeating schedules need server 2.14.
            schedule_target: The subject the schedule publishes to: another subject of the stream.
            schedule_source: Publish the last message on this subject (no wildcards) instead of the
                schedule's own body; server 2.14+ (2.12 would ignore it, so it is refused there).
            schedule_ttl: The ``ttl`` of each message the schedule publishes.
            schedule_time_zone: The IANA zone (``"Europe/Amsterdam"``) a cron schedule runs in; left out, UTC.

        Returns:
            The stream's acknowledgement.

        Raises:
            InvalidArgumentError: A bad subject, header or option (a ``schedule_*`` option without ``schedule``,
                say), or a message over the server's ``max_payload``; raised before anything is sent.
            BadPayloadError: ``payload`` is not bytes-like (a ``str``, say).
            FeatureNotSupportedError: ``ttl``, ``schedule`` or ``schedule_source`` on a server too old for it.
            TimeoutError: No ack within ``timeout``; the message may still have been stored.
            NoStreamResponseError: No stream answered, even after the retries (none stores ``subject``).
            WrongLastSequenceError: ``expected_last_seq`` or ``expected_last_subject_seq`` did not hold.
            WrongLastMsgIdError: ``expected_last_msg_id`` did not hold.
            StreamMismatchError: ``expected_stream`` did not hold.
            MsgIdInProcessError: A publish with this ``msg_id`` is still in flight: send again later with the
                same ``msg_id``.
            MessageTTLError: The stream refused the ``ttl`` (TTLs are off on it, or the value is invalid).
            ScheduleError: The stream refused the schedule.
        """
        options = publish_options(msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                                  expected_last_msg_id, ttl, schedule, schedule_target, schedule_source,
                                  schedule_ttl, schedule_time_zone)
        return self._publisher.publish(subject, payload, options, headers, answer_limit(timeout, self.timeout))

    def publish_async(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        msg_id: str | None = None,
        expected_stream: str | None = None, expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None, expected_last_msg_id: str | None = None,
        headers: HeadersInput | None = None,
        timeout: Timeout = DEFAULT,
        retry_on_no_responders: int = 0,
        ttl: msgopts.TTL | None = None,
        schedule: msgopts.Schedule | None = None, schedule_target: str | None = None,
        schedule_source: str | None = None, schedule_ttl: msgopts.TTL | None = None,
        schedule_time_zone: str | None = None,
    ) -> Future[PubAck]:
        """Publish without waiting: a Future resolved with the PubAck, an API error or a timeout.

        Blocks (up to ``timeout``) while ``publish_async_max_pending`` acks are
        outstanding, resuming once an eighth of them have settled.  Every
        future resolves; none hangs.  ``retry_on_no_responders=N`` sends the
        same message again (same headers, so give a ``msg_id``), up to N times
        with backoff, when no stream answered (as while a stream elects a new
        leader), before the future fails with NoStreamResponseError.  The
        message's options are those of :meth:`publish`.

        Args:
            subject, payload, msg_id, expected_stream, expected_last_seq: As :meth:`publish`'s.
            expected_last_subject_seq, expected_last_msg_id, headers: As :meth:`publish`'s.
            timeout: Seconds to wait for room in the window, then for the ack (the future fails with
                TimeoutError after that); left out, the context's; ``None``, no limit (see :doc:`/conventions`).
            retry_on_no_responders: How many times to send the message again while no stream answers; each
                try waits up to ``timeout`` for its ack (unlike :meth:`publish`, whose tries share one).
            ttl, schedule, schedule_target, schedule_source, schedule_ttl, schedule_time_zone: As :meth:`publish`'s.

        Returns:
            A future resolved with the stream's ack, or failed with what :meth:`publish` would raise once the
            message is out (an API error such as WrongLastSequenceError, NoStreamResponseError, TimeoutError or
            ConnectionClosedError).

        Raises:
            InvalidArgumentError: As :meth:`publish`.
            BadPayloadError: As :meth:`publish`.
            TimeoutError: The window stayed full for ``timeout``; nothing was sent.
        """
        options = publish_options(msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                                  expected_last_msg_id, ttl, schedule, schedule_target, schedule_source,
                                  schedule_ttl, schedule_time_zone)
        wait = answer_limit(timeout, self.timeout)
        return self._publisher.publish_async(subject, payload, options, headers, wait, retry_on_no_responders)

    @property
    def publish_async_pending(self) -> int:
        """How many of this context's publish_async futures are not resolved yet (in this process)."""
        return self._publisher.pending

    def publish_async_completed(self, timeout: float | None = 10.0) -> None:
        """Wait until every publish_async future (of this process) has resolved.

        ``timeout=None`` waits with no limit; ``0`` only checks that none is pending.

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0``, do not wait (see :doc:`/conventions`).

        Raises:
            TimeoutError: Futures were still unresolved after ``timeout``.
        """
        self._publisher.completed(take_limit(timeout))

    # -- batches (ADR-50) ------------------------------------------------------------
    def publish_batch(
        self, messages: Iterable[Any], *, timeout: Timeout = DEFAULT, batch_id: str | None = None
    ) -> BatchAck:
        """Publish up to 1,000 messages as one atomic batch (ADR-50): all are stored, or none.

        Every message is checked before anything is sent.  The stream needs
        ``allow_atomic=True`` (server 2.12+).

        Args:
            messages: The messages, ``(subject, data)`` pairs or mappings with the keys subject, data,
                headers, msg_id.
            timeout: Seconds to wait for the ack; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).
            batch_id: The batch's id (1 to 64 characters, no whitespace); left out, a random one.

        Returns:
            The batch's ack (its stream, the sequence of its last message, and its count).

        Raises:
            InvalidArgumentError: A bad message, ``batch_id`` or ``timeout``, no message, more than 1,000,
                or one over the server's ``max_payload``; raised before anything is sent.
            BadPayloadError: A message's ``data`` is not bytes-like.
            FeatureNotSupportedError: A server before 2.12.
            BatchNotEnabledError: The stream does not take atomic batches (it needs ``allow_atomic``).
            BatchDuplicateMsgIdError: A message's ``msg_id`` is in the stream already.
            BatchTooLargeError: More messages than the server allows.
            BatchTooManyInflightError: The stream or server has too many batches open; try again later.
            BatchIncompleteError: The server abandoned the batch; sending it again is safe.
            BatchPublishError: Any other refusal of the batch (none of its messages was stored).
            BatchInterruptedError: The connection broke during the batch and the commit was not answered in
                time; read the stream before sending it again.
            NoStreamResponseError: No stream stores the subject of the last message.
            TimeoutError: No ack within ``timeout``; the batch may still have been stored.
        """
        wait = answer_limit(timeout, self.timeout)
        # An older server ignores the batch headers and stores every message on its own: not atomic.
        self.require(features.ATOMIC_BATCH)
        return batch.publish_batch(self, messages, timeout=wait, batch_id=batch_id)

    def publish_stream(
        self,
        messages: Iterable[Any],
        *,
        gaps: str = "fail",
        flow: int = fastbatch.DEFAULT_FLOW,
        outstanding_acks: int = 2,
        timeout: Timeout = DEFAULT,
    ) -> fastbatch.FastBatchAck:
        """Publish any number of messages as one fast-ingest batch (ADR-50, server 2.14+).

        The stream needs ``allow_batched``.  The server sets the pace (an ack
        every ``flow`` messages at most); with ``gaps="fail"`` every message is
        stored, in order, or FastBatchError says how many were.

        Args:
            messages: The messages: any iterable of ``(subject, data)`` pairs or mappings with the keys
                subject, data, headers, msg_id.
            gaps: ``"fail"``: end the batch at the first lost or refused message; ``"ok"``: go on, and list
                them in the ack.
            flow: The most messages the server may take between two acks, 1 to 65535 (it may ack more
                often).
            outstanding_acks: How many acks (1 to 3) the publisher may run ahead of before it waits.
            timeout: Seconds each wait for the server may last; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).

        Returns:
            The batch's final ack; with ``gaps="ok"``, it lists the gaps and the refused messages.

        Raises:
            InvalidArgumentError: A bad option or message, or no message.  A bad message after the first
                ends the batch there, and the error says how many messages before it were stored.
            BadPayloadError: A message's ``data`` is not bytes-like; the messages before it may have been
                stored.
            FeatureNotSupportedError: A server before 2.14.
            FastBatchError: With ``gaps="fail"``, the batch ended before every message was stored; it says
                how many were.
            BatchNotEnabledError: The stream does not take fast-ingest batches (it needs ``allow_batched``).
            BatchTooManyInflightError: The stream or server has too many batches open; try again later.
            NoStreamResponseError: No stream stores a message's subject.
            TimeoutError: No answer from the stream within ``timeout`` during one of the waits.
        """
        return fastbatch.publish_stream(
            self, messages, gaps=gaps, flow=flow, outstanding_acks=outstanding_acks,
            timeout=answer_limit(timeout, self.timeout),
        )

    def atomic_batch(self, timeout: Timeout = DEFAULT) -> AtomicBatch:
        """``with js.atomic_batch() as b: b.add(subject, data)``: commits on exit, sends nothing on an error.

        Args:
            timeout: Seconds the commit waits for the batch's ack; left out, the context's; ``None``, no limit
                (see :doc:`/conventions`).

        Returns:
            An empty batch; give it messages with :meth:`AtomicBatch.add`, then :meth:`AtomicBatch.commit` it
            (or leave the ``with`` block).

        Raises:
            FeatureNotSupportedError: A server before 2.12.
        """
        batch = AtomicBatch(self, timeout)
        self.require(features.ATOMIC_BATCH)
        return batch


__all__ = ["PUBLISH_RETRY", "JetStream", "JetStreamAPIError"]
