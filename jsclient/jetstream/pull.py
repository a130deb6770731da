"""Pull subscriptions (ADR-13): fetch and continuous consumption.

Threads: everything here runs on the user's thread except two hooks that
only hand work over: the reconnect hook (the reconnect thread sets a flag
and wakes the taker) and the silence alarm (watchdog thread, interrupts the
taker).  Heartbeats are queued like everything else (the taker skips them)
and the watchdog counts them: the reader runs no hook here.  How requests,
statuses, priority groups and the consumer's deletion work:
docs/guides/internals.rst, "Pull subscriptions".
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
from msgspec import UNSET

from ..checks import seconds, whole
from ..deprecation import renamed_keywords
from ..errors import (
    ConnectionClosedError,
    ConsumerNotFoundError,
    Error,
    HeartbeatsMissedError,
    InvalidArgumentError,
    SubscriptionClosedError,
)
from ..message import Msg
from ..observe import ConsumerKind
from ..protocol import check_subscribe_subject
from ..timeouts import DEFAULT, Timeout, answer_limit
from . import api, features
from .api import AckPolicy, ConsumerConfig, PriorityPolicy
from .bind import Bound, check_bound_consumer, check_names, creation_config, find_consumer, is_set, stream_of
from .channel import END, MESSAGE, TIMED_OUT, WARNING, WOKEN, Channel, Wake
from .manager import CONSUME, FETCH, MessageManager
from .status import Kind

if TYPE_CHECKING:
    from ..connection import Connection
    from ..core.iface import DeliveryPort
    from .context import JetStream

#: The header with which the server names the pinned client of a group (ADR-42).
PIN_HEADER = "Nats-Pin-Id"
#: ADR-37: a request bounded by bytes asks for this many messages (0 would mean one).
BYTES_BATCH = 1_000_000
#: ``expires`` of a waiting request is the caller's remaining time minus this.
EXPIRES_MARGIN = 0.1
_PUSH_FIELDS = ("deliver_subject", "deliver_group", "flow_control", "idle_heartbeat")


class Ended(enum.Enum):
    """How taking the messages of one fetch's pull request ended."""

    FULL = "full"  # the batch is full
    DONE = "done"  # the request ended, nothing wrong (no messages, expired, ...)
    TIMEOUT = "timeout"  # the caller's time is up
    RECONNECTED = "reconnected"  # the request died with the old connection; the caller decides
    WRONG_PIN = "wrong pin"  # refused for a stale pin id (423), now forgotten: ask again
    ERROR = "error"  # an error ended it after messages came; the next fetch raises it


class Asked(NamedTuple):
    """What one pull request of a :class:`MessageStream` asked for."""

    msgs: int
    bytes: int


def check_pull(
    max_messages: int, name: str, limit: float, max_bytes: int | None, heartbeat: float | None
) -> tuple[float, float | None]:
    """Check a pull's options; ``limit`` is the timeout or expires (``name``) it waits."""
    whole("max_messages", max_messages)
    limit = seconds(name, limit)
    if max_bytes is not None:
        whole("max_bytes", max_bytes)
    if heartbeat is not None:
        heartbeat = check_heartbeat(heartbeat, limit, name)
    return limit, heartbeat


def check_heartbeat(heartbeat: Any, limit: float, name: str) -> float:
    """A pull's idle heartbeat: seconds, under half the ``name`` (``limit``), so one can come before it ends."""
    beat = seconds("heartbeat", heartbeat)
    if beat >= limit / 2:
        raise InvalidArgumentError(f"heartbeat ({beat} s) must be less than half the {name} ({limit} s)")
    return beat


