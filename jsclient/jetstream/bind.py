"""Consumer lookup, binding checks and creation config, shared by push and pull subscribe (ADR-13, ADR-15).

Runs on the user's thread; the only I/O is the JetStream API calls of
:func:`find_consumer` and :func:`stream_of`.  Everything a user can get wrong
without a server is checked before either is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from ..errors import ConsumerNotFoundError, InvalidArgumentError, JetStreamSubscribeError
from . import api
from .api import AckPolicy, ConsumerConfig, ConsumerInfo

if TYPE_CHECKING:
    from .context import JetStream

# Fields the workflow sets itself, checked separately from "changes not applied".
_WORKFLOW_FIELDS = ("deliver_subject", "deliver_group", "filter_subject", "durable_name", "name")


class Bound:
    """What every JetStream subscription knows: its context, stream, subject filter and consumer."""

    def __init__(self, js: JetStream, stream: str, subject: str | None, consumer: str = "") -> None:
        self._js = js
        self._conn = js.conn
        self.stream = stream
        self.subject = subject
        self.consumer = consumer

    def consumer_info(self) -> ConsumerInfo:
        """The consumer's current state, asked of the server.

        Returns:
            The consumer's info (configuration, delivered and pending counts).

        Raises:
            ConsumerNotFoundError: The consumer was deleted.
            StreamNotFoundError: The stream was deleted.
            JetStreamNotEnabledError: No JetStream answered.
            TimeoutError: No answer within the JetStream context's timeout.
            ConnectionClosedError: The connection is closed or draining.
        """
        return self._js.consumer_info(self.stream, self.consumer)


def is_set(value: Any) -> bool:
    return value is not UNSET and value is not None


def check_names(durable: str | None, consumer: str | None, user: ConsumerConfig) -> str | None:
    """Check the names given; the durable name to use (``durable``, else the config's)."""
    for what, value in (("durable", durable), ("consumer", consumer)):
        if value is not None:
            api.check_name(what, value)
    if durable is None and isinstance(user.durable_name, str):
        durable = user.durable_name
    elif durable and is_set(user.durable_name) and user.durable_name != durable:
        raise InvalidArgumentError(f"durable {durable!r} differs from config durable_name {user.durable_name!r}")
    if consumer and durable and consumer != durable:
        raise InvalidArgumentError(f"consumer {consumer!r} and durable {durable!r} differ")
    return durable


def stream_of(js: JetStream, stream: str | None, subject: str | None) -> str:
    """The stream given, or the one whose subjects cover ``subject``."""
    name = stream or js.find_stream(subject)  # type: ignore[arg-type]
    api.check_name("stream", name)
    return name


def find_consumer(js: JetStream, stream: str, name: str | None, *, must_exist: bool) -> ConsumerInfo | None:
    """The named consumer's info; None when unnamed or absent (an error when ``must_exist``)."""
    if not name:
        return None
    try:
        return js.consumer_info(stream, name)
    except ConsumerNotFoundError:
        if must_exist:
            raise ConsumerNotFoundError(
                404, 10014, f"cannot bind to consumer {name!r} on stream {stream!r}: it does not exist"
            ) from None
        return None


def creation_config(user: ConsumerConfig, subject: str | None, name: str | None, **fields: Any) -> ConsumerConfig:
    """``user`` with what subscribing adds: explicit acks by default, the subject as filter, the durable name."""
    if not is_set(user.ack_policy):
        fields["ack_policy"] = AckPolicy.EXPLICIT.value
    if subject and not is_set(user.filter_subject) and not is_set(user.filter_subjects):
        fields["filter_subject"] = subject
    if name:
        fields["durable_name"] = name
    return api.replace(user, **fields)


def check_bound_consumer(
    info: ConsumerInfo, subject: str | None, queue: str | None, user: ConsumerConfig, *, pull: bool
) -> None:
    """Every ADR-15 check of an existing consumer against what the user asked for."""
    cfg = info.config
    name = info.name
    deliver_subject = str(cfg.deliver_subject) if is_set(cfg.deliver_subject) else ""
    group = str(cfg.deliver_group) if is_set(cfg.deliver_group) else ""
    if pull and deliver_subject:
        raise JetStreamSubscribeError(
            f"consumer {name!r} is a push consumer (deliver subject {deliver_subject!r}); "
            "a pull subscription cannot use it"
        )
    if not pull and not deliver_subject:
        raise JetStreamSubscribeError(f"consumer {name!r} is a pull consumer; use pull_subscribe")
    if subject:
        filters = [cfg.filter_subject] if is_set(cfg.filter_subject) else list(cfg.filter_subjects or [])
        if filters and subject not in filters:
            raise JetStreamSubscribeError(
                f"subject {subject!r} does not match consumer {name!r} filter subject(s) {filters}"
            )
    if not pull:
        _check_push_binding(info, queue, group)
    for field in ConsumerConfig.__struct_fields__:
        if field in _WORKFLOW_FIELDS:
            continue
        wanted = getattr(user, field)
        if not is_set(wanted):
            continue
        actual = getattr(cfg, field)
        if wanted != actual:
            raise JetStreamSubscribeError(
                f"configuration requests {field}={wanted!r}, but consumer {name!r} has {field}={actual!r}; "
                "changes not applied (only the deliver subject of an existing consumer can change)"
            )


def _check_push_binding(info: ConsumerInfo, queue: str | None, group: str) -> None:
    cfg = info.config
    name = info.name
    if queue is None:
        if group:
            raise JetStreamSubscribeError(
                f"cannot create a non-queue subscription for consumer {name!r}, which was created "
                f"for queue group {group!r}"
            )
        if info.push_bound:
            raise JetStreamSubscribeError(f"duplicate subscription: consumer {name!r} is already bound")
        return
    if not group:
        raise JetStreamSubscribeError(
            f"cannot create a queue subscription {queue!r} for consumer {name!r}, which was created "
            "without a deliver group"
        )
    if group != queue:
        raise JetStreamSubscribeError(
            f"cannot create a queue subscription {queue!r} for consumer {name!r}, which was created "
            f"for queue group {group!r}"
        )
    if cfg.flow_control is True:
        raise JetStreamSubscribeError(f"consumer {name!r} uses flow control, which queue groups cannot")
    if is_set(cfg.idle_heartbeat) and cfg.idle_heartbeat:
        raise JetStreamSubscribeError(f"consumer {name!r} uses heartbeats, which queue groups cannot")
