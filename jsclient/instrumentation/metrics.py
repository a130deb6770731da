"""Metrics of connections, subscriptions and JetStream readers, beyond the semantic conventions' four.

The conventions' messaging metrics (``messaging.client.sent.messages``,
``messaging.client.consumed.messages``, ``messaging.client.operation.duration``
(which is also the request round trip: ``messaging.operation.name`` =
``request``) and ``messaging.process.duration``) are recorded by the wrappers
of :mod:`.core`.  This part adds, under ``jsclient.``, two kinds:

* **Observable instruments** that read, at each collection, the counters every
  live connection keeps anyway (:func:`jsclient.live_connections`: connections
  made before ``instrument()`` too): traffic, reconnects, each subscription's
  drops and queue, each JetStream context's ``publish_async`` window.  Nothing
  is added to any message's path.  Their points carry ``messaging.client.id``
  (:func:`client_id`), because each reports one connection's own running total
  (a subscription's ``sid`` is only unique within its connection).
* **Counters of rare events** the core and the JetStream layer tell through
  :data:`jsclient.observe.listener` (set while instrumented): lost links by
  reason, JetStream API errors by code, heartbeat alarms, ordered consumers'
  resets.  Events add up across connections, so their points carry no client id.

Threads: the observable callbacks run on the SDK's collecting thread (a
``PeriodicExportingMetricReader``'s, or the caller of ``collect()``); they take
no lock of jsclient's, read plain counts (an int is read whole without one)
and lists copied at once, and never raise.  The listener's methods run where
:mod:`jsclient.observe` says (never the reader thread, never under a lock).
``uninstrument()`` sets the listener back to None, and the callbacks, which the
SDK keeps, then report nothing.
"""

from __future__ import annotations

import enum
import itertools
import logging
import os
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import CallbackOptions, Counter, Meter, Observation

from .. import observe
from ..connection import Connection, live_connections
from ..jetstream.publisher import publish_async_in_flight
from ..observe import ConsumerKind, DisconnectReason
from .patches import Patches
from .telemetry import Telemetry

if TYPE_CHECKING:
    from ..subscription import Subscription

__all__ = [
    "API_STATUS_CODE", "CLIENT_ID", "CONSUMER_KIND", "DIRECTION", "DISCONNECT_REASON", "ERROR_CODE", "GROUP", "SID",
    "TEMPLATE", "Direction", "client_id", "install",
]

log = logging.getLogger("jsclient.instrumentation")

#: The connection a point of an observable instrument belongs to (see :func:`client_id`).
CLIENT_ID = "messaging.client.id"
#: ``receive`` or ``transmit`` (:class:`Direction`), as the conventions' network metrics say it.
DIRECTION = "network.io.direction"
#: A subscription's subject, wildcards and all.
TEMPLATE = "messaging.destination.template"
#: A subscription's id on its connection.
SID = "messaging.nats.subscription.sid"
#: A subscription's queue group (only on the points of one that has a group).
GROUP = "messaging.consumer.group.name"
#: Why a link was lost: a :class:`jsclient.observe.DisconnectReason` value.
DISCONNECT_REASON = "messaging.nats.disconnect.reason"
#: A JetStream API error's HTTP-like code (400, 404, 503 ...).
API_STATUS_CODE = "messaging.nats.jetstream.status_code"
#: A JetStream API error's own code (10059: stream not found ...), as the spans carry it.
ERROR_CODE = "messaging.nats.jetstream.error_code"
#: Which kind of JetStream reader: a :class:`jsclient.observe.ConsumerKind` value.
CONSUMER_KIND = "messaging.nats.jetstream.consumer.kind"


class Direction(enum.Enum):
    """Which way a connection's traffic went (the values of :data:`DIRECTION`)."""

    RECEIVE = "receive"
    TRANSMIT = "transmit"


_ids: weakref.WeakKeyDictionary[Connection, tuple[int, str]] = weakref.WeakKeyDictionary()
_numbers = itertools.count(1)


def client_id(conn: Connection) -> str:
    """The ``messaging.client.id`` of ``conn``'s points: ``<pid>-<n>``, ``n`` counting the connections this
    process's instrumentation met, in the order it met them; a forked child gives its copies new ones.

    Stable for the connection's life, across reconnects, so each of its running totals stays one series.
    """
    pid = os.getpid()
    known = _ids.get(conn)
    if known is None or known[0] != pid:
        known = (pid, f"{pid}-{next(_numbers)}")
        _ids[conn] = known
    return known[1]


class _Event(enum.Enum):
    """An event :mod:`jsclient.observe` tells, and the counter that counts it: name, unit, description."""

    DISCONNECT = (
        "jsclient.connection.disconnects", "{disconnect}",
        "Links lost to the server, by reason (each is followed by a reconnect, or a close).",
    )
    API_ERROR = (
        "jsclient.jetstream.api.errors", "{error}",
        "JetStream API requests the server answered with an error, by its codes.",
    )
    ALARM = (
        "jsclient.jetstream.heartbeat.alarms", "{alarm}",
        "JetStream readers that heard nothing, not even a heartbeat, for their alarm time.",
    )
    RESET = (
        "jsclient.jetstream.ordered.resets", "{reset}",
        "Ordered consumers recreated after a gap, a silence, a deleted consumer or a reconnect.",
    )

    def __init__(self, metric: str, unit: str, description: str) -> None:
        self.metric = metric
        self.unit = unit
        self.description = description