class PullInbox:
    """A pull subscription's wildcard inbox (``<inbox>.*``): its delivery port and message manager, and the
    pull requests it sends, a fresh token each, with the group membership they carry (ADR-42).

    Shared by :meth:`PullSubscription.fetch` and a :class:`MessageStream`, on
    one taking thread at a time; the reconnect thread only runs :meth:`on_reconnect`.
    """

    def __init__(self, conn: Connection, next_subject: str, group: dict[str, Any] | None) -> None:
        self.conn = conn
        self.next_subject = next_subject
        #: Priority-group fields sent with every pull (group, min_pending, min_ack_pending, priority), or None.
        self.group = group
        #: The pin id the server gave (pinned_client groups), sent while it holds.
        self.pin_id: str | None = None
        self.prefix = conn.new_inbox()
        self._tokens = itertools.count(1)
        self.mm = MessageManager(conn.core)
        self.port: DeliveryPort = conn.subscribe(
            self.prefix + ".*", pending_msgs_limit=1 << 24, pending_bytes_limit=1 << 40
        )
        #: The port judged by the FETCH table; a MessageStream judges by CONSUME (:meth:`consuming`).
        self.channel = Channel(self.port, self.mm, FETCH)
        #: Set by the reconnect thread, cleared by the taker: the outstanding requests are gone.
        self.reconnected = False

    def pull(self, batch: int, *, expires: float | None, no_wait: bool, max_bytes: int | None,
             heartbeat: float | None) -> str:
        """Send one pull request; returns its token."""
        token = str(next(self._tokens))
        body: dict[str, Any] = {"batch": batch}
        if no_wait:
            body["no_wait"] = True
        if expires is not None:
            body["expires"] = int(expires * 1e9)
        if max_bytes is not None:
            body["max_bytes"] = max_bytes
        if heartbeat is not None:
            body["idle_heartbeat"] = int(heartbeat * 1e9)
        if self.group is not None:
            body.update(self.group)
            if self.pin_id is not None:
                body["id"] = self.pin_id
        self.conn.core.publish_message(
            self.next_subject, msgspec.json.encode(body), reply=f"{self.prefix}.{token}", send_now=True
        )
        return token

    def note_pin(self, msg: Msg) -> None:
        """A message for a group member: the server names the pinned client with it (ADR-42)."""
        if msg.header is not None and b"Nats-Pin-Id" in msg.header:
            pin = msg.headers.get(PIN_HEADER)
            if pin:
                self.pin_id = pin

    def refused_pin(self) -> bool:
        """The request the last status ended was refused for a stale pin id (423): forget it, ask again."""
        if self.mm.status.kind is Kind.WRONG_PIN:
            self.pin_id = None
            return True
        return False

    def token_of(self, msg: Msg) -> str:
        return msg.subject[len(self.prefix) + 1 :] if msg.subject.startswith(self.prefix) else ""

    def on_reconnect(self) -> None:
        """Reconnect thread: outstanding pull requests died with the old connection."""
        self.reconnected = True
        self.channel.wake(Wake.RECONNECTED)

    def take_ready(self, batch: int) -> list[Msg]:
        """Messages already queued (late arrivals of an earlier fetch); stale statuses skipped."""
        out: list[Msg] = []
        channel = self.channel
        while len(out) < batch and (step := channel.ready()) is not None:
            if step.verdict is MESSAGE:
                assert step.msg is not None
                if self.group is not None:
                    self.note_pin(step.msg)
                out.append(step.msg)
            elif step.verdict is WOKEN:
                break
            else:
                self.refused_pin()
        return out

    def consuming(self) -> Channel:
        """The port judged by the CONSUME table, for a :class:`MessageStream`."""
        return Channel(self.port, self.mm, CONSUME)


