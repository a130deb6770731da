"""JetStream: management calls, publish with acks, and async publish.

Runs on the calling (user) thread; every call is a request over the
connection's shared reply inbox.  ``publish_async`` acks are decoded on the
connection's reader thread (library code only; done-callbacks run on its
events thread).  The async-publish window (:class:`_Window`: the count of
outstanding async publishes, guarded by its lock) is the only mutable state
here, so one context may be shared by many threads.  A forked child gets a
new window: the parent's acks never reach the child, and a lock a parent's
thread held at the fork would stay held.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from msgspec import UNSET

from ..backoff import Backoff
from ..checks import check_timeout, seconds, whole
from ..core import fork
from ..errors import (
    DirectGetDisabledError,
    Error,
    InvalidArgumentError,
    JetStreamAPIError,
    JetStreamNotEnabledError,
    MessageNotFoundError,
    NoRespondersError,
    NoStreamResponseError,
    ObjectStoreNotFoundError,
    StreamNotFoundError,
    TimeoutError,
)
from ..futures import ReplyKind
from ..headers import Headers, HeadersInput, status_of
from ..protocol import check_publish_subject, check_subscribe_subject
from . import api, batch, fastbatch, features, msgopts
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
from .direct import (
    DirectBatch,
    LastRequest,
    StoredMessage,
    direct_get,
    direct_get_batch,
    direct_get_last_for_subjects,
    read_last,
)
from .handles import Consumer, Stream
from .kv import BUCKET_OPTIONS, KeyValue, KeyValueStatus, bucket_config, bucket_status, check_bucket, open_bucket
from .objectstore import ObjectStore, ObjectStoreStatus, open_store, store_config
from .objectstore import bucket_status as object_store_status
from .ordered import OrderedSubscription, subscribe_ordered
from .pull import PullSubscription, pull_subscribe
from .push import PushSubscription
from .push import subscribe as subscribe_push

if TYPE_CHECKING:
    from ..connection import Connection
    from ..message import Msg

T = TypeVar("T")

#: A publish without msg_id, expectations, ttl or schedule (see JetStream._publish_headers).
_NO_OPTIONS = (None,) * 11

#: A 503 from a JetStream publish usually means a leader election: four tries, 50 ms doubling up to 1 s apart.
PUBLISH_RETRY = Backoff(initial=0.05, maximum=1.0, attempts=4)


class _Window:
    """The async-publish window of one context in one process."""

    __slots__ = ("blocked", "cond", "lock", "pending")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.pending = 0  # async publishes not settled yet (guarded by lock)
        self.blocked = 0  # publishers waiting for the window to reopen (guarded by lock)


class JetStream:
    """JetStream on one connection.  Create with ``nc.jetstream()``."""

    def __init__(
        self,
        conn: Connection,
        *,
        prefix: str = "$JS.API",
        domain: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
    ) -> None:
        if domain is not None:
            api.check_name("domain", domain)
            prefix = f"$JS.{domain}.API"
        check_publish_subject(prefix, "JetStream API prefix")
        seconds("timeout", timeout)
        if (
            isinstance(publish_async_max_pending, bool)
            or not isinstance(publish_async_max_pending, int)
            or publish_async_max_pending < 1
        ):
            raise InvalidArgumentError(
                f"publish_async_max_pending must be a positive int, not {publish_async_max_pending!r}"
            )
        self.conn = conn
        self.prefix = prefix
        self.domain = domain
        self.timeout = float(timeout)
        #: (stream, subject) -> how to read its last message, once checked (see direct.read_last; a cache:
        #: losing it costs a check).
        self.last_requests: dict[tuple[str, str], LastRequest[StoredMessage]] = {}
        self.publish_async_max_pending = publish_async_max_pending
        self._window = _Window()
        # How an async publish's reply settles its future: decoded as an ack, reopening the window.
        self._ack_kind = ReplyKind(_decode_async_ack, self._release_pending, self._send_pending)
        # Tries of a publish with retries: their caller's future reopens the window, once, when it resolves.
        self._retry_kind = ReplyKind(_decode_async_ack, None, self._send_pending)
        self._resume_at = publish_async_max_pending - max(1, publish_async_max_pending // 8)
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The fork hook (see :mod:`jsclient.core.fork`): the child's publishes start with a window of their own."""
        self._window = _Window()

    def __repr__(self) -> str:
        return f"<JetStream prefix={self.prefix!r} on {self.conn!r}>"

    # -- the API call ------------------------------------------------------------
    def _api(self, suffix: str, body: Any = None, timeout: float | None = None, *, level: int = 0) -> bytes:
        """Request ``<prefix>.<suffix>``; a missing JetStream becomes JetStreamNotEnabledError.

        ``level`` > 0 asks the answering server for that API level (ADR-44).
        """
        payload = b"" if body is None else api.encode_body(body)
        subject = f"{self.prefix}.{suffix}"
        headers = {features.LEVEL_HEADER: str(level)} if level else None
        try:
            reply = self.conn.request(subject, payload, timeout=timeout or self.timeout, headers=headers)
        except NoRespondersError:
            raise JetStreamNotEnabledError(
                503, 0, f"no JetStream responded on {subject!r}: not enabled (or not for this account or domain)"
            ) from None
        except TimeoutError as exc:
            raise TimeoutError(f"JetStream API {subject!r}: {exc}") from None
        return reply.data

    def _call(self, suffix: str, body: Any, kind: type[T], timeout: float | None = None, *, level: int = 0) -> T:
        return api.decode_reply(self._api(suffix, body, timeout, level=level), kind)

    def require(self, *needs: features.Feature) -> int:
        """The API level ``needs`` take; FeatureNotSupportedError, before sending, if the server is older."""
        return features.require(self.conn.server_info, list(needs))

    def _paged(self, suffix: str, body: dict[str, Any], kind: type[Any], field: str) -> list[Any]:
        items: list[Any] = []
        while True:
            page = self._call(suffix, {**body, "offset": len(items)}, kind)
            batch = getattr(page, field) or []
            items.extend(batch)
            if not batch or len(items) >= page.total:
                return items

    # -- account -----------------------------------------------------------------
    def account_info(self) -> AccountInfo:
        return self._call("INFO", None, AccountInfo)

    def api_level(self) -> int:
        """The JetStream API level (ADR-44) of the server answering for this account: 0 before 2.11.

        Asked of JetStream itself, not read from the connected server's INFO,
        which a leaf node may make older or newer than JetStream is.
        """
        return self.account_info().api.level

    # -- streams -------------------------------------------------------------------
    def add_stream(self, config: StreamConfig | None = None, **fields: Any) -> StreamInfo:
        """Create a stream (idempotent for an identical config)."""
        cfg = api.validate_stream_config(api.merge_config(StreamConfig, config, fields))
        level = self.require(*features.stream_features(cfg))
        return self._call(f"STREAM.CREATE.{cfg.name}", cfg, StreamInfo, level=level)

    def update_stream(self, config: StreamConfig | None = None, **fields: Any) -> StreamInfo:
        """Change a stream; fields the server sent that jsclient does not know go back unchanged."""
        cfg = api.validate_stream_config(api.merge_config(StreamConfig, config, fields))
        level = self.require(*features.stream_features(cfg))
        return self._call(f"STREAM.UPDATE.{cfg.name}", cfg, StreamInfo, level=level)

    # -- ADR-37 handles ---------------------------------------------------------------
    def stream(self, name: str) -> Stream:
        """A handle on the stream ``name`` (StreamNotFoundError when there is none)."""
        return Stream(self, self.stream_info(name))

    def create_stream(self, config: StreamConfig | None = None, **fields: Any) -> Stream:
        """Create a stream (an identical one is fine) and return its handle."""
        return Stream(self, self.add_stream(config, **fields))

    def create_or_update_stream(self, config: StreamConfig | None = None, **fields: Any) -> Stream:
        """Create the stream, or change it to this config if it exists."""
        cfg = api.merge_config(StreamConfig, config, fields)
        try:
            return Stream(self, self.update_stream(cfg))
        except StreamNotFoundError:
            return Stream(self, self.add_stream(cfg))

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on a pull consumer (ConsumerNotFoundError when there is none)."""
        return Consumer(self, self.consumer_info(stream, name))

    def create_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        return Stream(self, self.stream_info(stream)).create_consumer(config, **fields)

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> Consumer:
        return Stream(self, self.stream_info(stream)).create_or_update_consumer(config, **fields)

    def delete_stream(self, name: str) -> bool:
        api.check_name("stream name", name)
        return self._call(f"STREAM.DELETE.{name}", None, api.SuccessReply).success

    def stream_info(self, name: str, subjects_filter: str | None = None, deleted_details: bool = False) -> StreamInfo:
        """Stream config and state; ``subjects_filter`` fills ``state.subjects`` (all pages)."""
        api.check_name("stream name", name)
        body: dict[str, Any] = {}
        if subjects_filter is not None:
            check_subscribe_subject(subjects_filter, "subjects_filter")
            body["subjects_filter"] = subjects_filter
        if deleted_details:
            body["deleted_details"] = True
        info = self._call(f"STREAM.INFO.{name}", body or None, api.StreamInfoPaged)
        subjects = dict(info.state.subjects or {})
        while subjects_filter is not None and info.total > len(subjects) and info.state.subjects:
            info = self._call(f"STREAM.INFO.{name}", {**body, "offset": len(subjects)}, api.StreamInfoPaged)
            subjects.update(info.state.subjects or {})
        state = msgspec.structs.replace(info.state, subjects=subjects or info.state.subjects)
        return StreamInfo(
            config=info.config,
            state=state,
            created=info.created,
            ts=info.ts,
            cluster=info.cluster,
            mirror=info.mirror,
            sources=info.sources,
        )

    def streams(self, subject: str | None = None) -> list[StreamInfo]:
        """Every stream (all pages), optionally only those listening on ``subject``."""
        body = self._subject_filter(subject)
        return self._paged("STREAM.LIST", body, api.StreamListPage, "streams")

    def stream_names(self, subject: str | None = None) -> list[str]:
        body = self._subject_filter(subject)
        return self._paged("STREAM.NAMES", body, api.StreamNamesPage, "streams")

    @staticmethod
    def _subject_filter(subject: str | None) -> dict[str, Any]:
        if subject is None:
            return {}
        check_subscribe_subject(subject, "subject filter")
        return {"subject": subject}

    def find_stream(self, subject: str) -> str:
        """The one stream that stores ``subject``; a clear error for none or several."""
        names = self.stream_names(subject)
        if len(names) != 1:
            found = "no stream" if not names else f"{len(names)} streams ({', '.join(names)})"
            raise StreamNotFoundError(404, 10059, f"no matching stream for subject {subject!r}: {found}")
        return names[0]

    def purge_stream(
        self, name: str, subject: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """Purge all, or one subject, or up to (not including) ``seq``, or all but ``keep``; the count."""
        api.check_name("stream name", name)
        if seq is not None and keep is not None:
            raise InvalidArgumentError("purge_stream: seq and keep are mutually exclusive")
        body: dict[str, Any] = {}
        if subject is not None:
            check_subscribe_subject(subject, "purge subject")
            body["filter"] = subject
        for key, value in (("seq", seq), ("keep", keep)):
            if value is not None:
                body[key] = whole(f"purge_stream {key}", value, 0)
        return self._call(f"STREAM.PURGE.{name}", body or None, api.PurgeReply).purged

    def get_msg(
        self,
        stream: str,
        seq: int | None = None,
        last_by_subj: str | None = None,
        next_by_subj: str | None = None,
        start_time: dt.datetime | None = None,
    ) -> StoredMsg:
        """One stored message via STREAM.MSG.GET: by ``seq``, last by subject, next from ``seq``, or by time."""
        api.check_name("stream name", stream)
        body: dict[str, Any] = {}
        if seq is not None:
            body["seq"] = whole("seq", seq)
        if last_by_subj is not None:
            if seq is not None or next_by_subj is not None:
                raise InvalidArgumentError("last_by_subj cannot be combined with seq or next_by_subj")
            check_subscribe_subject(last_by_subj, "last_by_subj")
            body["last_by_subj"] = last_by_subj
        if next_by_subj is not None:
            check_subscribe_subject(next_by_subj, "next_by_subj")
            body["next_by_subj"] = next_by_subj
            body.setdefault("seq", 1)
        if start_time is not None:
            if seq is not None or last_by_subj is not None:
                raise InvalidArgumentError("start_time cannot be combined with seq or last_by_subj")
            if not isinstance(start_time, dt.datetime) or start_time.tzinfo is None:
                raise InvalidArgumentError(f"start_time must be a timezone-aware datetime, not {start_time!r}")
            body.pop("seq", None)
            body["start_time"] = start_time.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
            self.require(features.START_TIME_GET)  # 2.10 answers "bad request", or ignores it beside next_by_subj
        if not body:
            raise InvalidArgumentError("get_msg needs seq, last_by_subj, next_by_subj or start_time")
        return self._call(f"STREAM.MSG.GET.{stream}", body, api.MsgGetReply).message

    def delete_msg(self, stream: str, seq: int, erase: bool = False) -> bool:
        """Delete one message (``erase`` overwrites it on disk)."""
        api.check_name("stream name", stream)
        body: dict[str, Any] = {"seq": whole("seq", seq)}
        if not erase:
            body["no_erase"] = True
        return self._call(f"STREAM.MSG.DELETE.{stream}", body, api.SuccessReply).success

    # -- direct get (ADR-31) ----------------------------------------------------------
    def direct_get(
        self,
        stream: str,
        seq: int | None = None,
        *,
        last_by_subj: str | None = None,
        next_by_subj: str | None = None,
        start_time: dt.datetime | None = None,
        timeout: float | None = None,
    ) -> StoredMessage:
        """One message straight from the stream's store (any replica answers)."""
        if last_by_subj is not None and seq is None and next_by_subj is None and start_time is None:
            return read_last(self, stream, last_by_subj, timeout)
        return direct_get(
            self, stream, seq=seq, last_by_subj=last_by_subj, next_by_subj=next_by_subj,
            start_time=start_time, timeout=timeout,
        )

    def direct_get_batch(
        self,
        stream: str,
        subject: str = ">",
        *,
        batch: int = 100,
        seq: int | None = None,
        start_time: dt.datetime | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> DirectBatch:
        """Up to ``batch`` messages matching ``subject`` from ``seq`` (or ``start_time``): an iterator."""
        return direct_get_batch(
            self, stream, subject, batch=batch, seq=seq, start_time=start_time, max_bytes=max_bytes, timeout=timeout
        )

    def direct_get_last_for_subjects(
        self,
        stream: str,
        subjects: list[str],
        *,
        up_to_seq: int | None = None,
        up_to_time: dt.datetime | None = None,
        batch: int | None = None,
        timeout: float | None = None,
    ) -> DirectBatch:
        """The last message of each subject, as of one point in time, across as many batches as it takes."""
        return direct_get_last_for_subjects(
            self, stream, subjects, up_to_seq=up_to_seq, up_to_time=up_to_time, batch=batch, timeout=timeout
        )

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
        compression: bool = False,
        mirror: str | None = None,
        sources: list[str] | None = None,
    ) -> KeyValue:
        """Create a bucket (or bind to an identical one); ``limit_marker_ttl`` enables key TTLs (2.11+).

        ``mirror="b"`` makes a read-only copy of bucket ``b`` (reads are served
        by the copy; writes go to ``b``); ``sources=["a", "b"]`` copies the keys
        of those buckets into this one.
        """
        config = bucket_config(
            bucket, history=history, ttl=ttl, max_bytes=max_bytes, max_value_size=max_value_size,
            storage=storage, replicas=replicas, description=description, limit_marker_ttl=limit_marker_ttl,
            compression=compression, mirror=mirror, sources=sources,
        )
        self.add_stream(config)
        return KeyValue(self, bucket, direct=True, origin=mirror)

    def update_key_value(self, bucket: str, **options: Any) -> KeyValue:
        """Change a bucket: ``options`` are create_key_value's, and the ones not given take their defaults."""
        unknown = sorted(set(options) - BUCKET_OPTIONS)
        if unknown:
            raise InvalidArgumentError(f"unknown bucket option(s): {', '.join(unknown)}")
        self.update_stream(bucket_config(bucket, **options))
        return KeyValue(self, bucket, direct=True, origin=options.get("mirror"))

    def key_value_names(self) -> list[str]:
        """The buckets of this account: streams named KV_<bucket> (mirrors, which have no subjects, too)."""
        return sorted(name[3:] for name in self.stream_names() if name.startswith("KV_"))

    def key_values(self) -> list[KeyValueStatus]:
        """The status of every bucket, from one stream listing."""
        return sorted(
            (bucket_status(info.config.name[3:], info) for info in self.streams()
             if isinstance(info.config.name, str) and info.config.name.startswith("KV_")),
            key=lambda status: status.bucket,
        )

    def key_value(self, bucket: str) -> KeyValue:
        """Bind to an existing bucket (BucketNotFoundError if there is none)."""
        return open_bucket(self, bucket)

    def delete_key_value(self, bucket: str) -> bool:
        return self.delete_stream(f"KV_{check_bucket(bucket)}")

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
        self.add_stream(store_config(
            bucket, description=description, ttl=ttl, max_bytes=max_bytes, storage=storage, replicas=replicas,
            placement=placement, compression=compression, metadata=metadata,
        ))
        return ObjectStore(self, bucket)

    def object_store(self, bucket: str) -> ObjectStore:
        """Bind to an existing object store (ObjectStoreNotFoundError if there is none)."""
        return open_store(self, bucket)

    def object_store_names(self) -> list[str]:
        return sorted(name[4:] for name in self.stream_names() if name.startswith("OBJ_"))

    def object_stores(self) -> list[ObjectStoreStatus]:
        """The status of every object store, from one stream listing."""
        return sorted(
            (object_store_status(info.config.name[4:], info) for info in self.streams()
             if isinstance(info.config.name, str) and info.config.name.startswith("OBJ_")),
            key=lambda status: status.bucket,
        )

    def delete_object_store(self, bucket: str) -> bool:
        try:
            return self.delete_stream(f"OBJ_{check_bucket(bucket)}")
        except StreamNotFoundError:
            raise ObjectStoreNotFoundError(f"object store {bucket!r} not found") from None

    # -- consumers -----------------------------------------------------------------
    def add_consumer(
        self, stream: str, config: ConsumerConfig | None = None, *, action: str = "", **fields: Any
    ) -> ConsumerInfo:
        """Create or update a consumer; ``action`` "create" or "update" restricts to one."""
        api.check_name("stream name", stream)
        if action not in ("", "create", "update"):
            raise InvalidArgumentError(f"action must be '', 'create' or 'update', not {action!r}")
        cfg = api.validate_consumer_config(api.merge_config(ConsumerConfig, config, fields))
        level = self.require(*features.consumer_features(cfg))
        name = cfg.name if cfg.name is not UNSET else cfg.durable_name
        body: dict[str, Any] = {"stream_name": stream, "config": cfg}
        if action:
            body["action"] = action
        suffix = f"CONSUMER.CREATE.{stream}" if name is UNSET else f"CONSUMER.CREATE.{stream}.{name}"
        return self._call(suffix, body, ConsumerInfo, level=level)

    def update_consumer(self, stream: str, config: ConsumerConfig | None = None, **fields: Any) -> ConsumerInfo:
        return self.add_consumer(stream, config, action="update", **fields)

    def consumer_info(self, stream: str, consumer: str, timeout: float | None = None) -> ConsumerInfo:
        self._consumer_names(stream, consumer)
        return self._call(f"CONSUMER.INFO.{stream}.{consumer}", None, ConsumerInfo, timeout)

    def delete_consumer(self, stream: str, consumer: str) -> bool:
        self._consumer_names(stream, consumer)
        return self._call(f"CONSUMER.DELETE.{stream}.{consumer}", None, api.SuccessReply).success

    def consumers(self, stream: str) -> list[ConsumerInfo]:
        api.check_name("stream name", stream)
        return self._paged(f"CONSUMER.LIST.{stream}", {}, api.ConsumerListPage, "consumers")

    def consumer_names(self, stream: str) -> list[str]:
        api.check_name("stream name", stream)
        return self._paged(f"CONSUMER.NAMES.{stream}", {}, api.ConsumerNamesPage, "consumers")

    def pause_consumer(self, stream: str, consumer: str, until: dt.datetime) -> api.ConsumerPause:
        """Stop deliveries until ``until`` (aware); heartbeats go on, so nothing counts them missed."""
        self._consumer_names(stream, consumer)
        if not isinstance(until, dt.datetime) or until.utcoffset() is None:
            raise InvalidArgumentError(f"until must be a timezone-aware datetime, not {until!r}")
        level = self.require(features.CONSUMER_PAUSE)
        body = {"pause_until": until}
        return self._call(f"CONSUMER.PAUSE.{stream}.{consumer}", body, api.ConsumerPause, level=level)

    def resume_consumer(self, stream: str, consumer: str) -> api.ConsumerPause:
        """Deliver again now (a consumer that is not paused stays as it is)."""
        self._consumer_names(stream, consumer)
        level = self.require(features.CONSUMER_PAUSE)
        return self._call(f"CONSUMER.PAUSE.{stream}.{consumer}", {}, api.ConsumerPause, level=level)

    def reset_consumer(self, stream: str, consumer: str, seq: int | None = None) -> api.ConsumerResetInfo:
        """Deliver again from stream sequence ``seq`` (None: from just past the ack floor); server 2.14+."""
        self._consumer_names(stream, consumer)
        body = {} if seq is None else {"seq": whole("seq", seq, 1)}
        level = self.require(features.CONSUMER_RESET)
        return self._call(f"CONSUMER.RESET.{stream}.{consumer}", body, api.ConsumerResetInfo, level=level)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Release a pinned_client group's pin: the next pull of any member gets it (ADR-42)."""
        self._consumer_names(stream, consumer)
        body = {"group": api.check_group(group)}
        level = self.require(features.PRIORITY_GROUPS)
        api.decode_reply(self._api(f"CONSUMER.UNPIN.{stream}.{consumer}", body, level=level), api.SuccessReply)

    @staticmethod
    def _consumer_names(stream: str, consumer: str) -> None:
        api.check_name("stream name", stream)
        api.check_name("consumer name", consumer)

    # -- subscribing -----------------------------------------------------------------
    def subscribe(
        self,
        subject: str | None = None,
        *,
        durable: str | None = None,
        queue: str | None = None,
        stream: str | None = None,
        consumer: str | None = None,
        config: ConsumerConfig | None = None,
        cb: Callable[[Msg], None] | None = None,
        manual_ack: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False,
        heartbeat_alarm: float | None = None,
        ordered: bool = False,
        pending_msgs_limit: int | None = None,
        pending_bytes_limit: int | None = None,
    ) -> PushSubscription | OrderedSubscription:
        """A push subscription (ADR-15), or with ``ordered=True`` an ordered consumer (ADR-17)."""
        if ordered:
            if durable is not None or queue is not None or consumer is not None:
                bad = "durable" if durable is not None else "queue" if queue is not None else "consumer"
                raise InvalidArgumentError(f"an ordered consumer cannot use {bad}")
            if manual_ack or flow_control is not False or heartbeat_alarm is not None:
                bad = "manual_ack" if manual_ack else "flow_control" if flow_control else "heartbeat_alarm"
                raise InvalidArgumentError(f"an ordered consumer cannot use {bad} (it manages it itself)")
            return subscribe_ordered(
                self,
                subject,
                stream=stream,
                config=config,
                cb=cb,
                idle_heartbeat=idle_heartbeat,
                pending_msgs_limit=pending_msgs_limit,
                pending_bytes_limit=pending_bytes_limit,
            )
        return subscribe_push(
            self,
            subject,
            durable=durable,
            queue=queue,
            stream=stream,
            consumer=consumer,
            config=config,
            cb=cb,
            manual_ack=manual_ack,
            idle_heartbeat=idle_heartbeat,
            flow_control=flow_control,
            heartbeat_alarm=heartbeat_alarm,
            pending_msgs_limit=pending_msgs_limit,
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
        return pull_subscribe(
            self, subject, durable=durable, stream=stream, consumer=consumer, config=config, group=group,
            min_pending=min_pending, min_ack_pending=min_ack_pending, priority=priority,
        )

    # -- publishing ------------------------------------------------------------------
    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        headers: HeadersInput | None = None,
        timeout: float | None = None,
        ttl: msgopts.TTL | None = None,
        schedule: msgopts.Schedule | None = None,
        schedule_target: str | None = None,
        schedule_source: str | None = None,
        schedule_ttl: msgopts.TTL | None = None,
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
        options = (msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id, ttl,
                   schedule, schedule_target, schedule_source, schedule_ttl, schedule_time_zone)
        hdrs = headers if options == _NO_OPTIONS else self._publish_headers(subject, headers, options)
        if timeout:
            check_timeout(timeout)
        wait = timeout or self.timeout
        try:
            reply = self.conn.core.request(subject, payload, wait, hdrs, api.PUB_ACK_REPLY)
        except NoRespondersError:
            request = self.conn.request
            reply = self._publish_retry(lambda: request(subject, payload, timeout=wait, headers=hdrs), subject)
        if isinstance(reply, PubAck):
            return reply  # read as it arrived
        return api.decode_pub_ack(reply.data)

    def _publish_headers(
        self, subject: str, headers: HeadersInput | None, options: tuple[Any, ...]
    ) -> HeadersInput | None:
        """The headers of a publish: the caller's, plus those its options ask for (checked first).

        ``options`` is (msg_id, expected_stream, expected_last_seq,
        expected_last_subject_seq, expected_last_msg_id, ttl, schedule,
        schedule_target, schedule_source, schedule_ttl, schedule_time_zone):
        one tuple, which the callers compare with ``_NO_OPTIONS`` first: the
        common publish without any costs one comparison and no call.
        """
        (msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id, ttl,
         schedule, target, source, schedule_ttl, time_zone) = options
        hdrs = Headers(headers) if headers is not None else Headers()
        for name, value in (("Nats-Msg-Id", msg_id), ("Nats-Expected-Last-Msg-Id", expected_last_msg_id)):
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise InvalidArgumentError(f"{name} must be a non-empty str, not {value!r}")
                hdrs[name] = value
        if expected_stream is not None:
            hdrs["Nats-Expected-Stream"] = api.check_name("expected_stream", expected_stream)
        for name, number in (
            ("Nats-Expected-Last-Sequence", expected_last_seq),
            ("Nats-Expected-Last-Subject-Sequence", expected_last_subject_seq),
        ):
            if number is not None:
                hdrs[name] = str(whole(name, number, 0))
        needs: list[features.Feature] = []
        if ttl is not None:
            hdrs[msgopts.TTL_HEADER] = msgopts.ttl_value("ttl", ttl)
            needs.append(features.MESSAGE_TTL)
        if schedule is not None:
            scheduled = msgopts.schedule_headers(subject, schedule, target, source, schedule_ttl, time_zone)
            for name, value in scheduled.items():
                hdrs[name] = value
            needs.append(features.SCHEDULES)
            if msgopts.repeats(scheduled):
                needs.append(features.REPEATING_SCHEDULES)
        else:
            for name, value in (("schedule_target", target), ("schedule_source", source),
                                ("schedule_ttl", schedule_ttl), ("schedule_time_zone", time_zone)):
                if value is not None:
                    raise InvalidArgumentError(f"{name} needs schedule")
        self.require(*needs)
        return hdrs

    @staticmethod
    def _publish_retry(send: Callable[[], Msg], subject: str) -> Msg:
        try:
            for attempt in PUBLISH_RETRY.retrying(on=(NoRespondersError,)):
                with attempt:
                    return send()
        except NoRespondersError:
            pass
        raise no_stream(subject)

    def publish_async(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        headers: HeadersInput | None = None,
        timeout: float | None = None,
        retry_on_no_responders: int = 0,
        ttl: msgopts.TTL | None = None,
        schedule: msgopts.Schedule | None = None,
        schedule_target: str | None = None,
        schedule_source: str | None = None,
        schedule_ttl: msgopts.TTL | None = None,
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
        options = (msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id, ttl,
                   schedule, schedule_target, schedule_source, schedule_ttl, schedule_time_zone)
        hdrs = headers if options == _NO_OPTIONS else self._publish_headers(subject, headers, options)
        wait = self.timeout if timeout is None else seconds("timeout", timeout)
        retries = whole("retry_on_no_responders", retry_on_no_responders, 0)
        window = self._window
        limit = self.publish_async_max_pending
        lock = window.lock
        lock.acquire()
        try:
            if window.pending >= limit:
                lock.release()
                try:
                    self.conn.core.send_pending()  # what the window holds goes now: its acks reopen it
                finally:
                    lock.acquire()
                window.blocked += 1
                try:
                    reopened = window.cond.wait_for(lambda: window.pending < limit, wait)
                finally:
                    window.blocked -= 1
                if not reopened:
                    raise TimeoutError(
                        f"publish_async: {window.pending} acks still outstanding after {wait} s "
                        f"(publish_async_max_pending={limit})"
                    )
            window.pending += 1
        finally:
            lock.release()
        try:
            if not retries:
                return self.conn.core.request_async(subject, payload, wait, hdrs, self._ack_kind)
            outer: Future[PubAck] = Future()
            self._attempt(outer, subject, payload, wait, hdrs, retries, 0)
            return outer
        except BaseException:
            self._release_pending(1)
            raise

    def _attempt(
        self, outer: Future[PubAck], subject: str, payload: bytes, wait: float, hdrs: HeadersInput | None,
        left: int, attempt: int,
    ) -> None:
        """One try of a publish_async with retries; the window slot is released when ``outer`` resolves."""
        inner = self.conn.core.request_async(subject, payload, wait, hdrs, self._retry_kind)

        def settled(done: Future[PubAck]) -> None:  # the events thread
            error = done.exception()
            if isinstance(error, NoStreamResponseError) and left > 0:
                def again() -> None:  # the timer thread
                    try:
                        self._attempt(outer, subject, payload, wait, hdrs, left - 1, attempt + 1)
                    except Error as exc:
                        outer.set_exception(exc)
                        self._release_pending(1)

                self.conn.core.timers.call_later(PUBLISH_RETRY.delay(attempt + 1), again)
                return
            if error is not None:
                outer.set_exception(error)
            else:
                outer.set_result(done.result())
            self._release_pending(1)

        inner.add_done_callback(settled)

    # -- counters (ADR-49) -----------------------------------------------------------
    def counter_add(self, subject: str, delta: int, *, timeout: float | None = None) -> int:
        """Add ``delta`` (any int, negative too) to the counter on ``subject``: its new total.

        The stream needs ``allow_msg_counter``; the server adds, so concurrent
        adds from anywhere give the exact sum.  A timeout leaves it unknown
        whether the add happened: read the total before trying again.
        """
        check_publish_subject(subject)
        headers = {msgopts.INCR_HEADER: msgopts.increment_value(delta)}
        self.require(features.COUNTERS)
        ack = self.publish(subject, b"", headers=headers, timeout=timeout)
        if ack.val is None:
            raise JetStreamAPIError(0, 0, f"stream {ack.stream!r} acked an add to {subject!r} without a total")
        return int(ack.val)

    def counter_get(self, stream: str, subject: str, *, timeout: float | None = None) -> int:
        """The counter's total (MessageNotFoundError if nothing was ever added on ``subject``)."""
        check_publish_subject(subject)
        self.require(features.COUNTERS)
        try:
            data = self.direct_get(stream, last_by_subj=subject, timeout=timeout).data
        except DirectGetDisabledError:
            data = self.get_msg(stream, last_by_subj=subject).data
        return api.decode_counter(data, subject)

    def counter_get_many(self, stream: str, subjects: list[str], *, timeout: float | None = None) -> dict[str, int]:
        """The totals of many counters as of one moment, by subject (wildcards allowed; absent ones left out).

        One multi-subject direct get; on a stream without ``allow_direct``,
        one STREAM.MSG.GET per subject (no wildcards then).
        """
        self.require(features.COUNTERS)  # before the multi-subject get, which a 2.10 server refuses otherwise
        try:
            return {
                m.subject: api.decode_counter(m.data, m.subject)
                for m in self.direct_get_last_for_subjects(stream, subjects, timeout=timeout)
            }
        except DirectGetDisabledError:
            totals: dict[str, int] = {}
            for subject in subjects:
                check_publish_subject(subject, "subject (a stream without allow_direct takes no wildcards)")
                with contextlib.suppress(MessageNotFoundError):
                    totals[subject] = api.decode_counter(self.get_msg(stream, last_by_subj=subject).data, subject)
            return totals

    def publish_batch(
        self, messages: Iterable[Any], *, timeout: float | None = None, batch_id: str | None = None
    ) -> BatchAck:
        """Publish up to 1,000 messages as one atomic batch (ADR-50): all are stored, or none.

        ``messages`` are ``(subject, data)`` pairs or mappings with the keys
        subject, data, headers, msg_id; every one is checked before anything
        is sent.  The stream needs ``allow_atomic=True`` (server 2.12+).
        """
        # An older server ignores the batch headers and stores every message on its own: not atomic.
        self.require(features.ATOMIC_BATCH)
        return batch.publish_batch(self, messages, timeout=timeout, batch_id=batch_id)

    def publish_stream(
        self,
        messages: Iterable[Any],
        *,
        gaps: str = "fail",
        flow: int = fastbatch.DEFAULT_FLOW,
        outstanding_acks: int = 2,
        timeout: float | None = None,
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
            self, messages, gaps=gaps, flow=flow, outstanding_acks=outstanding_acks, timeout=timeout
        )

    def atomic_batch(self, timeout: float | None = None) -> AtomicBatch:
        """``with js.atomic_batch() as b: b.add(subject, data)``: commits on exit, sends nothing on an error."""
        self.require(features.ATOMIC_BATCH)
        return AtomicBatch(self, timeout)

    def _send_pending(self) -> None:
        """Before a publish_async future blocks: send what the connection buffered (its current session)."""
        self.conn.core.send_pending()

    def _release_pending(self, settled: int) -> None:
        """Reader or timer thread (or a failed publish): ``settled`` async publishes settled."""
        window = self._window
        with window.lock:
            window.pending -= settled
            # A full window wakes its publishers only once an eighth has drained (or all of it):
            # waking them for every single ack would cost a thread switch per message.
            if window.pending == 0 or (window.blocked and window.pending <= self._resume_at):
                window.cond.notify_all()

    @property
    def publish_async_pending(self) -> int:
        return self._window.pending

    def publish_async_completed(self, timeout: float = 10.0) -> None:
        """Wait until every publish_async future (of this process) has resolved."""
        self.conn.core.send_pending()
        window = self._window
        with window.cond:
            if not window.cond.wait_for(lambda: window.pending == 0, timeout):
                raise TimeoutError(
                    f"publish_async_completed: {window.pending} acks still outstanding after {timeout} s"
                )


def no_stream(subject: str) -> NoStreamResponseError:
    """The error of a JetStream publish nobody answered (503): no stream stores ``subject``."""
    return NoStreamResponseError(
        f"no stream answered a publish to {subject!r}: no stream stores that subject, or JetStream is unavailable"
    )


def _decode_async_ack(msg: Msg, subject: str) -> PubAck:
    """Reader thread: the ack of a publish to ``subject`` (the reply's own subject is only our inbox)."""
    data = msg.data
    if data and b'"error"' not in data:
        try:
            return _decode_plain_ack(data)  # the common case, without a call in between
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass  # decode_pub_ack names the problem
    elif not data and status_of(msg.header) == 503:
        raise no_stream(subject)
    return api.decode_pub_ack(data)


_decode_plain_ack = api.PUB_ACK_DECODER.decode


__all__ = ["JetStream", "JetStreamAPIError"]
