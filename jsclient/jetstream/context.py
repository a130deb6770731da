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
from .handles import Consumer, Stream
from .kv import KeyValue, KeyValueStatus
from .objectstore import ObjectStore, ObjectStoreStatus
from .ordered import OrderedSubscription
from .publisher import PUBLISH_RETRY, Publisher, publish_options, window_size
from .pull import PullSubscription
from .push import PushSubscription
from .reads import Reads
from .stores import Stores
from .subscriber import Subscriber

if TYPE_CHECKING:
    from ..connection import Connection
    from ..message import Msg


class JetStream(Reads):
    """JetStream on one connection.  Create with ``nc.jetstream()``.

    The direct gets and counter reads are those of :class:`.reads.Reads`.
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
        """The API level ``needs`` take; FeatureNotSupportedError, before sending, if the server is older."""
        return features.require(self.conn.server_info, list(needs))

    # -- account -----------------------------------------------------------------
    def account_info(self) -> AccountInfo:
        return self._admin.account_info()

    def api_level(self) -> int:
        """The JetStream API level (ADR-44) of the server answering for this account: 0 before 2.11.

        Asked of JetStream itself, not read from the connected server's INFO,
        which a leaf node may make older or newer than JetStream is.
        """
        return self.account_info().api.level

    # -- streams -------------------------------------------------------------------
    def add_stream(self, config: StreamConfig | None = None, **fields: Any) -> StreamInfo:
        """Create a stream (idempotent for an identical config)."""
        return self._admin.add_stream(config, fields)

    def update_stream(self, config: StreamConfig | None = None, **fields: Any) -> StreamInfo:
        """Change a stream; fields the server sent that jsclient does not know go back unchanged."""
        return self._admin.update_stream(config, fields)

    # -- ADR-37 handles ---------------------------------------------------------------
    def stream(self, name: str) -> Stream:
        """A handle on the stream ``name`` (StreamNotFoundError when there is none)."""
        return Stream(self, self.stream_info(name))

    def create_stream(self, config: StreamConfig | None = None, **fields: Any) -> Stream:
        """Create a stream (an identical one is fine) and return its handle."""
        return Stream(self, self.add_stream(config, **fields))

    def create_or_update_stream(self, config: StreamConfig | None = None, **fields: Any) -> Stream:
        """Create the stream, or change it to this config if it exists."""
        return Stream(self, self._admin.create_or_update_stream(config, fields))

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on a pull consumer (ConsumerNotFoundError when there is none)."""
        return Consumer(self, self.consumer_info(stream, name))

    def create_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        return self.stream(stream).create_consumer(config, **fields)

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        return self.stream(stream).create_or_update_consumer(config, **fields)

    def delete_stream(self, name: str) -> bool:
        return self._admin.delete_stream(name)

    def stream_info(
        self, name: str, subjects_filter: str | None = None, *, deleted_details: bool = False
    ) -> StreamInfo:
        """Stream config and state; ``subjects_filter`` fills ``state.subjects`` (all pages)."""
        return self._admin.stream_info(name, subjects_filter, deleted_details)

    def streams(self, subject: str | None = None) -> list[StreamInfo]:
        """Every stream (all pages), optionally only those listening on ``subject``."""
        return self._admin.streams(subject)

    def stream_names(self, subject: str | None = None) -> list[str]:
        return self._admin.stream_names(subject)

    def find_stream(self, subject: str) -> str:
        """The one stream that stores ``subject``; a clear error for none or several."""
        return self._admin.find_stream(subject)

    def purge_stream(
        self, name: str, subject: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """Purge all, or one subject, or up to (not including) ``seq``, or all but ``keep``; the count."""
        return self._admin.purge_stream(name, subject, seq, keep)

    def get_msg(
        self,
        stream: str,
        seq: int | None = None,
        last_by_subj: str | None = None,
        next_by_subj: str | None = None,
        start_time: dt.datetime | None = None,
    ) -> StoredMsg:
        """One stored message via STREAM.MSG.GET: by ``seq``, last by subject, next from ``seq``, or by time."""
        return self._admin.get_msg(stream, seq, last_by_subj, next_by_subj, start_time)

    def delete_msg(self, stream: str, seq: int, *, erase: bool = False) -> bool:
        """Delete one message (``erase`` overwrites it on disk)."""
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
        """
        return self._stores.create_key_value(bucket, {
            "history": history, "ttl": ttl, "max_bytes": max_bytes, "max_value_size": max_value_size,
            "storage": storage, "replicas": replicas, "description": description,
            "limit_marker_ttl": limit_marker_ttl, "compression": compression, "mirror": mirror, "sources": sources,
        })

    def update_key_value(self, bucket: str, **options: Any) -> KeyValue:
        """Change a bucket: ``options`` are create_key_value's, and the ones not given take their defaults."""
        return self._stores.update_key_value(bucket, options)

    def key_value_names(self) -> list[str]:
        """The buckets of this account: streams named KV_<bucket> (mirrors, which have no subjects, too)."""
        return self._stores.key_value_names()

    def key_values(self) -> list[KeyValueStatus]:
        """The status of every bucket, from one stream listing."""
        return self._stores.key_values()

    def key_value(self, bucket: str) -> KeyValue:
        """Bind to an existing bucket (BucketNotFoundError if there is none)."""
        return self._stores.key_value(bucket)

    def delete_key_value(self, bucket: str) -> bool:
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
        """Create an object store (or bind to an identical one)."""
        return self._stores.create_object_store(bucket, {
            "description": description, "ttl": ttl, "max_bytes": max_bytes, "storage": storage,
            "replicas": replicas, "placement": placement, "compression": compression, "metadata": metadata,
        })

    def object_store(self, bucket: str) -> ObjectStore:
        """Bind to an existing object store (ObjectStoreNotFoundError if there is none)."""
        return self._stores.object_store(bucket)

    def object_store_names(self) -> list[str]:
        return self._stores.object_store_names()

    def object_stores(self) -> list[ObjectStoreStatus]:
        """The status of every object store, from one stream listing."""
        return self._stores.object_stores()

    def delete_object_store(self, bucket: str) -> bool:
        return self._stores.delete_object_store(bucket)

    # -- consumers -----------------------------------------------------------------
    def add_consumer(
        self, stream: str, config: ConsumerConfig | None = None, *, action: str = "", **fields: Any
    ) -> ConsumerInfo:
        """Create or update a consumer; ``action`` "create" or "update" restricts to one.

        ``ack_policy`` defaults to explicit (the server's own default, none,
        would never redeliver a message), as in the handles' calls.
        """
        return self._admin.add_consumer(stream, config, action, fields)

    def update_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> ConsumerInfo:
        return self.add_consumer(stream, config, action="update", **fields)

    def consumer_info(self, stream: str, consumer: str, timeout: Timeout = DEFAULT) -> ConsumerInfo:
        return self._admin.consumer_info(stream, consumer, answer_limit(timeout, self.timeout))

    def delete_consumer(self, stream: str, consumer: str) -> bool:
        return self._admin.delete_consumer(stream, consumer)

    def consumers(self, stream: str) -> list[ConsumerInfo]:
        return self._admin.consumers(stream)

    def consumer_names(self, stream: str) -> list[str]:
        return self._admin.consumer_names(stream)

    def pause_consumer(self, stream: str, consumer: str, until: dt.datetime) -> api.ConsumerPause:
        """Stop deliveries until ``until`` (aware); heartbeats go on, so nothing counts them missed."""
        return self._admin.pause_consumer(stream, consumer, until)

    def resume_consumer(self, stream: str, consumer: str) -> api.ConsumerPause:
        """Deliver again now (a consumer that is not paused stays as it is)."""
        return self._admin.resume_consumer(stream, consumer)

    def reset_consumer(self, stream: str, consumer: str, seq: int | None = None) -> api.ConsumerResetInfo:
        """Deliver again from stream sequence ``seq`` (None: from just past the ack floor); server 2.14+."""
        return self._admin.reset_consumer(stream, consumer, seq)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Release a pinned_client group's pin: the next pull of any member gets it (ADR-42)."""
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
        """A push subscription (ADR-15), or with ``ordered=True`` an ordered consumer (ADR-17)."""
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
        server 2.11+): ``min_pending``/``min_ack_pending`` under the overflow
        policy, ``priority`` (0 first, to 9) under prioritized; under
        pinned_client the pin is kept and renewed by itself.
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

        ``ttl`` (whole seconds >= 1, or "never") removes the message after
        that long (ADR-43: the stream needs ``allow_msg_ttl``).  ``schedule``
        makes the message a schedule that publishes its body to
        ``schedule_target`` (ADR-51: the stream needs ``allow_msg_schedules``).
        A 503 (no stream answered, as during a leader election) is retried a
        few times with backoff before NoStreamResponseError.
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
        leader), before the future fails with NoStreamResponseError.  ``ttl``
        and the schedule options are those of :meth:`publish`.
        """
        options = publish_options(msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
                                  expected_last_msg_id, ttl, schedule, schedule_target, schedule_source,
                                  schedule_ttl, schedule_time_zone)
        wait = answer_limit(timeout, self.timeout)
        return self._publisher.publish_async(subject, payload, options, headers, wait, retry_on_no_responders)

    @property
    def publish_async_pending(self) -> int:
        return self._publisher.pending

    def publish_async_completed(self, timeout: float | None = 10.0) -> None:
        """Wait until every publish_async future (of this process) has resolved.

        ``timeout=None`` waits with no limit; ``0`` only checks that none is pending.
        """
        self._publisher.completed(take_limit(timeout))

    # -- batches (ADR-50) ------------------------------------------------------------
    def publish_batch(
        self, messages: Iterable[Any], *, timeout: Timeout = DEFAULT, batch_id: str | None = None
    ) -> BatchAck:
        """Publish up to 1,000 messages as one atomic batch (ADR-50): all are stored, or none.

        ``messages`` are ``(subject, data)`` pairs or mappings with the keys
        subject, data, headers, msg_id; every one is checked before anything
        is sent.  The stream needs ``allow_atomic=True`` (server 2.12+).
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

        ``messages`` are (subject, data) pairs or mappings with subject, data,
        headers, msg_id, from any iterable (a generator streams).  The stream
        needs ``allow_batched``.  The server sets the pace: an ack every
        ``flow`` messages at most, and the publisher waits when
        ``outstanding_acks`` acks are due.  With ``gaps="fail"`` (the default)
        every message is stored, in order, or FastBatchError says how many
        were; with ``gaps="ok"`` lost or refused messages are reported in the
        returned ack and the batch goes on.  ``timeout`` bounds each wait for
        the server.
        """
        return fastbatch.publish_stream(
            self, messages, gaps=gaps, flow=flow, outstanding_acks=outstanding_acks,
            timeout=answer_limit(timeout, self.timeout),
        )

    def atomic_batch(self, timeout: Timeout = DEFAULT) -> AtomicBatch:
        """``with js.atomic_batch() as b: b.add(subject, data)``: commits on exit, sends nothing on an error."""
        batch = AtomicBatch(self, timeout)
        self.require(features.ATOMIC_BATCH)
        return batch


__all__ = ["PUBLISH_RETRY", "JetStream", "JetStreamAPIError"]