class PullSubscription(Bound):
    """Fetch batches, or iterate with :meth:`messages`, from a pull consumer.

    Made by ``js.pull_subscribe(...)``.  Meant for one consuming thread at a
    time: use one per thread (they may share a durable consumer).

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow (a bad ``timeout``, say); raised before anything
            is sent.
        ConnectionClosedError: The connection is closed (or, making the subscription, draining).
    """

    def __init__(
        self, js: JetStream, stream: str, consumer: str, subject: str | None, *, created: bool,
        group: dict[str, Any] | None = None,
    ) -> None:
        """Subscribe a fresh inbox for the consumer's messages; ``js.pull_subscribe`` makes these.

        Args:
            js: The context whose requests it makes.
            stream: The consumer's stream.
            consumer: The consumer's name.
            subject: The subject it was made for, or None.
            created: Whether the library created the consumer for it; :meth:`unsubscribe` then deletes it.
            group: The priority-group fields every pull carries (ADR-42), or None.
        """
        super().__init__(js, stream, subject, consumer)
        self._delete_on_close = created
        self._serials = itertools.count(1)
        self._inbox = PullInbox(self._conn, f"{js.prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}", group)
        self._deferred: Error | None = None
        self._hook_key = self._conn.core.add_reconnect_hook(self._inbox.on_reconnect)

    def __repr__(self) -> str:
        return f"<PullSubscription stream={self.stream!r} consumer={self.consumer!r}>"

    @property
    def pin_id(self) -> str | None:
        """The pin id the server gave this subscription (pinned_client groups), sent while it holds."""
        return self._inbox.pin_id

    def take_ready(self, max_messages: int) -> list[Msg]:
        """Internal (not part of the public API): up to ``max_messages`` messages that already arrived, at once.

        Args:
            max_messages: The most messages to take.

        Returns:
            The messages already queued (``[]`` when none).

        Raises:
            SubscriptionClosedError: The subscription has ended and a status was the last thing queued.
        """
        return self._inbox.take_ready(max_messages)

    # -- fetch ------------------------------------------------------------------
    @renamed_keywords(batch="max_messages")
    def fetch(
        self,
        max_messages: int = 1,
        timeout: float | None = 5.0,
        max_bytes: int | None = None,
        heartbeat: float | None = None,
        *,
        no_wait: bool = False,
    ) -> list[Msg]:
        """Up to ``max_messages`` messages within ``timeout``; ``[]`` when none came (not an error).

        Messages that arrived after an earlier fetch returned come first.  An
        error status that ends a request after messages came is raised by the
        next fetch, so none of them is lost.

        Args:
            max_messages: The most messages to return.
            timeout: Seconds to wait; ``None``, no limit; ``0`` is refused (a pull needs the server's answer).
            max_bytes: The most bytes to return, counted as the server counts them (subject, headers and
                body); the request ends before a message that would pass it.
            heartbeat: Seconds between the server's heartbeats while the request waits, under half the
                ``timeout``: a server silent for two of them raises HeartbeatsMissedError instead of being
                waited out.  Left out, none.
            no_wait: Only what the consumer has now, without waiting for more.

        Returns:
            The messages in order, perhaps fewer than asked for (``[]`` when none came in time).

        Raises:
            InvalidArgumentError: A bad ``max_messages``, ``timeout``, ``max_bytes`` or ``heartbeat``, raised
                before anything is sent.
            SubscriptionClosedError: The subscription was drained or unsubscribed, and nothing it received is left.
            HeartbeatsMissedError: ``heartbeat`` was given, and neither a message nor a heartbeat came.
            JetStreamStatusError: The server ended a request with an error status: NoRespondersStatusError (no
                such consumer), ConsumerDeletedError, MaxWaitingExceededError, or a request over the consumer's
                limits (MaxRequestBatchExceededError and the like).
        """
        timeout, heartbeat = check_pull(max_messages, "timeout", answer_limit(timeout), max_bytes, heartbeat)
        inbox = self._inbox
        deadline = time.monotonic() + timeout
        out = inbox.take_ready(max_messages)
        if inbox.port.is_closed:  # drained (or unsubscribed): what had arrived, then the end
            if out:
                return out
            self._delete_created()
            raise SubscriptionClosedError(f"pull subscription on consumer {self.consumer!r} is closed")
        if self._deferred is not None and not out:
            error, self._deferred = self._deferred, None
            raise error
        if len(out) >= max_messages:
            return out
        serial = next(self._serials)
        if heartbeat is not None:
            channel = inbox.channel
            inbox.mm.watch(
                channel.port, heartbeat, 2 * heartbeat, lambda: channel.wake(Wake.SILENT, serial), ConsumerKind.PULL
            )
        try:
            # No-wait first: what is available now, without waiting.
            token = inbox.pull(max_messages - len(out), expires=None, no_wait=True, max_bytes=max_bytes, heartbeat=None)
            # A no-wait answer comes at once; a silent server counts as missed heartbeats here too.
            ended = self._collect(out, max_messages, token, deadline, serial)
            if out or ended is Ended.ERROR or no_wait:
                return self._finish(out)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= EXPIRES_MARGIN:
                    return out
                token = inbox.pull(
                    max_messages - len(out), expires=remaining - EXPIRES_MARGIN, no_wait=False, max_bytes=max_bytes,
                    heartbeat=heartbeat,
                )
                if self._collect(out, max_messages, token, deadline, serial) is not Ended.WRONG_PIN or out:
                    return self._finish(out)
        finally:
            inbox.mm.unwatch()

    def _finish(self, out: list[Msg]) -> list[Msg]:
        if not out and self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        return out

    def _collect(self, out: list[Msg], max_messages: int, token: str, deadline: float, serial: int) -> Ended:
        """Take messages for the request ``token`` until it ends (:data:`~.manager.FETCH`); how it ended."""
        inbox = self._inbox
        take = inbox.channel.take
        grouped = inbox.group is not None
        while len(out) < max_messages:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Ended.TIMEOUT
            step = take(remaining)
            if isinstance(step, Msg):
                if grouped:
                    inbox.note_pin(step)
                out.append(step)
                continue
            verdict = step.verdict
            if verdict is TIMED_OUT:
                continue
            if verdict is WOKEN:
                if step.wake is Wake.SILENT and step.serial == serial:
                    missed = HeartbeatsMissedError(
                        f"no heartbeat or message for {inbox.mm.alarm:g} s on pull consumer {self.consumer!r}"
                    )
                    return self._ended_by(missed, out)
                if inbox.reconnected:
                    inbox.reconnected = False
                    return Ended.RECONNECTED
                continue
            assert step.msg is not None
            mine = inbox.token_of(step.msg) == token
            if verdict is END and inbox.refused_pin() and mine:
                return Ended.WRONG_PIN
            if not mine:
                continue  # the end of an older request
            if verdict is END:
                return Ended.DONE
            assert step.error is not None
            return self._ended_by(step.error, out)
        return Ended.FULL

    def _ended_by(self, error: Error, out: list[Msg]) -> Ended:
        """An error ends the fetch: raised now when nothing came, else by the next fetch (nothing is lost)."""
        if out:
            self._deferred = error
            return Ended.ERROR
        raise error

    # -- continuous consumption -----------------------------------------------------
    @renamed_keywords(batch="max_messages")
    def messages(
        self,
        max_messages: int = 500,
        expires: float = 30.0,
        max_bytes: int | None = None,
        heartbeat: float | None = None,
        threshold: float = 0.5,
        *,
        buffer_bytes: int | None = None,
        warnings_end: bool = False,
    ) -> MessageStream:
        """A blocking iterator that keeps pull requests outstanding; ``stop()`` ends it.

        Args:
            max_messages: How many messages to keep asked for.
            expires: Seconds each pull request lives on the server; not a wait of this call.
            max_bytes: The most bytes each pull request may bring; not with ``buffer_bytes``.
            heartbeat: Seconds between the server's heartbeats while a request waits, under half of
                ``expires``.  Left out, the server sends none, and requests silent for ``expires`` + 1 s are
                sent again.
            threshold: Ask for more when what is still to come falls below this share of what is kept asked
                for (above 0, at most 1).
            buffer_bytes: ADR-37's max_bytes of a consume: keep that many bytes asked for instead of
                ``max_messages`` messages, asking again below ``threshold`` of it.
            warnings_end: A passing trouble (no responders: the consumer may be gone; too many waiting
                requests) ends the iteration with its error instead of being reported and asked again.

        Returns:
            The iterator, which raises the error that ends consumption (see :class:`MessageStream`).

        Raises:
            InvalidArgumentError: A bad value or combination, raised before anything is sent.
        """
        expires, heartbeat = check_pull(max_messages, "expires", expires, max_bytes, heartbeat)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise InvalidArgumentError(f"threshold must be in (0, 1], not {threshold!r}")
        if buffer_bytes is not None:
            whole("buffer_bytes", buffer_bytes)
            if max_bytes is not None:
                raise InvalidArgumentError("buffer_bytes and max_bytes are mutually exclusive")
        return MessageStream(
            self._inbox, self.consumer, max_messages, expires, max_bytes, heartbeat, float(threshold), buffer_bytes,
            warnings_end=warnings_end,
        )

    # -- ending ----------------------------------------------------------------------
    @property
    def is_closed(self) -> bool:
        return self._inbox.port.is_closed

    def unsubscribe(self) -> None:
        """Stop, and delete the consumer if this subscription created it.

        Messages received and not yet taken are dropped; unacknowledged, they come again after ack_wait.

        Raises:
            TimeoutError: Deleting the consumer got no answer within the context's timeout.
            ConnectionClosedError: The connection is closed, so the consumer created here was not deleted.
            JetStreamAPIError: The server refused to delete that consumer.
        """
        self._conn.core.remove_reconnect_hook(self._hook_key)
        self._inbox.port.unsubscribe()
        self._delete_created()

    def drain(self, timeout: Timeout = DEFAULT) -> None:
        """Ask for no more: what already arrived is still handed out by ``fetch`` (and iteration), then they
        raise :class:`~jsclient.SubscriptionClosedError`.

        It does not wait for that: the thread that fetches is most often the
        one that drains.  Messages the server sent after the drain come again
        after ``ack_wait``.  A consumer this subscription created is deleted
        once the last message is handed out (or on :meth:`unsubscribe`).

        Args:
            timeout: Seconds to wait for the server to confirm it has sent everything it will (one round
                trip); left out, the connection's ``drain_timeout`` option; ``None``, no limit; ``0`` is refused.

        Raises:
            TimeoutError: The server did not confirm within ``timeout``, or deleting the consumer got no answer
                within the context's timeout.
            JetStreamAPIError: The server refused to delete the consumer created for this subscription.
        """
        timeout = answer_limit(timeout, self._conn.options.drain_timeout)
        self._conn.core.remove_reconnect_hook(self._hook_key)
        self._inbox.port.stop_receiving(timeout)
        if not self._inbox.port.pending_msgs:
            self._delete_created()

    def _delete_created(self) -> None:
        if self._delete_on_close:
            self._delete_on_close = False
            with contextlib.suppress(ConsumerNotFoundError):
                self._js.delete_consumer(self.stream, self.consumer)


