"""What a JetStream feature needs of the server (ADR-44 API levels), decided before sending.

Pure functions over configs and the connected server's INFO block; no I/O,
no threads.  The levels are the server's own (``setStaticStreamMetadata``
and ``setStaticConsumerMetadata`` in nats-server): a config that uses a
feature needs the level at which the server started to store it.

A server announces its level in INFO (``api_lvl``) only from 2.12 on; a
2.11 server has level 1 without saying so, which its release tells (a
missing field is never read as level 0 for a server that has more).

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

from ..errors import FeatureNotSupportedError, RequestOutcome
from ..release import announced
from .api import AckPolicy, ConsumerConfig, PersistMode, PriorityPolicy, StreamConfig, StreamSource

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
PRIORITIZED = Feature("priority_policy prioritized", 2, "2.12")  # 2.11 knows overflow and pinned_client only
ATOMIC_BATCH = Feature("atomic batch publish", 2, "2.12")
SCHEDULES = Feature("message schedules", 2, "2.12")
ASYNC_PERSIST = Feature("persist_mode async", 2, "2.12")
FAST_BATCH = Feature("fast-ingest batch publish", 4, "2.14")
REPEATING_SCHEDULES = Feature("repeating message schedules", 4, "2.14")  # 2.12 takes '@at' only
#: 2.12 takes Nats-Schedule-Source and ignores it: its schedule publishes its own body, not the sampled message.
SCHEDULE_SOURCE = Feature("schedule_source", 4, "2.14")
#: A source or mirror read through an existing consumer (``StreamSource.consumer``): 2.10 and 2.11 drop the
#: field and read through a consumer of their own (one that takes a work-queue origin's messages), 2.12 refuses
#: it as invalid JSON.
SOURCE_CONSUMER = Feature("sourcing through a consumer", 4, "2.14")
CONSUMER_RESET = Feature("consumer reset", 4, "2.14")
ACK_FLOW_CONTROL = Feature("ack_policy flow_control", 4, "2.14")
#: Direct gets that a 2.10 server reads wrongly or not at all (ADR-31, revision 2).
BATCHED_DIRECT_GET = Feature("batched direct get", 1, "2.11")
MULTI_LAST_DIRECT_GET = Feature("multi-subject direct get", 1, "2.11")
START_TIME_GET = Feature("get by start_time", 1, "2.11")

#: Every feature a server may lack, for tests and docs.
ALL = (
    MESSAGE_TTL, DELETE_MARKERS, CONSUMER_PAUSE, PRIORITY_GROUPS, PRIORITIZED, COUNTERS, ATOMIC_BATCH, SCHEDULES,
    ASYNC_PERSIST, FAST_BATCH, REPEATING_SCHEDULES, SCHEDULE_SOURCE, SOURCE_CONSUMER, CONSUMER_RESET,
    ACK_FLOW_CONTROL, BATCHED_DIRECT_GET, MULTI_LAST_DIRECT_GET, START_TIME_GET,
)

def server_level(info: Mapping[str, Any]) -> int:
    """The server's API level: INFO's ``api_lvl`` where it has one (2.12+), else what its release supports.

    2.11 announces no level yet has level 1; 2.10 and older have level 0.
    """
    level = info.get("api_lvl")
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    text = info.get("version")
    found = announced(text) if isinstance(text, str) else None
    return 1 if found is not None and (found.major, found.minor) >= (2, 11) else 0  # 2.11's release candidates too


def supports(info: Mapping[str, Any], feature: Feature) -> bool:
    """Whether the server of ``info`` has ``feature`` (to choose another way of asking, not to refuse)."""
    return server_level(info) >= feature.level


def require(info: Mapping[str, Any], features: list[Feature]) -> int:
    """The level ``features`` need; FeatureNotSupportedError names the one the server lacks that needs the
    newest release (so the release it names is enough for them all), before anything is sent (its outcome is
    NOT_DELIVERED)."""
    needed = max((f.level for f in features), default=0)
    if needed:
        have = server_level(info)
        if needed > have:
            feature = next(f for f in features if f.level == needed)
            version = info.get("version", "unknown")
            raise FeatureNotSupportedError(
                description=(
                    f"{feature.name} needs nats-server {feature.version} or newer (JetStream API level "
                    f"{feature.level}); the connected server is {version} (API level {have})"
                ),
                outcome=RequestOutcome.NOT_DELIVERED,  # refused here: nothing was sent
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
    origins = [*(cfg.sources if isinstance(cfg.sources, list) else ()), cfg.mirror]
    if any(isinstance(origin, StreamSource) and origin.consumer is not UNSET for origin in origins):
        used.append(SOURCE_CONSUMER)
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
    if cfg.priority_policy == PriorityPolicy.PRIORITIZED:
        used.append(PRIORITIZED)
    if cfg.ack_policy == AckPolicy.FLOW_CONTROL:
        used.append(ACK_FLOW_CONTROL)
    return used
