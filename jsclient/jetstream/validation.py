"""Checks of API requests before anything is sent: stream and consumer configs, names of streams,
consumers and priority groups, and configs built from a base plus keyword overrides.

Pure functions, no I/O, no threads.  A mistake raises :class:`~jsclient.errors.InvalidArgumentError`
naming the field, rather than leaving the server to refuse the request.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, TypeVar

from msgspec import UNSET

from ..errors import InvalidArgumentError
from .apicodec import APIStruct, replace
from .apienums import (
    AckPolicy,
    DeliverPolicy,
    DiscardPolicy,
    PersistMode,
    PriorityPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
)
from .consumertypes import ConsumerConfig
from .streamtypes import StreamConfig

T = TypeVar("T")

_NAME_FORBIDDEN = set(" \t\r\n.*>/\\")
_NAME_FORBIDDEN_RE = re.compile(f"[{re.escape(''.join(_NAME_FORBIDDEN))}]")  # one C-level scan on the hot path
#: The server refuses shorter consumer heartbeats.
MIN_IDLE_HEARTBEAT = 0.1

_CHOICES = {
    "retention": {e.value for e in RetentionPolicy},
    "storage": {e.value for e in StorageType},
    "discard": {e.value for e in DiscardPolicy},
    "compression": {e.value for e in StoreCompression},
    "deliver_policy": {e.value for e in DeliverPolicy},
    "ack_policy": {e.value for e in AckPolicy},
    "replay_policy": {e.value for e in ReplayPolicy},
    "priority_policy": {e.value for e in PriorityPolicy},
    "persist_mode": {e.value for e in PersistMode},
}


def check_name(what: str, name: Any) -> str:
    """Stream, consumer and durable names: non-empty, no dots, wildcards, whitespace or slashes."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{what} must be a non-empty str, not {name!r}")
    if _NAME_FORBIDDEN_RE.search(name) is not None:
        bad = sorted(set(name) & _NAME_FORBIDDEN)
        raise InvalidArgumentError(f"{what} {name!r} contains forbidden character(s) {''.join(bad)!r}")
    return name


def _check_choices(obj: APIStruct) -> None:
    for field, allowed in _CHOICES.items():
        value = getattr(obj, field, UNSET)
        if value is not UNSET and str(value) not in allowed:
            raise InvalidArgumentError(f"{field} must be one of {', '.join(sorted(allowed))}; not {value!r}")


def _check_non_negative(obj: APIStruct, fields: tuple[str, ...]) -> None:
    for field in fields:
        value = getattr(obj, field)
        if value is UNSET:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError(f"{field} must be a number, not {value!r}")
        if value < 0 and not (value == -1 and isinstance(value, int)):
            raise InvalidArgumentError(f"{field} must be >= 0 (or -1 for unlimited), not {value!r}")


def _check_bools(obj: APIStruct, fields: tuple[str, ...]) -> None:
    for field in fields:
        value = getattr(obj, field)
        if value is not UNSET and not isinstance(value, bool):
            raise InvalidArgumentError(f"{field} must be True or False, not {value!r}")


_STREAM_FLAGS = (
    "no_ack", "discard_new_per_subject", "sealed", "deny_delete", "deny_purge", "allow_rollup_hdrs",
    "allow_direct", "mirror_direct", "allow_msg_ttl", "allow_msg_counter", "allow_atomic",
    "allow_msg_schedules", "allow_batched",
)
#: The server's minimum for a per-message TTL and for subject_delete_marker_ttl (ADR-43).
MIN_MESSAGE_TTL = 1.0
#: ADR-42: a priority group's name.
_GROUP_NAME = re.compile(r"[A-Za-z0-9\-_/=]{1,16}")  # ADR-42: ADR-6's limited-term, at most 16


def validate_stream_config(config: StreamConfig) -> StreamConfig:
    check_name("stream name", config.name)
    _check_choices(config)
    _check_bools(config, _STREAM_FLAGS)
    marker_ttl = config.subject_delete_marker_ttl
    if isinstance(marker_ttl, float) and 0 < marker_ttl < MIN_MESSAGE_TTL:
        raise InvalidArgumentError(
            f"subject_delete_marker_ttl must be at least {MIN_MESSAGE_TTL:g} s (server minimum), not {marker_ttl}"
        )
    if config.allow_msg_counter is True:
        for other in ("allow_msg_ttl", "mirror"):
            if getattr(config, other) not in (UNSET, None, False):
                raise InvalidArgumentError(f"allow_msg_counter cannot be combined with {other} (ADR-49)")
    _check_non_negative(
        config,
        ("max_consumers", "max_msgs", "max_bytes", "max_age", "max_msgs_per_subject", "max_msg_size",
         "duplicate_window", "first_seq"),
    )
    if config.num_replicas is not UNSET and not (
        isinstance(config.num_replicas, int) and 1 <= config.num_replicas <= 5
    ):
        raise InvalidArgumentError(f"num_replicas must be 1 to 5, not {config.num_replicas!r}")
    if config.subjects is not UNSET:
        subjects: Any = config.subjects
        if not isinstance(subjects, list):
            raise InvalidArgumentError(f"subjects must be a list of subjects, not {subjects!r}")
        from ..protocol import check_subscribe_subject

        for subject in config.subjects:
            check_subscribe_subject(subject, "stream subject")
    return config


