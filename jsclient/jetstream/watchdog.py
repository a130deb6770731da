"""The heartbeat watchdog: one thread per connection checks every subscription's heartbeats.

Subscriptions with an idle heartbeat register a :class:`HeartbeatMonitor`
with the connection's watchdog :class:`~jsclient.scheduler.Scheduler` (a
heap on the ``jsclient-watchdog`` thread, not a thread or timer per
subscription).  Each check compares the subscription's ``received`` counter
(written by the reader thread for messages and heartbeats alike, so the hot
path pays nothing extra) with the last value seen; when it has not moved for
the alarm time, ``on_alarm`` runs once, on the watchdog thread, and must only
hand work elsewhere; an observer (:mod:`jsclient.observe`) is told just
before.  The monitor's fields are touched only by that thread, except
``stop()``, which merely cancels.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from .. import observe
from ..observe import ConsumerKind
from ..scheduler import Scheduler, Timer


class Counted(Protocol):
    received: int


class HeartbeatMonitor:
    """Raise an alarm when ``sub.received`` stays still for ``alarm`` seconds."""

    def __init__(
        self,
        watchdog: Scheduler,
        sub: Counted,
        interval: float,
        alarm: float,
        on_alarm: Callable[[], None],
        kind: ConsumerKind,
    ) -> None:
        self._watchdog = watchdog
        self._kind = kind  # what the alarm is told as
        self._sub = sub
        self.interval = interval
        self.alarm = alarm
        self._on_alarm = on_alarm
        self._seen = sub.received
        self._last_change = time.monotonic()
        self._alarmed = False
        self._timer: Timer | None = None
        self._stopped = False

    def start(self) -> HeartbeatMonitor:
        self._timer = self._watchdog.call_later(self.interval, self._check)
        return self

    def reset(self) -> None:
        """Forget past silence (after a resubscription, for instance)."""
        self._seen = self._sub.received
        self._last_change = time.monotonic()
        self._alarmed = False

    def _check(self) -> None:
        if self._stopped:
            return
        now = time.monotonic()
        received = self._sub.received
        if received != self._seen:
            self._seen = received
            self._last_change = now
            self._alarmed = False
        elif not self._alarmed and now - self._last_change >= self.alarm:
            self._alarmed = True
            listener = observe.listener
            if listener is not None:
                listener.heartbeat_alarm(self._kind)
            self._on_alarm()
        if not self._stopped:
            self._timer = self._watchdog.call_later(self.interval, self._check)

    def stop(self) -> None:
        self._stopped = True
        timer = self._timer
        if timer is not None:
            timer.cancel()
