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
    cluster: str | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET


class SubjectTransform(APIStruct):
    src: str
    dest: str


class ExternalStream(APIStruct):
    api: str
    deliver: str | UnsetType = UNSET


class StreamConsumerSource(APIStruct):
    name: str | UnsetType = UNSET
    deliver_subject: str | UnsetType = UNSET


class StreamSource(APIStruct):
    name: str
    opt_start_seq: int | UnsetType = UNSET
    opt_start_time: dt.datetime | UnsetType = UNSET
    filter_subject: str | UnsetType = UNSET
    subject_transforms: list[SubjectTransform] | UnsetType = UNSET
    external: ExternalStream | UnsetType = UNSET
    consumer: StreamConsumerSource | UnsetType = UNSET


class RePublish(APIStruct):
    dest: str
    src: str | UnsetType = UNSET
    headers_only: bool | UnsetType = UNSET


class StreamConsumerLimits(APIStruct):
    _durations: ClassVar[tuple[str, ...]] = ("inactive_threshold",)
    inactive_threshold: Duration | UnsetType = UNSET
    max_ack_pending: int | UnsetType = UNSET


class StreamConfig(APIStruct):
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
    msgs: list[int] | None = None
    bytes: int = 0


class StreamState(ReplyStruct):
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
    _durations: ClassVar[tuple[str, ...]] = ("active",)
    name: str = ""
    current: bool = False
    offline: bool = False
    active: Duration = Duration(0)
    lag: int = 0


class ClusterInfo(ReplyStruct):
    name: str | None = None
    leader: str | None = None
    replicas: list[PeerInfo] | None = None


class StreamSourceInfo(ReplyStruct):
    _durations: ClassVar[tuple[str, ...]] = ("active",)
    name: str = ""
    lag: int = 0
    active: Duration = Duration(0)
    filter_subject: str | None = None
    external: ExternalStream | None = None


class StreamAlternate(ReplyStruct):
    name: str = ""
    domain: str | None = None
    cluster: str = ""


class StreamInfo(ReplyStruct):
    config: StreamConfig
    state: StreamState = msgspec.field(default_factory=StreamState)
    created: dt.datetime | None = None
    ts: dt.datetime | None = None
    domain: str | None = None
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] | None = None
    alternates: list[StreamAlternate] | None = None
