"""What a JetStream feature needs of the server (ADR-44 API levels), decided before sending.

Pure functions over configs and the connected server's INFO block; no I/O,
no threads.  The levels are the server's own (``setStaticStreamMetadata``
and ``setStaticConsumerMetadata`` in nats-server): a config that uses a
feature needs the level at which the server started to store it.

The connected server speaks for the cluster only approximately (a leaf
node may be older than the JetStream servers behind it), so calls that
need a level also carry ``Nats-Required-Api-Level``: a 2.12+ JetStream
server refuses the request itself (10185) rather than drop a field it
does not know.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from ..errors import FeatureNotSupportedError
from .api import AckPolicy, ConsumerConfig, PersistMode, PriorityPolicy, StreamConfig

#: The header that asks the JetStream server answering an API call for an API level.
LEVEL_HEADER = "Nats-Required-Api-Level"


@dataclass(frozen=True)
class Feature:
    name: str
    level: int  # the API level (ADR-44) that introduced it
    version: str  # the first server release at that level


MESSAGE_TTL = Feature("per-message TTL", 1, "2.11")
DELETE_MARKERS = Feature("subject delete markers", 1, "2.11")
CONSUMER_PAUSE = Feature("consumer pause", 1, "2.11")
PRIORITY_GROUPS = Feature("priority groups", 1, "2.11")
COUNTERS = Feature("message counters", 2, "2.12")
ATOMIC_BATCH = Feature("atomic batch publish", 2, "2.12")
SCHEDULES = Feature("message schedules", 2, "2.12")
ASYNC_PERSIST = Feature("persist_mode async", 2, "2.12")
FAST_BATCH = Feature("fast-ingest batch publish", 4, "2.14")
CONSUMER_RESET = Feature("consumer reset", 4, "2.14")
ACK_FLOW_CONTROL = Feature("ack_policy flow_control", 4, "2.14")


def server_level(info: Mapping[str, Any]) -> int:
    """The API level the server announced in INFO (servers before 2.11 announce none: level 0)."""
    level = info.get("api_lvl")
    return level if isinstance(level, int) and not isinstance(level, bool) else 0


def require(info: Mapping[str, Any], features: list[Feature]) -> int:
    """The level ``features`` need; FeatureNotSupportedError names the first the server lacks."""
    needed = max((f.level for f in features), default=0)
    if needed:
        have = server_level(info)
        for feature in features:
            if feature.level > have:
                version = info.get("version", "unknown")
                raise FeatureNotSupportedError(
                    description=(
                        f"{feature.name} needs nats-server {feature.version} or newer (JetStream API level "
                        f"{feature.level}); the connected server is {version} (API level {have})"
                    )
                )
    return needed


def _on(value: Any) -> bool:
    return value is not UNSET and bool(value)


def stream_features(cfg: StreamConfig) -> list[Feature]:
    """The features a stream config uses that a 2.10 server would not store."""
    used: list[Feature] = []
    if _on(cfg.allow_msg_ttl):
        used.append(MESSAGE_TTL)
    if _on(cfg.subject_delete_marker_ttl):
        used.append(DELETE_MARKERS)
    if _on(cfg.allow_msg_counter):
        used.append(COUNTERS)
    if _on(cfg.allow_atomic):
        used.append(ATOMIC_BATCH)
    if _on(cfg.allow_msg_schedules):
        used.append(SCHEDULES)
    if cfg.persist_mode == PersistMode.ASYNC:
        used.append(ASYNC_PERSIST)
    if _on(cfg.allow_batched):
        used.append(FAST_BATCH)
    return used


def consumer_features(cfg: ConsumerConfig) -> list[Feature]:
    """The features a consumer config uses that a 2.10 server would not store."""
    used: list[Feature] = []
    if isinstance(cfg.pause_until, dt.datetime):
        used.append(CONSUMER_PAUSE)
    if _on(cfg.priority_groups) or _on(cfg.priority_timeout) or (
        cfg.priority_policy is not UNSET and cfg.priority_policy != PriorityPolicy.NONE
    ):
        used.append(PRIORITY_GROUPS)
    if cfg.ack_policy == AckPolicy.FLOW_CONTROL:
        used.append(ACK_FLOW_CONTROL)
    return used
