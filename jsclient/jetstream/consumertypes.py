"""The models of consumers: a consumer's config (what is sent to create or update one) and its info
(what the server says of one), with the answers to pausing and resetting one.

Pure data, no I/O, no threads; built on :mod:`.apicodec` (unset fields not sent, durations in seconds,
unknown reply fields kept).
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

import msgspec
from msgspec import UNSET, UnsetType

from .apicodec import APIStruct, Duration, ReplyStruct
from .streamtypes import ClusterInfo


class ConsumerConfig(APIStruct):
    _durations: ClassVar[tuple[str, ...]] = (
        "ack_wait",
        "idle_heartbeat",
        "max_expires",
        "inactive_threshold",
        "backoff",
        "priority_timeout",
    )
    name: str | UnsetType = UNSET
    durable_name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    deliver_policy: str | UnsetType = UNSET
    opt_start_seq: int | UnsetType = UNSET
    opt_start_time: dt.datetime | UnsetType = UNSET
    ack_policy: str | UnsetType = UNSET
    ack_wait: Duration | UnsetType = UNSET
    max_deliver: int | UnsetType = UNSET
    backoff: list[Duration] | UnsetType = UNSET
    filter_subject: str | UnsetType = UNSET
    filter_subjects: list[str] | UnsetType = UNSET
    replay_policy: str | UnsetType = UNSET
    rate_limit_bps: int | UnsetType = UNSET
    sample_freq: str | UnsetType = UNSET
    max_waiting: int | UnsetType = UNSET
    max_ack_pending: int | UnsetType = UNSET
    flow_control: bool | UnsetType = UNSET
    idle_heartbeat: Duration | UnsetType = UNSET
    headers_only: bool | UnsetType = UNSET
    max_batch: int | UnsetType = UNSET
    max_expires: Duration | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    inactive_threshold: Duration | UnsetType = UNSET
    num_replicas: int | UnsetType = UNSET
    mem_storage: bool | UnsetType = UNSET
    deliver_subject: str | UnsetType = UNSET
    deliver_group: str | UnsetType = UNSET
    metadata: dict[str, str] | UnsetType = UNSET
    # Server 2.11+ (API level 1): a paused consumer delivers nothing until then (aware datetime).
    pause_until: dt.datetime | UnsetType = UNSET
    # Server 2.11+ (API level 1): ADR-42 priority groups of a pull consumer.
    priority_groups: list[str] | UnsetType = UNSET
    priority_policy: str | UnsetType = UNSET
    priority_timeout: Duration | UnsetType = UNSET  # how long a pin lasts without pulls


class SequenceInfo(ReplyStruct):
    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: dt.datetime | None = None


class PriorityGroupState(ReplyStruct):
    """A priority group of a consumer: who holds its pin, since when (None when nobody does)."""

    group: str = ""
    pinned_client_id: str | None = None
    pinned_ts: dt.datetime | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pinned_ts is not None and self.pinned_ts.year == 1:
            self.pinned_ts = None  # the server sends Go's zero time


class ConsumerInfo(ReplyStruct):
    stream_name: str
    name: str
    config: ConsumerConfig
    created: dt.datetime | None = None
    delivered: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    ack_floor: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: ClusterInfo | None = None
    push_bound: bool = False
    paused: bool = False
    pause_remaining: Duration | None = None
    ts: dt.datetime | None = None
    priority_groups: list[PriorityGroupState] | None = None


class ConsumerPause(ReplyStruct):
    """The answer to pausing or resuming a consumer (``pause_until`` None once resumed)."""

    _durations: ClassVar[tuple[str, ...]] = ("pause_remaining",)
    paused: bool = False
    pause_until: dt.datetime | None = None
    pause_remaining: Duration | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.paused:
            self.pause_until = None  # the server sends Go's zero time


class ConsumerResetInfo(ConsumerInfo, kw_only=True):
    """A reset consumer's info, with the stream sequence it delivers from next."""

    reset_seq: int = 0
