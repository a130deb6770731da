"""Consumption: the push, ordered and pull subscriptions a context makes.

Runs on the calling (user) thread, only to check the options and construct
the subscription; the subscriptions themselves (:mod:`.push`, :mod:`.ordered`,
:mod:`.pull`) say which threads run them.  Nothing here is mutable, so
nothing is locked and one :class:`Subscriber` may be shared by many threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError
from .api import ConsumerConfig
from .ordered import OrderedSubscription, subscribe_ordered
from .pull import PullSubscription, pull_subscribe
from .push import PushSubscription
from .push import subscribe as subscribe_push

if TYPE_CHECKING:
    from ..message import Msg
    from .context import JetStream


class Subscriber:
    """The consuming part of a :class:`~jsclient.jetstream.context.JetStream`: it builds subscriptions on it.

    Each public method is the body of the context's method of the same name,
    whose docstring it keeps; the context supplies the defaults.
    """

    def __init__(self, js: JetStream) -> None:
        self._js = js

    def subscribe(
        self,
        subject: str | None,
        *,
        durable: str | None,
        queue: str | None,
        stream: str | None,
        consumer: str | None,
        config: ConsumerConfig | None,
        cb: Callable[[Msg], None] | None,
        manual_ack: bool,
        idle_heartbeat: float | None,
        flow_control: bool,
        heartbeat_alarm: float | None,
        ordered: bool,
        pending_msgs_limit: int | None,
        pending_bytes_limit: int | None,
    ) -> PushSubscription | OrderedSubscription:
        if ordered:
            if durable is not None or queue is not None or consumer is not None:
                bad = "durable" if durable is not None else "queue" if queue is not None else "consumer"
                raise InvalidArgumentError(f"an ordered consumer cannot use {bad}")
            if manual_ack or flow_control is not False or heartbeat_alarm is not None:
                bad = "manual_ack" if manual_ack else "flow_control" if flow_control else "heartbeat_alarm"
                raise InvalidArgumentError(f"an ordered consumer cannot use {bad} (it manages it itself)")
            return subscribe_ordered(
                self._js,
                subject,
                stream=stream,
                config=config,
                cb=cb,
                idle_heartbeat=idle_heartbeat,
                pending_msgs_limit=pending_msgs_limit,
                pending_bytes_limit=pending_bytes_limit,
            )
        return subscribe_push(
            self._js,
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
        subject: str | None,
        durable: str | None,
        *,
        stream: str | None,
        consumer: str | None,
        config: ConsumerConfig | None,
        group: str | None,
        min_pending: int | None,
        min_ack_pending: int | None,
        priority: int | None,
    ) -> PullSubscription:
        return pull_subscribe(
            self._js, subject, durable=durable, stream=stream, consumer=consumer, config=config, group=group,
            min_pending=min_pending, min_ack_pending=min_ack_pending, priority=priority,
        )