class _Listener:
    """The counters of :mod:`jsclient.observe`'s events (a :class:`jsclient.observe.Listener`)."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self._counters: dict[_Event, Counter] = {
            event: meter.create_counter(event.metric, unit=event.unit, description=event.description)
            for event in _Event
        }

    def disconnected(self, reason: DisconnectReason) -> None:
        self._count(_Event.DISCONNECT, {DISCONNECT_REASON: reason.value})

    def api_error(self, code: int, err_code: int) -> None:
        self._count(_Event.API_ERROR, {API_STATUS_CODE: code, ERROR_CODE: err_code})

    def heartbeat_alarm(self, kind: ConsumerKind) -> None:
        self._count(_Event.ALARM, {CONSUMER_KIND: kind.value})

    def ordered_reset(self, kind: ConsumerKind) -> None:
        self._count(_Event.RESET, {CONSUMER_KIND: kind.value})

    def _count(self, event: _Event, attributes: dict[str, Any]) -> None:
        """One event counted; never raises into the jsclient thread that told it."""
        try:
            self._counters[event].add(1, attributes)
        except Exception:
            log.debug("jsclient.instrumentation: the counter of %s failed", event.metric, exc_info=True)


Read = Callable[[], list[Observation]]


class _Kind(enum.Enum):
    """An observable instrument's kind: a running total, or a level that goes up and down."""

    TOTAL = "counter"
    LEVEL = "up_down_counter"


#: The observable instruments: name, kind, unit, what it reads, description.
_OBSERVED: tuple[tuple[str, _Kind, str, Read, str], ...] = (
    ("jsclient.connection.bytes", _Kind.TOTAL, "By", lambda: _traffic("in_bytes", "out_bytes"),
     "Payload bytes a connection received and sent (network.io.direction), since it connected."),
    ("jsclient.connection.messages", _Kind.TOTAL, "{message}", lambda: _traffic("in_msgs", "out_msgs"),
     "Messages a connection received and sent (network.io.direction), since it connected."),
    ("jsclient.connection.reconnects", _Kind.TOTAL, "{reconnect}", lambda: _reconnects(),
     "Times a connection was restored after losing its link."),
    ("jsclient.subscription.dropped", _Kind.TOTAL, "{message}", lambda: _per_subscription(lambda s: s.dropped),
     "Messages a subscription dropped over its pending limits (a slow consumer)."),
    ("jsclient.subscription.pending.messages", _Kind.LEVEL, "{message}",
     lambda: _per_subscription(lambda s: s.pending_msgs), "Messages waiting in a subscription's queue."),
    ("jsclient.subscription.pending.bytes", _Kind.LEVEL, "By", lambda: _per_subscription(lambda s: s.pending_bytes),
     "Payload bytes waiting in a subscription's queue."),
    ("jsclient.jetstream.publish_async.in_flight", _Kind.LEVEL, "{message}", lambda: _in_flight(),
     "Async JetStream publishes awaiting their acks (the publish_async window in use)."),
)


def install(patches: Patches, tel: Telemetry) -> None:
    meter = tel.meter
    listener = _Listener(meter)
    for name, kind, unit, read, description in _OBSERVED:
        create = meter.create_observable_counter if kind is _Kind.TOTAL else meter.create_observable_up_down_counter
        create(name, callbacks=[_callback(meter, read)], unit=unit, description=description)
    patches.replace(observe, "listener", listener)


def _callback(meter: Meter, read: Read) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """A callback that reads while ``meter``'s instrumentation is on, and gives nothing once it is off.

    The SDK keeps an instrument's first callbacks for as long as its meter lives (instrumenting again with
    the same provider gets the same instruments back), so it asks, at each collection, whether the listener
    installed now is the one made with its meter.
    """

    def callback(options: CallbackOptions) -> Iterable[Observation]:
        current = observe.listener
        if not isinstance(current, _Listener) or current.meter is not meter:
            return ()
        try:
            return read()
        except Exception:  # a connection closing under the read, say: this collection goes without
            log.debug("jsclient.instrumentation: a metric callback failed", exc_info=True)
            return ()

    return callback


def _traffic(received: str, sent: str) -> list[Observation]:
    out = []
    for conn in live_connections():
        stats = conn.stats()
        cid = client_id(conn)
        out.append(Observation(stats[received], {CLIENT_ID: cid, DIRECTION: Direction.RECEIVE.value}))
        out.append(Observation(stats[sent], {CLIENT_ID: cid, DIRECTION: Direction.TRANSMIT.value}))
    return out


def _reconnects() -> list[Observation]:
    return [Observation(conn.reconnects, {CLIENT_ID: client_id(conn)}) for conn in live_connections()]


def _per_subscription(value: Callable[[Subscription], int]) -> list[Observation]:
    out = []
    for conn in live_connections():
        cid = client_id(conn)
        for sub in conn.subscriptions:
            attrs: dict[str, Any] = {CLIENT_ID: cid, TEMPLATE: sub.subject, SID: sub.sid}
            if sub.queue:
                attrs[GROUP] = sub.queue
            out.append(Observation(value(sub), attrs))
    return out


def _in_flight() -> list[Observation]:
    by_conn: dict[Connection, int] = {}
    for conn, pending in publish_async_in_flight():
        if not conn.is_closed:
            by_conn[conn] = by_conn.get(conn, 0) + pending
    return [Observation(n, {CLIENT_ID: client_id(conn)}) for conn, n in by_conn.items()]
