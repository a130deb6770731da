"""Ordered consumer (ADR-17): an ephemeral push consumer that heals itself.

Threads and state:

* The connection's **reader thread** runs :meth:`OrderedSubscription._on_receive`
  for the current core subscription (a hook bound to one generation): under
  ``_lock`` it hands the message to the :class:`~.manager.StrictOrder`
  manager, which accepts only the next consumer sequence; on a gap the
  message is dropped, ``_reset_from`` set and the taker interrupted.  A
  message accepted there may still be dropped by the core subscription over
  its pending limits; the core queues a gap marker in its place.
* The **taking thread** (``next_msg``, iteration, or this subscription's own
  callback thread) carries out the :data:`~.manager.ORDERED` verdict of each
  queued message.  When a reset is flagged and the queue is empty, or at
  once when it passes a gap marker (the channel's :data:`~.channel.DROPPED`
  step), it abandons the inbox (:meth:`OrderedSubscription._abandon`: what
  is still queued there is discarded, the next consumer sends it again),
  then has the reset done and waits for it no longer than its own deadline.
* A **reset thread** (``jsclient-ordered-reset``, one at a time) performs
  it: unsubscribe the old inbox, delete the old consumer best-effort, create
  a new one at the stream sequence of the last message handed out + 1, with
  tenacity backoff while JetStream is unavailable.  It may take longer than any one
  ``next_msg`` (a paused or unreachable server); later calls wait for the
  same reset, and an error that ends it (a deleted stream) is raised once by
  the next ``next_msg``.
* The **watchdog thread** flags a reset when heartbeats stop (the consumer
  may be gone).  A reconnect is treated the same way.

``_lock`` guards the generation, the reset flag and the manager's accepted
sequences (the manager's flow-control lock may be taken under it);
``last_stream_seq`` is the taker's, read by the reset thread it starts;
``_reset_cond`` (its own lock, never held with ``_lock``) the reset thread
and the error it left.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from .. import observe
from ..backoff import Backoff
from ..checks import seconds
from ..errors import (
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    JetStreamAPIError,
    JetStreamNotEnabledError,
    JetStreamUnavailableError,
    SubscriptionClosedError,
    TimeoutError,
)
from ..message import ACK_DISABLED, Msg
from ..observe import ConsumerKind
from ..protocol import check_subscribe_subject
from ..subscription import Gaps, UntilClosed
from ..timeouts import DEFAULT, Timeout, answer_limit, take_limit
from . import api
from .api import AckPolicy, ConsumerConfig, DeliverPolicy
from .bind import Bound, stream_of
from .channel import DROPPED, RESET, TIMED_OUT, WOKEN, Channel, Wake
from .manager import ORDERED, StrictOrder

if TYPE_CHECKING:
    from .context import JetStream

DEFAULT_IDLE_HEARTBEAT = 5.0
ACK_WAIT = 22 * 3600.0
#: How long a reset keeps retrying while JetStream is unavailable.
RESET_RETRY = Backoff(initial=0.1, maximum=2.0, within=60.0)
_RETRIABLE = (JetStreamUnavailableError, JetStreamNotEnabledError, TimeoutError)


def ordered_config(config: ConsumerConfig | None, idle_heartbeat: float | None) -> ConsumerConfig:
    """ADR-17 checks and defaults; each rejection names the option."""
    cfg = config if config is not None else ConsumerConfig()
    if not isinstance(cfg, ConsumerConfig):
        raise InvalidArgumentError(f"config must be a ConsumerConfig, not {type(cfg).__name__}")
    for field in ("durable_name", "deliver_subject", "deliver_group", "name"):
        if getattr(cfg, field) is not UNSET:
            raise InvalidArgumentError(f"an ordered consumer cannot set {field}")
    for field in ("max_waiting", "max_batch", "max_expires"):
        if getattr(cfg, field) is not UNSET:
            raise InvalidArgumentError(f"{field} is a pull consumer option; an ordered consumer is push")
    if cfg.ack_policy is not UNSET and cfg.ack_policy != AckPolicy.NONE:
        raise InvalidArgumentError(f"an ordered consumer needs ack_policy none, not {cfg.ack_policy!r}")
    if cfg.max_deliver is not UNSET and cfg.max_deliver != 1:
        raise InvalidArgumentError(f"an ordered consumer needs max_deliver 1, not {cfg.max_deliver!r}")
    if cfg.flow_control is not UNSET and cfg.flow_control is not True:
        raise InvalidArgumentError("an ordered consumer needs flow_control true")
    if cfg.mem_storage is not UNSET and cfg.mem_storage is not True:
        raise InvalidArgumentError("an ordered consumer needs mem_storage true")
    if cfg.num_replicas is not UNSET:
        raise InvalidArgumentError("an ordered consumer cannot set num_replicas (it is always 1)")
    hb: Any = cfg.idle_heartbeat
    if idle_heartbeat is not None:
        hb = seconds("idle_heartbeat", idle_heartbeat)
    fields: dict[str, Any] = {
        "ack_policy": AckPolicy.NONE.value,
        "max_deliver": 1,
        "flow_control": True,
        "mem_storage": True,
        "num_replicas": 1,
        "ack_wait": ACK_WAIT,
        "idle_heartbeat": hb if hb is not UNSET else DEFAULT_IDLE_HEARTBEAT,
    }
    if cfg.inactive_threshold is UNSET:
        fields["inactive_threshold"] = 300.0  # a consumer left behind by a crash goes away
    return api.validate_consumer_config(api.replace(cfg, **fields))


def delete_quietly(js: JetStream, stream: str, consumer: str) -> None:
    """Best effort, without waiting (a reset must not spend its caller's deadline): the old consumer is
    ephemeral anyway, and one the server never hears of ends after its inactive threshold."""
    with contextlib.suppress(Error):
        js.conn.request_async(f"{js.prefix}.CONSUMER.DELETE.{stream}.{consumer}", b"", timeout=5)


def resume_after(stream_seq: int) -> dict[str, Any]:
    """The start of the next consumer of an ordered reader: the stream sequence after the last one accepted.

    Both ordered readers recreate their consumer this way: the push-based
    :class:`OrderedSubscription` and the pull-based ADR-37
    :class:`~.handles.OrderedConsumer`; both accept messages through one
    :class:`~.manager.StrictOrder`.
    """
    return {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE.value, "opt_start_seq": stream_seq + 1,
            "opt_start_time": UNSET}


class OrderedSubscription(Bound):
    """Messages of a stream (or subject filter) exactly once, in order, despite faults.

    Made by ``js.subscribe(..., ordered=True)``.  Its consumer is recreated
    after the last message handed out on a gap (in the consumer's sequence,
    or where its queue dropped messages over the pending limits), missed
    heartbeats, a deleted consumer or a reconnect (``resets`` counts them).  Iteration ends when the
    subscription or the connection does.

    Every call may raise:
        InvalidArgumentError: An argument its Args do not allow (a bad ``timeout``, say); raised before anything
            is sent.
        ConnectionClosedError: The connection is closed (or, making the subscription, draining).
    """

    def __init__(
        self,
        js: JetStream,
        stream: str,
        subject: str | None,
        config: ConsumerConfig,
        cb: Callable[[Msg], None] | None,
        limits: tuple[int | None, int | None],
    ) -> None:
        """Create the first consumer (and, with ``cb``, the callback thread): the subscription runs.

        Args:
            js: The context whose requests it makes.
            stream: The stream to read.
            subject: The subject filter, or None for the whole stream (or the config's filters).
            config: The consumer configuration, already checked and completed for an ordered consumer.
            cb: Called with each message on the subscription's own thread (``jsclient-ordered``), or None to
                take them with ``next_msg``.
            limits: The core subscription's pending limits (messages, bytes); None takes the connection's.

        Raises:
            TimeoutError: Creating the consumer got no answer, retried for up to a minute.
            JetStreamUnavailableError: JetStream stayed unavailable through a minute of retries
                (JetStreamNotEnabledError when none answered).
            StreamNotFoundError: There is no such stream.
            FeatureNotSupportedError: The configuration needs a newer server than the one connected.
            JetStreamAPIError: Any other refusal to create the consumer.
        """
        super().__init__(js, stream, subject)
        self._base = config
        self._cb = cb
        self._limits = limits
        self._lock = threading.Lock()
        self._generation = 0
        self._channel: Channel | None = None  # the current consumer's inbox, by the ORDERED table
        self._closed = False
        self._draining = False  # under _lock: no reset from here on
        # Reader side: what was accepted into the queue (under _lock); a reset restarts after it.
        self._mm = StrictOrder(self._conn.core, on_gap=self._flag_reset)
        self._reset_from: int | None = None
        # Taker side: what the user has been given.
        self.last_stream_seq = 0
        self.last_consumer_seq = 0
        #: Consumer recreations so far (gaps, drops over the pending limits, lost heartbeats, deleted consumers,
        #: reconnects).
        self.resets = 0
        self.consumer = ""
        self._thread: threading.Thread | None = None
        self._reset_cond = threading.Condition(threading.Lock())
        self._resetter: threading.Thread | None = None  # guarded by _reset_cond
        self._reset_error: BaseException | None = None  # guarded by _reset_cond
        # After a reconnect the consumer may be gone (a restarted server, another node): reset.
        self._hook_key = self._conn.core.add_reconnect_hook(self._on_reconnect)
        self._start()
        if cb is not None:
            self._thread = threading.Thread(target=self._run_callbacks, name="jsclient-ordered", daemon=True)
            self._thread.start()

    def __repr__(self) -> str:
        return (
            f"<OrderedSubscription stream={self.stream!r} consumer={self.consumer!r} "
            f"last_stream_seq={self.last_stream_seq} resets={self.resets}>"
        )

    @property
    def state(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "consumer": self.consumer,
            "last_stream_seq": self.last_stream_seq,
            "last_consumer_seq": self.last_consumer_seq,
            "resets": self.resets,
        }

    # -- creating a consumer -------------------------------------------------------
    def _start(self) -> None:
        """Subscribe a fresh inbox and create a consumer after the last message handed out.

        Not after the last one accepted on arrival: the core may have dropped
        some of those over its pending limits, and the taker discarded any
        still queued when it abandoned the old inbox.
        """
        conn = self._conn
        with self._lock:
            self._generation += 1
            generation = self._generation
            start = self.last_stream_seq  # the taker waits for this reset: it hands out nothing meanwhile
            self._mm.restart()
            self._reset_from = None
        inbox = conn.new_inbox()
        sub = conn.subscribe(inbox, pending_msgs_limit=self._limits[0], pending_bytes_limit=self._limits[1])
        sub.arrival_hook = lambda msg: self._on_receive(msg, generation)
        fields: dict[str, Any] = {"deliver_subject": inbox}
        if self.subject and self._base.filter_subject is UNSET and self._base.filter_subjects is UNSET:
            fields["filter_subject"] = self.subject
        if start:
            fields.update(resume_after(start))
        cfg = api.replace(self._base, **fields)
        try:
            info = self._create(cfg)
        except BaseException:
            sub.unsubscribe()
            raise
        self._channel = Channel(sub, self._mm, ORDERED, gaps=Gaps.SIGNAL)
        self.consumer = info.name
        hb = cfg.idle_heartbeat
        assert isinstance(hb, float)
        self._mm.watch(sub, hb, 3 * hb, lambda: self._request_reset(generation), ConsumerKind.ORDERED_PUSH)

    def _create(self, cfg: ConsumerConfig) -> api.ConsumerInfo:
        for attempt in RESET_RETRY.retrying(on=_RETRIABLE):
            with attempt:
                if self._closed:
                    raise SubscriptionClosedError("ordered subscription closed while recreating its consumer")
                return self._js.add_consumer(self.stream, cfg)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- reader thread ----------------------------------------------------------------
    def _on_receive(self, msg: Msg, generation: int) -> bool:
        """True drops the message: stale generation, heartbeat, or anything after a gap."""
        with self._lock:
            if generation != self._generation or self._reset_from is not None:
                return True
            return self._mm.arrive(msg)

    def _flag_reset(self) -> None:
        """Under _lock: stop accepting; the taker hands out what is queued, then has the consumer recreated."""
        self._reset_from = self._mm.stream_seq
        channel = self._channel
        if channel is not None:
            channel.wake(Wake.RESET)

    def _on_reconnect(self) -> None:
        """Reconnect thread: recreate the consumer from where delivery stands."""
        self._request_reset(self._generation)

    def _request_reset(self, generation: int) -> None:
        """Watchdog thread (missed heartbeats) or reconnect: reset unless already resetting."""
        with self._lock:
            if generation == self._generation and self._reset_from is None and not self._closed \
                    and not self._draining:
                self._flag_reset()

    # -- taking thread ------------------------------------------------------------------
    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next message in stream order; ``timeout`` as for any subscription (None: no limit; 0: queued).

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0``, only a message already queued.

        Returns:
            The next message in stream order (its ack is disabled; an ordered consumer takes none).

        Raises:
            TimeoutError: No message within ``timeout``, perhaps because the consumer is being recreated (a
                later call waits for that to finish).
            Error: The subscription has a callback, which takes the messages.
            SubscriptionClosedError: The subscription was unsubscribed, or drained and nothing is left.
            JetStreamAPIError: Recreating the consumer failed, for example with StreamNotFoundError once the
                stream was deleted; the next call raises it once.
            JetStreamStatusError: The server sent an error status other than a deleted consumer's.
        """
        if self._cb is not None and threading.current_thread() is not self._thread:
            raise Error("next_msg cannot be used on a subscription with a callback")
        timeout = take_limit(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._closed:
                raise SubscriptionClosedError(f"ordered subscription on {self.stream!r} is closed")
            channel = self._channel
            if channel is not None and self._reset_from is not None and not channel.port.pending_msgs:
                self._abandon(channel)  # everything accepted before the reset was flagged is handed out
                channel = None
            if channel is None:
                if self._draining:
                    raise SubscriptionClosedError(f"ordered subscription on {self.stream!r} is drained")
                self._await_reset(deadline, timeout)
                continue
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                got = channel.take(remaining)
            except SubscriptionClosedError:
                if self._closed or self._draining:
                    raise
                continue  # the old inbox after a reset
            if isinstance(got, Msg):
                meta = got.metadata
                self.last_stream_seq = meta.sequence.stream
                self.last_consumer_seq = meta.sequence.consumer
                got.ack_state = ACK_DISABLED
                return got
            verdict = got.verdict
            if verdict is TIMED_OUT:
                raise TimeoutError(f"ordered consumer on {self.stream!r}: no message within {timeout} s")
            if verdict is DROPPED:  # messages were lost here: those queued after them follow a hole
                self._abandon(channel)
            elif verdict is RESET:
                with self._lock:
                    self._flag_reset()
            elif verdict is not WOKEN:  # woken: the reset flagged is done on the next round
                assert got.error is not None
                raise got.error

    def _abandon(self, channel: Channel) -> None:
        """Taking thread: take no more from ``channel``; the consumer is to be recreated after the last message
        handed out.

        Called where the core dropped messages (they were accepted on
        arrival, so no sequence check saw the hole) and when a flagged reset
        finds the queue empty.  What is still queued, or still on its way to
        the queue, is discarded with the inbox: the next consumer sends it
        again.  The reset thread is started after this, so it reads
        ``last_stream_seq`` as this thread left it.
        """
        with self._lock:
            if self._reset_from is None:
                self._reset_from = self.last_stream_seq
            if self._channel is channel:
                self._channel = None
        with contextlib.suppress(Error):
            channel.port.unsubscribe()

    def _await_reset(self, deadline: float | None, timeout: float | None) -> None:
        """Taking thread: have the consumer recreated (in the background) and wait for it until ``deadline``."""
        with self._reset_cond:
            if self._resetter is None and self._reset_error is None:
                self._resetter = threading.Thread(target=self._reset_in_background, name="jsclient-ordered-reset",
                                                  daemon=True)
                self._resetter.start()
            while self._resetter is not None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"ordered consumer on {self.stream!r}: no message within {timeout} s "
                        "(its consumer is being recreated)"
                    )
                self._reset_cond.wait(remaining)
            error, self._reset_error = self._reset_error, None
        if error is not None:
            raise error

    def _reset_in_background(self) -> None:
        """Reset thread: recreate the consumer; leave an error for the taker."""
        error: BaseException | None = None
        try:
            self._reset()
        except BaseException as exc:  # noqa: BLE001 - handed to the taking thread
            error = exc
        with self._reset_cond:
            self._resetter = None
            self._reset_error = error
            self._reset_cond.notify_all()

    def _reset(self) -> None:
        """Recreate the consumer at the last accepted stream sequence + 1 (told to an observer first:
        :mod:`jsclient.observe`; this runs on the reset thread, holding no lock)."""
        listener = observe.listener
        if listener is not None:
            listener.ordered_reset(ConsumerKind.ORDERED_PUSH)
        old, old_consumer = self._channel, self.consumer
        self._channel = None
        self._mm.unwatch()
        if old is not None:
            with contextlib.suppress(Error):
                old.port.unsubscribe()
        if old_consumer:
            self._delete_quietly(old_consumer)
        self._start()
        self.resets += 1

    def _delete_quietly(self, consumer: str) -> None:
        delete_quietly(self._js, self.stream, consumer)

    def __iter__(self) -> Iterator[Msg]:
        return UntilClosed(self.next_msg)

    def _run_callbacks(self) -> None:
        """The callback thread: each message to the callback, or to what the dispatch seam wraps it in.

        The seam (:data:`jsclient.observe.dispatch`) is read once per message (this thread takes one at a time,
        with no rounds), and asked again only when it changed.
        """
        cb = self._cb
        assert cb is not None
        seen: observe.Dispatch | None = None
        call = cb
        while not self._closed:
            try:
                msg = self.next_msg(timeout=None)
            except (SubscriptionClosedError, ConnectionClosedError):
                return
            except Error as exc:
                self._conn.core.report_error(exc)
                if isinstance(exc, JetStreamAPIError) and not exc.retriable:
                    return
                continue
            hook = observe.dispatch
            if hook is not seen:
                seen = hook
                call = cb if hook is None else hook.delivery(self._conn, self.subject or self.stream, cb)
            try:
                call(msg)
            except Exception as exc:  # noqa: BLE001 - user code; reported, never fatal
                self._conn.core.report_error(exc)

    # -- ending -----------------------------------------------------------------------
    @property
    def is_closed(self) -> bool:
        return self._closed

    def unsubscribe(self) -> None:
        """Stop now, and delete the consumer without waiting for the answer.

        A consumer whose delete is lost goes by itself once unused for its
        ``inactive_threshold`` (5 minutes by default).  With a callback, this
        waits up to 5 s for the callback's thread to end (not when called from
        the callback).

        Raises:
            : Nothing; a failed delete is ignored.
        """
        self._conn.core.remove_reconnect_hook(self._hook_key)
        with self._lock:
            self._closed = True
            self._generation += 1
        self._mm.unwatch()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.port.unsubscribe()
        if self.consumer:
            self._delete_quietly(self.consumer)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def drain(self, timeout: Timeout = DEFAULT) -> None:
        """Receive no more, wait until what already arrived is taken (``next_msg`` or the callback), then end.

        No consumer is recreated from here on: a gap found while draining
        ends the subscription after the messages before it.

        Args:
            timeout: Seconds to wait for what arrived to be taken; left out, the connection's ``drain_timeout``
                option; ``None``, no limit; ``0`` is refused.

        Raises:
            TimeoutError: Messages were still queued after ``timeout``, or the server did not confirm the end
                of deliveries in time; the subscription ends anyway.
        """
        timeout = answer_limit(timeout, self._conn.options.drain_timeout)
        with self._lock:
            self._draining = True
        channel = self._channel
        try:
            if channel is not None:
                channel.port.drain(timeout)
        finally:
            self.unsubscribe()


def subscribe_ordered(
    js: JetStream,
    subject: str | None,
    *,
    stream: str | None = None,
    config: ConsumerConfig | None = None,
    cb: Callable[[Msg], None] | None = None,
    idle_heartbeat: float | None = None,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
) -> OrderedSubscription:
    if not subject and not stream:
        raise InvalidArgumentError("subscribe needs a subject or a stream")
    if subject is not None:
        check_subscribe_subject(subject)
    if cb is not None and not callable(cb):
        raise InvalidArgumentError("callback must be callable")
    cfg = ordered_config(config, idle_heartbeat)
    stream_name = stream_of(js, stream, subject)
    return OrderedSubscription(js, stream_name, subject, cfg, cb, (pending_msgs_limit, pending_bytes_limit))