class MessageStream:
    """Iterator of :meth:`PullSubscription.messages`; ``stop()`` from any thread ends it.

    Each status gets its :data:`~.manager.CONSUME` verdict: an ended request
    lowers the count of messages asked for and is asked again; a passing
    trouble (no room, no responders) is reported and asked again after a
    pause; an error ends the iteration.  Silence for twice the heartbeat (or
    ``expires`` + 1 s without heartbeats) means the requests were lost: the
    watchdog's alarm has them forgotten and asked again.  Iteration ends
    quietly once stopped, or when the subscription or the connection ends.

    Raises:
        JetStreamStatusError: While iterating: an error status ended consumption, such as
            ConsumerDeletedError, ConsumerIsPushBasedError or a request over the consumer's limits; with
            ``warnings_end``, a passing trouble too (NoRespondersStatusError, MaxWaitingExceededError).
    """

    def __init__(
        self,
        inbox: PullInbox,
        consumer: str,
        batch: int,
        expires: float,
        max_bytes: int | None,
        heartbeat: float | None,
        threshold: float,
        buffer_bytes: int | None = None,
        *,
        warnings_end: bool = False,
    ) -> None:
        """Keep the settings; iterating sends the requests.  :meth:`PullSubscription.messages` makes these.

        Args:
            inbox: The subscription's inbox, whose messages it takes.
            consumer: The consumer's name, for error messages.
            batch: How many messages to keep asked for (with ``buffer_bytes``, each request asks for many).
            expires: Seconds each pull request lives on the server.
            max_bytes: The most bytes each request may bring, or None.
            heartbeat: Seconds between the server's heartbeats, or None for none.
            threshold: The share of what is kept asked for below which more is asked for.
            buffer_bytes: Bytes to keep asked for instead of messages, or None.
            warnings_end: Whether a passing trouble ends the iteration.

        Raises:
            : Nothing; it only keeps what it is given.
        """
        self._inbox = inbox
        self._consumer = consumer
        self.batch = BYTES_BATCH if buffer_bytes is not None else batch
        self.expires = expires
        self.max_bytes = max_bytes
        self.heartbeat = heartbeat
        self.buffer_bytes = buffer_bytes
        self._refill = max(1, int(self.batch * threshold))
        self._refill_bytes = max(1, int((buffer_bytes or 0) * threshold))
        self._pending = 0  # messages requested and neither delivered nor expired
        self._pending_bytes = 0  # with buffer_bytes: bytes requested and neither delivered nor expired
        self._stopped = threading.Event()
        self._tokens: dict[str, Asked] = {}  # outstanding request -> what it asked for
        self._watching = False  # this stream's iteration has the subscription's heartbeat watch
        self.warnings_end = warnings_end

    def stop(self) -> None:
        """End the iteration; the heartbeat watch ends now, even if nobody iterates again.

        Any thread may call it; it does not wait for the iterating thread.

        Raises:
            : Nothing; stopping again is harmless.
        """
        self._stopped.set()
        if self._watching:
            self._watching = False
            self._inbox.mm.unwatch()
        self._inbox.channel.wake(Wake.STOPPED)

    def __enter__(self) -> MessageStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _low(self) -> bool:
        """Below the threshold: time to ask for more (ADR-37's low watermark)."""
        if self.buffer_bytes is not None:
            return self._pending_bytes < self._refill_bytes
        return self._pending < self._refill

    def _request(self) -> None:
        want = self.batch - self._pending
        want_bytes = self.max_bytes
        if self.buffer_bytes is not None:
            want, want_bytes = self.batch, self.buffer_bytes - self._pending_bytes
            if want_bytes <= 0:
                return
        if want <= 0:
            return
        token = self._inbox.pull(
            want, expires=self.expires, no_wait=False, max_bytes=want_bytes, heartbeat=self.heartbeat
        )
        self._tokens[token] = Asked(want, want_bytes or 0)
        self._pending += want
        if self.buffer_bytes is not None:
            self._pending_bytes += want_bytes or 0

    def _forget_requests(self) -> None:
        self._pending = self._pending_bytes = 0
        self._tokens.clear()

    def _less(self, msgs: int, size: int) -> None:
        self._pending = max(0, self._pending - msgs)
        self._pending_bytes = max(0, self._pending_bytes - size)

    def _silent(self) -> None:
        """Watchdog thread: nothing arrived for the alarm time."""
        if self._stopped.is_set():
            return
        inbox = self._inbox
        if self.heartbeat:
            inbox.conn.core.report_error(
                HeartbeatsMissedError(f"pull consumer {self._consumer!r}: heartbeats missed; pulling again")
            )
        inbox.mm.rearm()
        inbox.channel.wake(Wake.SILENT)

    def __iter__(self) -> Iterator[Msg]:
        inbox = self._inbox
        channel = inbox.consuming()
        take = channel.take
        mm = inbox.mm
        silence = 2 * self.heartbeat if self.heartbeat else self.expires + 1.0
        mm.watch(channel.port, silence / 2, silence, self._silent, ConsumerKind.PULL)
        self._watching = True
        try:
            while not self._stopped.is_set():
                if self._low():
                    try:
                        self._request()
                    except ConnectionClosedError:
                        return
                try:
                    step = take(None)
                except (SubscriptionClosedError, ConnectionClosedError):
                    return
                if isinstance(step, Msg):
                    if self.buffer_bytes is None:
                        if self._pending > 0:
                            self._pending -= 1
                    else:
                        self._less(1, message_size(step))
                    if inbox.group is not None:
                        inbox.note_pin(step)
                    yield step
                    continue
                verdict = step.verdict
                if verdict is WOKEN:
                    if step.wake is Wake.SILENT or inbox.reconnected:
                        inbox.reconnected = False
                        self._forget_requests()  # lost requests (or a silent server): ask again
                    continue
                assert step.msg is not None
                wrong_pin = verdict is END and inbox.refused_pin()
                asked = self._tokens.pop(inbox.token_of(step.msg), None)
                if asked is None:
                    continue  # a status for a request already forgotten
                status = step.status
                if verdict is END:
                    left = asked.msgs if wrong_pin or status.pending_msgs is None else status.pending_msgs
                    size = asked.bytes if wrong_pin or status.pending_bytes is None else status.pending_bytes
                    self._less(left, size)
                    continue
                assert step.error is not None
                if verdict is WARNING and not self.warnings_end:
                    self._less(asked.msgs, asked.bytes)
                    inbox.conn.core.report_error(step.error)
                    self._stopped.wait(min(self.expires, 0.5))
                    continue
                raise step.error
        finally:
            if self._watching:
                self._watching = False
                mm.unwatch()


