"""Push subscriptions (ADR-15): consumer binding and automatic status management.

Threads:

* :func:`subscribe` runs on the user's thread: option checks, stream lookup,
  consumer lookup/creation (blocking API calls, :mod:`.bind`).
* The connection's **reader thread** runs the subscription's
  :class:`~.manager.GapReporting` manager for every delivered message:
  heartbeats are handled there, gaps reported; it never blocks.
* ``next_msg`` / iteration run on the user's thread; a callback runs on the
  core subscription's dispatcher thread.  Both carry out the
  :data:`~.manager.PUSH` verdict of each message in order: user messages
  out, flow control answered, error statuses raised (or reported).
* The heartbeat alarm comes from the connection's watchdog thread.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..checks import seconds
from ..errors import (
    ConsumerAlreadyExistsError,
    ConsumerNameInUseError,
    ConsumerNotFoundError,
    Error,
    HeartbeatsMissedError,
    InvalidArgumentError,
    SubscriptionClosedError,
    TimeoutError,
)
from ..message import ACK_DISABLED, Msg
from ..observe import ConsumerKind
from ..protocol import check_queue_name, check_subscribe_subject
from ..subscription import Relay, UntilClosed
from ..timeouts import DEFAULT, Timeout, answer_limit, take_limit
from . import api
from .api import AckPolicy, ConsumerConfig, ConsumerInfo
from .bind import Bound, check_bound_consumer, check_names, creation_config, find_consumer, is_set, stream_of
from .channel import MESSAGE, TIMED_OUT, WOKEN, Channel, Wake
from .manager import PUSH, GapReporting, MessageManager

if TYPE_CHECKING:
    from ..core.iface import DeliveryPort
    from ..observe import Dispatch
    from .context import JetStream

MsgHandler = Callable[[Msg], None]

DEFAULT_ALARM_FACTOR = 3.0
PULL_ONLY_FIELDS = ("max_waiting", "max_batch", "max_expires")


class PushSubscription(Bound):
    """A JetStream push subscription: ``next_msg``, iteration or a callback, with ASM.

    Made by ``js.subscribe(...)``.  Heartbeats and flow control are handled
    on the way (ADR-15's automatic status management); iteration ends when
    the subscription or the connection does.

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
        queue: str | None,
        cb: MsgHandler | None,
        *,
        manual_ack: bool,
        ack_none: bool,
        found: ConsumerInfo | None,
        config: ConsumerConfig,
        name: str | None,
        limits: tuple[int | None, int | None],
        idle_heartbeat: float | None,
        alarm: float | None,
    ) -> None:
        """Bind to the consumer ``found``, or create one from ``config`` (named ``name``, if given).

        Everything was checked by :func:`subscribe`; the heartbeat watch
        starts when the consumer sends heartbeats (``idle_heartbeat`` with its ``alarm``).

        Args:
            js: The context whose requests it makes.
            stream: The consumer's stream.
            subject: The subject subscribed to, or None (a consumer given by name).
            queue: The queue group (the consumer's deliver group), or None.
            cb: Called with each message on the subscription's thread, or None to take them with ``next_msg``.
            manual_ack: The callback acknowledges; else each message is acked when ``cb`` returns.
            ack_none: The consumer's ack policy is none: messages are marked as needing no ack.
            found: The existing consumer to bind to, or None to create one.
            config: The configuration of a consumer to create.
            name: The durable name of a consumer to create, or None for an ephemeral one.
            limits: The core subscription's pending limits (messages, bytes); None takes the connection's.
            idle_heartbeat: Seconds between the consumer's heartbeats, or None.
            alarm: Seconds of silence after which missed heartbeats are reported, or None.

        Raises:
            TimeoutError: Creating (or, after losing a race to create it, looking up) the consumer got no answer
                within the context's timeout.
            JetStreamSubscribeError: The consumer another subscriber created meanwhile does not fit this
                subscription.
            FeatureNotSupportedError: The consumer's configuration needs a newer server than the one connected.
            JetStreamAPIError: The server refused to create the consumer.
        """
        super().__init__(js, stream, subject)
        self.queue = queue
        self.deliver_subject = ""
        self._user_cb = cb
        self._manual_ack = manual_ack
        self._ack_none = ack_none
        self._delete_on_close = False
        self._sub: DeliveryPort | None = None
        self._chan: Channel | None = None  # over _sub, judged by the PUSH table
        # A queue group's members each see part of the sequence: no gaps to track there.
        self._mm: MessageManager = (
            GapReporting(self._conn.core, lambda: self.consumer) if queue is None else MessageManager(self._conn.core)
        )
        if found is not None:
            self._bind(found, limits)
        else:
            self._create(config, name, limits)
        if idle_heartbeat is not None and alarm is not None:
            self._mm.watch(self._core(), idle_heartbeat, alarm, self._alarm, ConsumerKind.PUSH)

    def __repr__(self) -> str:
        return f"<PushSubscription stream={self.stream!r} consumer={self.consumer!r} subject={self.subject!r}>"

    @property
    def flow_control_answers(self) -> int:
        """Flow-control requests answered (each subject once)."""
        return self._mm.flow_control_answers

    @property
    def gaps(self) -> int:
        """Gaps in the consumer sequence reported so far (not for queue groups)."""
        return self._mm.gaps if isinstance(self._mm, GapReporting) else 0

    @property
    def last_consumer_seq(self) -> int:
        return self._mm.consumer_seq

    @property
    def last_stream_seq(self) -> int:
        return self._mm.stream_seq

    # -- taking thread ---------------------------------------------------------
    def _core(self) -> DeliveryPort:
        return self._channel().port

    def _channel(self) -> Channel:
        channel = self._chan
        if channel is None:
            raise SubscriptionClosedError("subscription is not active")
        return channel

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next user message; statuses are handled on the way (ADR-15).

        Args:
            timeout: Seconds to wait; ``None``, no limit; ``0``, only a message already queued.

        Returns:
            The next message.

        Raises:
            TimeoutError: No message within ``timeout``.
            Error: The subscription has a callback, which takes the messages.
            SubscriptionClosedError: The subscription has ended and nothing is left to take.
            HeartbeatsMissedError: Neither a message nor a heartbeat came for the alarm time (the consumer may
                be gone).
            JetStreamStatusError: The server sent an error status, such as ConsumerDeletedError.
        """
        if self._user_cb is not None:
            raise Error("next_msg cannot be used on a subscription with a callback")
        got = self._channel().take(take_limit(timeout))
        if isinstance(got, Msg):
            if self._ack_none:
                got.ack_state = ACK_DISABLED
            return got
        if got.verdict is TIMED_OUT:
            raise TimeoutError(f"no message from consumer {self.consumer!r} within {timeout} s")
        if got.verdict is WOKEN:
            raise self._missed()
        assert got.error is not None
        raise got.error

    def __iter__(self) -> Iterator[Msg]:
        return UntilClosed(self.next_msg)

    def _dispatch(self, msg: Msg, observed: MsgHandler | None = None) -> None:
        """Core callback on the dispatcher thread: statuses here, user messages to the user (or, in a round
        the dispatch seam observes, to ``observed``: the user's callback as the seam wrapped it)."""
        step = self._channel().judge(msg)
        if step is None:
            return
        if step.verdict is not MESSAGE:
            assert step.error is not None
            self._conn.core.report_error(step.error)
            return
        cb = self._user_cb if observed is None else observed
        assert cb is not None
        if self._ack_none:
            msg.ack_state = ACK_DISABLED
            cb(msg)
            return
        cb(msg)
        if not self._manual_ack:
            msg.ack()

    def _observed(self, hook: Dispatch) -> MsgHandler:
        """The core subscription's callback for a round the dispatch seam observes (see :class:`Relay`)."""
        cb = self._user_cb
        assert cb is not None
        return functools.partial(self._dispatch, observed=hook.delivery(self._conn, self.subject or self.stream, cb))

    # -- heartbeats ----------------------------------------------------------------
    def _missed(self) -> HeartbeatsMissedError:
        return HeartbeatsMissedError(
            f"no heartbeat or message for {self._mm.alarm:g} s on consumer {self.consumer!r} "
            f"(stream {self.stream!r})"
        )

    def _alarm(self) -> None:
        """Watchdog thread: no message or heartbeat for the alarm time."""
        channel = self._chan
        if channel is None:
            return
        self._conn.core.report_error(self._missed())
        if self._user_cb is None:
            channel.wake(Wake.SILENT)

    # -- info and ending -------------------------------------------------------------
    @property
    def pending_msgs(self) -> int:
        return self._core().pending_msgs

    @property
    def is_closed(self) -> bool:
        return self._sub is None or self._sub.is_closed

    def unsubscribe(self) -> None:
        """Stop, and delete the consumer if this library created it (not for queue groups).

        Messages received and not yet taken are dropped.

        Raises:
            TimeoutError: Deleting the consumer got no answer within the context's timeout.
            ConnectionClosedError: The connection is closed, so the consumer created here was not deleted.
            JetStreamAPIError: The server refused to delete that consumer.
        """
        sub = self._sub
        self._mm.unwatch()
        if sub is not None:
            sub.unsubscribe()
        self._delete_consumer(raise_errors=True)

    def drain(self, timeout: Timeout = DEFAULT) -> None:
        """Deliver what is queued, then delete a library-made consumer (failure -> error callback).

        It waits until what had arrived is taken (``next_msg``) or handled (the callback).

        Args:
            timeout: Seconds to wait for that; left out, the connection's ``drain_timeout`` option; ``None``, no
                limit; ``0`` is refused.

        Raises:
            TimeoutError: Messages were still queued after ``timeout`` (the consumer is then not deleted), or
                the server did not confirm the end of deliveries in time.
        """
        timeout = answer_limit(timeout, self._conn.options.drain_timeout)
        sub = self._sub
        self._mm.unwatch()
        if sub is not None:
            sub.drain(timeout)
        self._delete_consumer(raise_errors=False)

    def _delete_consumer(self, *, raise_errors: bool) -> None:
        if not self._delete_on_close or not self.consumer:
            return
        self._delete_on_close = False
        try:
            self._js.delete_consumer(self.stream, self.consumer)
        except ConsumerNotFoundError:
            pass
        except Error as exc:
            if raise_errors:
                raise
            self._conn.core.report_error(exc)

    # -- binding and creating (ADR-15) ------------------------------------------------
    def _core_subscribe(self, deliver_subject: str, limits: tuple[int | None, int | None]) -> None:
        sub = self._conn.subscribe(
            deliver_subject,
            queue=self.queue,
            callback=Relay(self._dispatch, self._observed) if self._user_cb is not None else None,
            pending_msgs_limit=limits[0],
            pending_bytes_limit=limits[1],
        )
        if self.queue is None:  # a queue group has neither heartbeats nor an order of its own
            sub.arrival_hook = self._mm.arrive
        self._sub = sub
        self._chan = Channel(sub, self._mm, PUSH)
        self.deliver_subject = deliver_subject

    def _bind(self, info: ConsumerInfo, limits: tuple[int | None, int | None]) -> None:
        deliver = info.config.deliver_subject
        assert isinstance(deliver, str)
        self._core_subscribe(deliver, limits)
        self.consumer = info.name

    def _create(self, user: ConsumerConfig, name: str | None, limits: tuple[int | None, int | None]) -> None:
        """ADR-15 order: subscribe on the deliver subject first, then create the consumer."""
        js = self._js
        deliver = str(user.deliver_subject) if is_set(user.deliver_subject) else self._conn.new_inbox()
        fields: dict[str, Any] = {"deliver_subject": deliver}
        if self.queue:
            fields["deliver_group"] = self.queue
        cfg = creation_config(user, self.subject, name, **fields)
        self._core_subscribe(deliver, limits)
        try:
            info = js.add_consumer(self.stream, cfg, action="create" if name else "")
        except (ConsumerAlreadyExistsError, ConsumerNameInUseError):
            # Lost a race with another creator: bind to theirs, with the same checks.
            self._unsubscribe_quietly()
            assert name is not None
            info = js.consumer_info(self.stream, name)
            check_bound_consumer(info, self.subject, self.queue, user, pull=False)
            self._bind(info, limits)
            return
        except BaseException:
            self._unsubscribe_quietly()  # no leaked NATS subscription
            raise
        self.consumer = info.name
        # DESIGN: a queue group's consumer stays (other members may still use it).
        self._delete_on_close = self.queue is None

    def _unsubscribe_quietly(self) -> None:
        sub = self._sub
        self._sub = self._chan = None
        if sub is not None:
            with contextlib.suppress(Error):
                sub.unsubscribe()


# -- the subscribe workflow ----------------------------------------------------------


def check_push_options(
    subject: str | None,
    stream: str | None,
    queue: str | None,
    config: ConsumerConfig,
) -> None:
    """Misuse that needs no server to detect (ADR-15 "Configuration"), before any request."""
    if not subject and not stream:
        raise InvalidArgumentError("subscribe needs a subject or a stream")
    if subject is not None:
        check_subscribe_subject(subject)
    if queue is not None:
        check_queue_name(queue)
        if is_set(config.idle_heartbeat):
            raise InvalidArgumentError("queue subscriptions cannot use idle_heartbeat")
        if config.flow_control is True:
            raise InvalidArgumentError("queue subscriptions cannot use flow_control")
    for field in PULL_ONLY_FIELDS:
        if is_set(getattr(config, field)):
            raise InvalidArgumentError(f"{field} is a pull consumer option; it cannot be used with a push subscription")
    if config.flow_control is True and not is_set(config.idle_heartbeat):
        raise InvalidArgumentError("flow_control needs idle_heartbeat (the server requires heartbeats with it)")
    if queue and is_set(config.deliver_group) and config.deliver_group != queue:
        raise InvalidArgumentError(f"queue {queue!r} differs from config deliver_group {config.deliver_group!r}")


def subscribe(
    js: JetStream,
    subject: str | None,
    *,
    durable: str | None = None,
    queue: str | None = None,
    stream: str | None = None,
    consumer: str | None = None,
    config: ConsumerConfig | None = None,
    cb: MsgHandler | None = None,
    manual_ack: bool = False,
    idle_heartbeat: float | None = None,
    flow_control: bool = False,
    heartbeat_alarm: float | None = None,
    pending_msgs_limit: int | None = None,
    pending_bytes_limit: int | None = None,
) -> PushSubscription:
    if config is not None and not isinstance(config, ConsumerConfig):
        raise InvalidArgumentError(f"config must be a ConsumerConfig, not {type(config).__name__}")
    if cb is not None and not callable(cb):
        raise InvalidArgumentError("callback must be callable")
    if not isinstance(flow_control, bool):
        raise InvalidArgumentError(f"flow_control must be a bool, not {flow_control!r}")
    user = config if config is not None else ConsumerConfig()
    overrides: dict[str, Any] = {}
    if idle_heartbeat is not None:
        overrides["idle_heartbeat"] = seconds("idle_heartbeat", idle_heartbeat)
    if flow_control:
        overrides["flow_control"] = True
    if overrides:
        user = api.replace(user, **overrides)
    check_push_options(subject, stream, queue, user)
    durable = check_names(durable, consumer, user)
    # ADR-15: an explicit queue subscription without durable or consumer uses the queue name as durable.
    if not durable and not consumer and queue:
        durable = queue
    hb = float(user.idle_heartbeat) if isinstance(user.idle_heartbeat, float) and user.idle_heartbeat else None
    alarm: float | None = None
    if heartbeat_alarm is not None:
        if hb is None:
            raise InvalidArgumentError("heartbeat_alarm needs idle_heartbeat")
        alarm = seconds("heartbeat_alarm", heartbeat_alarm)
        if alarm <= hb:
            raise InvalidArgumentError(f"heartbeat_alarm ({alarm} s) must exceed idle_heartbeat ({hb} s)")
    elif hb is not None:
        alarm = DEFAULT_ALARM_FACTOR * float(hb)
    api.validate_consumer_config(user)

    stream_name = stream_of(js, stream, subject)
    name = consumer or durable
    info = find_consumer(js, stream_name, name, must_exist=bool(consumer))
    ack_policy = str(user.ack_policy) if is_set(user.ack_policy) else AckPolicy.EXPLICIT.value
    if info is not None:
        check_bound_consumer(info, subject, queue, user, pull=False)
        ack_policy = str(info.config.ack_policy)
    return PushSubscription(
        js, stream_name, subject, queue, cb, manual_ack=manual_ack, ack_none=ack_policy == AckPolicy.NONE.value,
        found=info, config=user, name=name, limits=(pending_msgs_limit, pending_bytes_limit),
        idle_heartbeat=hb, alarm=alarm,
    )