def validate_consumer_config(config: ConsumerConfig) -> ConsumerConfig:
    for field in ("name", "durable_name"):
        value = getattr(config, field)
        if value is not UNSET:
            check_name(field, value)
    if (
        config.name is not UNSET
        and config.durable_name is not UNSET
        and config.name != config.durable_name
    ):
        raise InvalidArgumentError(
            f"name {config.name!r} and durable_name {config.durable_name!r} must match when both are set"
        )
    _check_choices(config)
    _check_non_negative(
        config,
        ("ack_wait", "max_deliver", "max_waiting", "max_ack_pending", "idle_heartbeat", "max_batch",
         "max_expires", "max_bytes", "inactive_threshold", "opt_start_seq", "rate_limit_bps",
         "priority_timeout"),
    )
    _check_bools(config, ("flow_control", "headers_only", "mem_storage"))
    _check_priority(config)
    pause = config.pause_until
    if pause is not UNSET and not (isinstance(pause, dt.datetime) and pause.utcoffset() is not None):
        raise InvalidArgumentError(f"pause_until must be a timezone-aware datetime, not {pause!r}")
    hb = config.idle_heartbeat
    if isinstance(hb, float) and 0 < hb < MIN_IDLE_HEARTBEAT:
        raise InvalidArgumentError(f"idle_heartbeat must be at least {MIN_IDLE_HEARTBEAT} s (server limit), not {hb}")
    if config.filter_subject is not UNSET and config.filter_subjects is not UNSET:
        raise InvalidArgumentError("set filter_subject or filter_subjects, not both")
    from ..protocol import check_subscribe_subject

    if config.filter_subject is not UNSET and config.filter_subject:
        check_subscribe_subject(config.filter_subject, "filter_subject")
    if config.filter_subjects is not UNSET:
        for subject in config.filter_subjects:
            check_subscribe_subject(subject, "filter_subjects entry")
    if config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE and config.opt_start_seq is UNSET:
        raise InvalidArgumentError("deliver_policy by_start_sequence needs opt_start_seq")
    if config.deliver_policy == DeliverPolicy.BY_START_TIME and config.opt_start_time is UNSET:
        raise InvalidArgumentError("deliver_policy by_start_time needs opt_start_time")
    if config.opt_start_seq is not UNSET and config.deliver_policy != DeliverPolicy.BY_START_SEQUENCE:
        raise InvalidArgumentError("opt_start_seq needs deliver_policy by_start_sequence")
    if config.opt_start_time is not UNSET and config.deliver_policy != DeliverPolicy.BY_START_TIME:
        raise InvalidArgumentError("opt_start_time needs deliver_policy by_start_time")
    return config


def _check_priority(config: ConsumerConfig) -> None:
    """ADR-42's rules, so a bad combination is named before the server refuses it."""
    groups: Any = config.priority_groups
    if groups is not UNSET:
        if not isinstance(groups, list) or not groups:
            raise InvalidArgumentError(f"priority_groups must be a non-empty list of names, not {groups!r}")
        for group in groups:
            check_group(group)
    policy = config.priority_policy
    grouped = policy is not UNSET and policy != PriorityPolicy.NONE
    if grouped and groups is UNSET:
        raise InvalidArgumentError(f"priority_policy {policy!r} needs priority_groups")
    if groups is not UNSET and not grouped:
        raise InvalidArgumentError("priority_groups need a priority_policy (overflow, pinned_client or prioritized)")
    if config.priority_timeout is not UNSET and policy != PriorityPolicy.PINNED_CLIENT:
        raise InvalidArgumentError("priority_timeout needs priority_policy pinned_client")


def check_group(group: Any) -> str:
    """A priority group name: 1 to 16 of A-Z a-z 0-9 - _ / =."""
    if not isinstance(group, str) or _GROUP_NAME.fullmatch(group) is None:
        raise InvalidArgumentError(f"priority group {group!r} must be 1 to 16 characters of A-Z, a-z, 0-9 and -_/=")
    return group


def merge_config(kind: type[T], config: T | None, overrides: dict[str, Any]) -> T:
    """A config from an optional base object plus keyword overrides (unknown keys rejected)."""
    fields = set(kind.__struct_fields__)  # type: ignore[attr-defined]
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise InvalidArgumentError(f"unknown {kind.__name__} field(s): {', '.join(unknown)}")
    if config is None:
        return kind(**overrides)
    if not isinstance(config, kind):
        raise InvalidArgumentError(f"config must be a {kind.__name__}, not {type(config).__name__}")
    if not overrides:
        return config
    return replace(config, **overrides)  # type: ignore[type-var]