def message_size(msg: Msg) -> int:
    """A message's size as the server counts it against a pull's max_bytes (ADR-37)."""
    return len(msg.subject) + len(msg.reply or "") + len(msg.header or b"") + len(msg.data)


def pull_subscribe(
    js: JetStream,
    subject: str | None,
    *,
    durable: str | None = None,
    stream: str | None = None,
    consumer: str | None = None,
    config: ConsumerConfig | None = None,
    group: str | None = None,
    min_pending: int | None = None,
    min_ack_pending: int | None = None,
    priority: int | None = None,
) -> PullSubscription:
    """Bind to or create a pull consumer (ADR-13), checking everything before any request."""
    membership = _membership(group, min_pending, min_ack_pending, priority)
    if membership is not None:
        js.require(features.PRIORITY_GROUPS)
    if config is not None and not isinstance(config, ConsumerConfig):
        raise InvalidArgumentError(f"config must be a ConsumerConfig, not {type(config).__name__}")
    user = config if config is not None else ConsumerConfig()
    if not subject and not stream:
        raise InvalidArgumentError("pull_subscribe needs a subject or a stream")
    if subject is not None:
        check_subscribe_subject(subject)
    for field in _PUSH_FIELDS:
        if is_set(getattr(user, field)):
            raise InvalidArgumentError(f"{field} is a push consumer option; it cannot be used with a pull subscription")
    if is_set(user.ack_policy) and user.ack_policy in (AckPolicy.NONE, AckPolicy.ALL):
        raise InvalidArgumentError(f"a pull subscription needs ack_policy explicit, not {user.ack_policy!r}")
    durable = check_names(durable, consumer, user)
    api.validate_consumer_config(user)
    stream_name = stream_of(js, stream, subject)
    name = consumer or durable
    info = find_consumer(js, stream_name, name, must_exist=bool(consumer))
    if info is not None:
        check_bound_consumer(info, subject, None, user, pull=True)
        _check_membership(info.config, membership)
        return PullSubscription(js, stream_name, info.name, subject, created=False, group=membership)
    fields: dict[str, Any] = {}
    if not name and user.inactive_threshold is UNSET:
        fields["inactive_threshold"] = 300.0  # an ephemeral pull consumer has no interest to expire on
    cfg = creation_config(user, subject, name, **fields)
    _check_membership(cfg, membership)
    info = js.add_consumer(stream_name, cfg)
    return PullSubscription(js, stream_name, info.name, subject, created=not name, group=membership)


