"""The models of streams: a stream's config (what is sent to create or update one) and its info
(what the server says of one: config, state, cluster, sources).

Pure data, no I/O, no threads; built on :mod:`.apicodec` (unset fields not sent, durations in seconds,
unknown reply fields kept).  :class:`PeerInfo` and :class:`ClusterInfo` serve consumers' info too.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

import msgspec
from msgspec import UNSET, UnsetType

from .apicodec import APIStruct, Duration, ReplyStruct


class Placement(APIStruct):
    """Which servers may hold a stream's replicas, where JetStream runs on several clusters or kinds of server.

    Attributes:
        cluster: The name of the cluster to place them in; left unset, the server picks one.
        tags: Server tags (a server's ``server_tags``) that every chosen server must have, e.g. a region or a
            disk type.
    """

    cluster: str | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET


class SubjectTransform(APIStruct):
    """A rewrite of subjects: a message on a subject matching ``src`` is given the subject ``dest``.

    Attributes:
        src: The subjects it applies to (wildcards allowed); an empty string means every subject.
        dest: The subject they get; it may take tokens of the original with the server's mapping
            functions, such as ``{{wildcard(1)}}``.
    """

    src: str
    dest: str


class ExternalStream(APIStruct):
    """How to reach a source's (or mirror's) stream in another JetStream domain or account.

    Attributes:
        api: The subject prefix under which that JetStream's API answers here, e.g. ``$JS.hub.API`` for
            the domain ``hub``, or the prefix an account import maps it to.
        deliver: The subject prefix on which the copied messages are delivered (needed when they cross
            an account boundary, where the exporting account must allow it).
    """

    api: str
    deliver: str | UnsetType = UNSET


class StreamConsumerSource(APIStruct):
    """A consumer that already exists on a source's stream, for the source to read through instead of the one
    the server would create for it.

    Attributes:
        name: The consumer's name on the origin stream.
        deliver_subject: The subject on which that consumer delivers, where this stream listens.
    """

    name: str | UnsetType = UNSET
    deliver_subject: str | UnsetType = UNSET


class StreamSource(APIStruct):
    """A stream whose messages this one copies: one of its ``sources`` or its ``mirror``.

    A source's messages get new sequence numbers in this stream; a mirror keeps the origin's.

    Attributes:
        name: The origin stream's name.
        opt_start_seq: Copy from this sequence of the origin on, rather than from its first message.
        opt_start_time: Copy the messages stored at or after this (timezone-aware) time.
        filter_subject: Copy only the messages on subjects matching this one.
        subject_transforms: Copy the messages on each transform's ``src`` and store them under its ``dest``
            (several filters, each with its rewrite); not together with ``filter_subject``.
        external: Set when the origin stream is in another JetStream domain or account.
        consumer: Read through a consumer that exists on the origin stream (see
            :class:`StreamConsumerSource`); server 2.14+ (an older one would drop it, so it is refused there).
    """

    name: str
    opt_start_seq: int | UnsetType = UNSET
    opt_start_time: dt.datetime | UnsetType = UNSET
    filter_subject: str | UnsetType = UNSET
    subject_transforms: list[SubjectTransform] | UnsetType = UNSET
    external: ExternalStream | UnsetType = UNSET
    consumer: StreamConsumerSource | UnsetType = UNSET


class RePublish(APIStruct):
    """Republishing: once the stream has stored a message, the server also publishes a copy on core NATS.

    The copies carry headers naming the stream, its sequence and the subject's previous sequence, so
    subscribers can tell a gap; nothing acknowledges or redelivers them.

    Attributes:
        dest: The subject to publish on; it may take tokens of the original subject, as in a
            :class:`SubjectTransform`.
        src: Republish only the messages on subjects matching this one; left unset, all of them.
        headers_only: Send the headers without the body (its size is in ``Nats-Msg-Size``), for
            subscribers that only need to know that something changed.
    """

    dest: str
    src: str | UnsetType = UNSET
    headers_only: bool | UnsetType = UNSET


class StreamConsumerLimits(APIStruct):
    """Limits on the consumers of a stream: a consumer that leaves one unset gets the limit, and none may set
    a larger value.

    Attributes:
        inactive_threshold: Seconds (a number or a ``timedelta``) without activity after which the server
            deletes a consumer.
        max_ack_pending: The most messages a consumer may have delivered and not yet acknowledged.
    """

    _durations: ClassVar[tuple[str, ...]] = ("inactive_threshold",)
    inactive_threshold: Duration | UnsetType = UNSET
    max_ack_pending: int | UnsetType = UNSET


class StreamConfig(APIStruct):
    """A stream's configuration: what ``add_stream`` and ``update_stream`` send, and ``StreamInfo.config``.

    The fields are the server's.  A field left unset is not sent, so the server applies its default
    (given below where it matters); durations are seconds, as numbers or ``timedelta`` s.  Some fields
    cannot change once the stream exists (``storage``, ``mirror`` and ``allow_msg_counter`` among them):
    the server refuses such an update.

    Attributes:
        name: The stream's name, unique in the account: no dots, wildcards, whitespace or slashes.
        description: Free text about the stream.
        subjects: The subjects whose messages the stream stores (wildcards allowed); two streams of an
            account may not overlap. Left unset on a stream that is no mirror and has no sources, the
            server uses the stream's name.
        retention: When stored messages go (:class:`RetentionPolicy`): ``limits`` (default) keeps them
            until a limit below removes them; ``interest`` until every consumer they concern has
            acknowledged them; ``workqueue`` as soon as one consumer acknowledges each (its consumers'
            filters may not overlap).
        max_consumers: The most consumers the stream may have; -1 or unset, no limit.
        max_msgs: The most messages the stream keeps; -1 or unset, no limit.
        max_bytes: The most bytes the stream keeps; -1 or unset, no limit.
        max_age: Seconds a message is kept; 0 or unset, for ever.
        max_msgs_per_subject: The most messages kept per subject (1 keeps each subject's last value only,
            as a key-value bucket with a history of 1 does); -1 or unset, no limit.
        max_msg_size: The largest message, in bytes, that the stream accepts; -1 or unset, no limit.
        discard: What happens at a limit (:class:`DiscardPolicy`): ``old`` (default) removes the oldest
            messages to make room; ``new`` refuses the new message, so a publish fails.
        discard_new_per_subject: With ``discard`` ``new`` and ``max_msgs_per_subject``, refuse a message on a
            subject that already holds its most, rather than remove that subject's oldest.
        storage: Where messages are kept (:class:`StorageType`): ``file`` (default) or ``memory`` (not
            kept across a server's restart); cannot change later.
        num_replicas: How many servers of a cluster keep a copy, 1 to 5 (default 1).
        no_ack: The stream stores what is published but answers no publish: ``js.publish`` would time
            out, so publish to it with core ``publish``.
        duplicate_window: Seconds during which a message repeating an earlier message's ``Nats-Msg-Id`` is
            recognised and not stored again (the server's default is two minutes).
        placement: Which cluster, or which tagged servers, hold the stream.
        mirror: A stream this one copies exactly, with the same sequence numbers; a mirror has no
            ``subjects`` and takes no publishes of its own.
        sources: Streams whose messages this one copies in, besides what is published to its own
            ``subjects``.
        sealed: Set by an update only, for good: the stream takes no more messages and none are removed,
            by request or by a limit.
        deny_delete: Refuse requests to delete a message (limits still remove messages).
        deny_purge: Refuse requests to purge the stream.
        allow_rollup_hdrs: Let a publish carry ``Nats-Rollup`` (``sub`` or ``all``), which replaces every
            earlier message of its subject, or of the whole stream, with itself.
        allow_direct: Answer direct gets: reads of stored messages that any replica may answer, where
            ``get_msg`` asks the leader; faster, but a replica may lag the latest write slightly.
        mirror_direct: On a mirror: let it answer direct gets addressed to the stream it mirrors.
        republish: Publish a copy of each stored message on core NATS (see :class:`RePublish`).
        compression: How file storage compresses messages at rest (:class:`StoreCompression`): ``none``
            (default) or ``s2``.
        first_seq: The sequence number the stream's first message gets, on creation (default 1).
        subject_transform: A rewrite of the subjects of incoming messages, applied before they are stored.
        consumer_limits: Defaults and ceilings for the stream's consumers (see :class:`StreamConsumerLimits`).
        metadata: String keys and values for the stream's owners; the server adds its own under keys that
            begin with ``_nats.``.
        allow_msg_ttl: Let a publish carry ``Nats-TTL``, after which the server removes that message
            (server 2.11+); once on, it cannot be turned off.
        subject_delete_marker_ttl: When ``max_age`` removes a subject's last message, the server stores a
            marker in its place that lives this many seconds (at least 1), so readers learn the subject is
            gone (server 2.11+; not on a mirror).
        allow_msg_counter: Make every subject a counter: a publish carries ``Nats-Incr`` and the server stores
            the new total, which the publish ack returns (server 2.12+). Set on creation only; not with
            ``allow_msg_ttl`` or on a mirror.
        allow_atomic: Accept atomic batch publishes, stored all together or not at all (server 2.12+).
        allow_msg_schedules: Accept messages that schedule a later publish (``Nats-Schedule``), which the
            server then makes itself (server 2.12+).
        persist_mode: When a publish is acknowledged (:class:`PersistMode`): ``default`` once the message is
            stored; ``async`` at once, before it is written, faster but an acknowledged message may be lost
            in a crash (server 2.12+).
        allow_batched: Accept fast-ingest batch publishes, which the server paces with its own flow
            control (server 2.14+).
    """

    _durations: ClassVar[tuple[str, ...]] = ("max_age", "duplicate_window", "subject_delete_marker_ttl")
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    subjects: list[str] | UnsetType = UNSET
    retention: str | UnsetType = UNSET
    max_consumers: int | UnsetType = UNSET
    max_msgs: int | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    max_age: Duration | UnsetType = UNSET
    max_msgs_per_subject: int | UnsetType = UNSET
    max_msg_size: int | UnsetType = UNSET
    discard: str | UnsetType = UNSET
    discard_new_per_subject: bool | UnsetType = UNSET
    storage: str | UnsetType = UNSET
    num_replicas: int | UnsetType = UNSET
    no_ack: bool | UnsetType = UNSET
    duplicate_window: Duration | UnsetType = UNSET
    placement: Placement | UnsetType = UNSET
    mirror: StreamSource | UnsetType = UNSET
    sources: list[StreamSource] | UnsetType = UNSET
    sealed: bool | UnsetType = UNSET
    deny_delete: bool | UnsetType = UNSET
    deny_purge: bool | UnsetType = UNSET
    allow_rollup_hdrs: bool | UnsetType = UNSET
    allow_direct: bool | UnsetType = UNSET
    mirror_direct: bool | UnsetType = UNSET
    republish: RePublish | UnsetType = UNSET
    compression: str | UnsetType = UNSET
    first_seq: int | UnsetType = UNSET
    subject_transform: SubjectTransform | UnsetType = UNSET
    consumer_limits: StreamConsumerLimits | UnsetType = UNSET
    metadata: dict[str, str] | UnsetType = UNSET
    # Server 2.11+ (API level 1): ADR-43 per-message TTL and subject delete markers.
    allow_msg_ttl: bool | UnsetType = UNSET
    subject_delete_marker_ttl: Duration | UnsetType = UNSET
    # Server 2.12+ (API level 2): ADR-49 counters, ADR-50 atomic batches, ADR-51 schedules, async persist.
    allow_msg_counter: bool | UnsetType = UNSET
    allow_atomic: bool | UnsetType = UNSET
    allow_msg_schedules: bool | UnsetType = UNSET
    persist_mode: str | UnsetType = UNSET
    # Server 2.14+ (API level 4): ADR-50 fast-ingest batches.
    allow_batched: bool | UnsetType = UNSET


class LostStreamData(ReplyStruct):
    """Messages the server found damaged or missing in its storage and could not recover.

    Attributes:
        msgs: Their sequence numbers, or None.
        bytes: How many bytes were lost.
    """

    msgs: list[int] | None = None
    bytes: int = 0


class StreamState(ReplyStruct):
    """What a stream holds, at the time of its info.

    Attributes:
        messages: How many messages it holds.
        bytes: Their total size in bytes.
        first_seq: The sequence of its oldest message (after a purge, the sequence the next message will get).
        first_ts: When its oldest message was stored (for an empty stream the server sends its zero time,
            the year 1).
        last_seq: The sequence of its newest message; purges and deletes do not lower it.
        last_ts: When its newest message was stored.
        consumer_count: How many consumers it has.
        deleted: The sequences of deleted messages between the first and the last, when asked for
            (``stream_info(..., deleted_details=True)``); else None.
        num_deleted: How many messages between the first and the last have been deleted.
        num_subjects: How many distinct subjects its messages have.
        subjects: How many messages each subject holds, when asked for (``stream_info(name, subjects_filter)``
            names the subjects); else None.
        lost: Messages lost from storage, if the server found any.
    """

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: dt.datetime | None = None
    last_seq: int = 0
    last_ts: dt.datetime | None = None
    consumer_count: int = 0
    deleted: list[int] | None = None
    num_deleted: int = 0
    num_subjects: int = 0
    subjects: dict[str, int] | None = None
    lost: LostStreamData | None = None


class PeerInfo(ReplyStruct):
    """A replica of a stream or consumer, as its leader sees it.

    Attributes:
        name: The server it is on.
        current: Whether it is caught up with the leader.
        offline: Whether the leader cannot reach it.
        active: Seconds since the leader last heard from it.
        lag: How many operations it is behind the leader.
    """

    _durations: ClassVar[tuple[str, ...]] = ("active",)
    name: str = ""
    current: bool = False
    offline: bool = False
    active: Duration = Duration(0)
    lag: int = 0


class ClusterInfo(ReplyStruct):
    """The cluster that holds a stream or consumer, and its replicas.

    Attributes:
        name: The cluster's name; None when the server is not clustered.
        leader: The server that leads the replicas; None while they elect one.
        replicas: The other replicas (not the leader), or None.
    """

    name: str | None = None
    leader: str | None = None
    replicas: list[PeerInfo] | None = None


class StreamSourceInfo(ReplyStruct):
    """How a stream's copying from one of its sources, or from its mirror, is going.

    Attributes:
        name: The origin stream's name.
        lag: How many messages of the origin are still to be copied.
        active: Seconds since the last message, or other contact, from the origin.
        filter_subject: The subjects being copied, when filtered.
        external: How the origin is reached, when it is in another domain or account.
    """

    _durations: ClassVar[tuple[str, ...]] = ("active",)
    name: str = ""
    lag: int = 0
    active: Duration = Duration(0)
    filter_subject: str | None = None
    external: ExternalStream | None = None


class StreamAlternate(ReplyStruct):
    """A place the same messages can be read from: the stream itself or one of its mirrors, nearest first.

    Attributes:
        name: That stream's name.
        domain: Its JetStream domain, when it has one.
        cluster: The cluster that holds it.
    """

    name: str = ""
    domain: str | None = None
    cluster: str = ""


class StreamInfo(ReplyStruct):
    """What the server says of a stream: its configuration, what it holds, and where.

    Attributes:
        config: Its configuration, with the server's defaults filled in; unknown fields a newer server sends
            are kept, so ``update_stream(info.config)`` changes nothing else.
        state: What it holds.
        created: When it was created.
        ts: The server's time when it answered.
        domain: The JetStream domain that answered, if it has one.
        cluster: The cluster and the replicas that hold it.
        mirror: How its mirroring is going, when it is a mirror.
        sources: How the copying from each of its sources is going, when it has any.
        alternates: The stream and its mirrors, nearest first, when it has mirrors.
    """

    config: StreamConfig
    state: StreamState = msgspec.field(default_factory=StreamState)
    created: dt.datetime | None = None
    ts: dt.datetime | None = None
    domain: str | None = None
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] | None = None
    alternates: list[StreamAlternate] | None = None
