"""The values of the API's enum-like fields: retention, storage, discard, compression, persist mode
(streams); deliver, ack, replay and priority policies (consumers).

Pure data.  They are ``StrEnum`` s, so a member is the string the server uses; the models' fields
themselves are plain strings (a value a newer server adds still decodes), checked against these by
:func:`~.validation.validate_stream_config` and :func:`~.validation.validate_consumer_config`.
"""

from __future__ import annotations

import enum


class _StrEnum(enum.StrEnum):
    pass


class RetentionPolicy(_StrEnum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(_StrEnum):
    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(_StrEnum):
    OLD = "old"
    NEW = "new"


class StoreCompression(_StrEnum):
    NONE = "none"
    S2 = "s2"


class DeliverPolicy(_StrEnum):
    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(_StrEnum):
    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"  # server 2.14+: acked by answering flow control


class PriorityPolicy(_StrEnum):
    """ADR-42 priority groups of a pull consumer (server 2.11+; prioritized 2.12+)."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


class PersistMode(_StrEnum):
    """When a stream acks a publish: after the write is flushed (default) or before (async, 2.12+)."""

    DEFAULT = "default"
    ASYNC = "async"


class ReplayPolicy(_StrEnum):
    INSTANT = "instant"
    ORIGINAL = "original"