def _membership(
    group: str | None, min_pending: int | None, min_ack_pending: int | None, priority: int | None
) -> dict[str, Any] | None:
    """The priority-group fields of every pull (ADR-42), checked; None for a plain subscription."""
    if group is None:
        for name, value in (("min_pending", min_pending), ("min_ack_pending", min_ack_pending),
                            ("priority", priority)):
            if value is not None:
                raise InvalidArgumentError(f"{name} needs group (a priority group of the consumer)")
        return None
    fields: dict[str, Any] = {"group": api.check_group(group)}
    if min_pending is not None:
        fields["min_pending"] = whole("min_pending", min_pending)
    if min_ack_pending is not None:
        fields["min_ack_pending"] = whole("min_ack_pending", min_ack_pending)
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
            raise InvalidArgumentError(f"priority must be an int from 0 to 9, not {priority!r}")
        fields["priority"] = priority
    return fields


def _check_membership(cfg: ConsumerConfig, membership: dict[str, Any] | None) -> None:
    """Refuse, before the first pull, a membership the consumer's priority policy cannot serve."""
    groups = cfg.priority_groups if isinstance(cfg.priority_groups, list) else []
    policy = cfg.priority_policy if isinstance(cfg.priority_policy, str) else PriorityPolicy.NONE.value
    if membership is None:
        if groups:
            raise InvalidArgumentError(
                f"the consumer has priority groups {groups}: every pull needs one (pass group=...)"
            )
        return
    if membership["group"] not in groups:
        raise InvalidArgumentError(f"group {membership['group']!r} is not one of the consumer's {groups}")
    if ("min_pending" in membership or "min_ack_pending" in membership) and policy != PriorityPolicy.OVERFLOW:
        raise InvalidArgumentError(f"min_pending and min_ack_pending need priority_policy overflow, not {policy}")
    if "priority" in membership and policy != PriorityPolicy.PRIORITIZED:
        raise InvalidArgumentError(f"priority needs priority_policy prioritized, not {policy}")
