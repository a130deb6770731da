"""Push subscriptions (ADR-15): consumer lookup and binding, and automatic status management.

Threads:

* :func:`subscribe` runs on the user's thread: option checks, stream lookup,
  consumer lookup/creation (blocking API calls).
* :meth:`PushSubscription._on_receive` runs on the connection's **reader
  thread** for every delivered message (the core subscription's hook).  It
  tracks sequences, reports gaps, swallows heartbeats and answers a stalled
  heartbeat at once; it never blocks and never calls user code.
* ``next_msg`` / iteration run on the user's thread; a callback runs on the
  core subscription's dispatcher thread.  Both answer flow control when it
  reaches the head of the queue and raise (or report) error statuses in order.
* The heartbeat alarm comes from the connection's watchdog thread.

``_fc_lock`` makes "answer each flow-control subject once" hold across the
reader and the taking thread.  Sequence fields are written by the reader only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from ..checks import seconds
from ..errors import (
    ConnectionClosedError,
    ConsumerAlreadyExistsError,
    ConsumerNameInUseError,
    ConsumerNotFoundError,
    Error,
    HeartbeatsMissedError,
    InvalidArgumentError,
    JetStreamSubscribeError,
    MessageGapError,
    SubscriptionClosedError,
)
from ..headers import status_of
from ..message import ACK_DISABLED, Msg
from ..protocol import check_queue_name, check_subscribe_subject
from . import api
from .api import AckPolicy, ConsumerConfig, ConsumerInfo
from .status import Kind, classify, status_error
from .watchdog import HeartbeatMonitor

if TYPE_CHECKING:
    from ..subscription import Subscription
    from .context import JetStream

MsgHandler = Callable[[Msg], None]

DEFAULT_ALARM_FACTOR = 3.0
PULL_ONLY_FIELDS = ("max_waiting", "max_batch", "max_expires")
# Fields the workflow sets itself, checked separately from "changes not applied".
_WORKFLOW_FIELDS = ("deliver_subject", "deliver_group", "filter_subject", "durable_name", "name")


def _set(value: Any) -> bool:
    return value is not UNSET and value is not None


def _ack_cseq(reply: str | None) -> tuple[int, int] | None:
    """(consumer seq, stream seq) from an ack subject, cheaply; None when not one."""
    if reply is None or not reply.startswith("$JS.ACK."):
        return None
    tokens = reply.split(".")
    n = len(tokens)
    base = 6 if n == 9 else 8 if n >= 11 else -1
    if base < 0:
        return None
    try:
        return int(tokens[base]), int(tokens[base - 1])
    except ValueError:
        return None


class PushSubscription:
    """A JetStream push subscription: ``next_msg``, iteration or a callback, with ASM."""

    def __init__(
        self,
        js: JetStream,
        stream: str,
        subject: str | None,
        queue: str | None,
        cb: MsgHandler | None,
        manual_ack: bool,
        ack_none: bool,
        gap_check: bool,
    ) -> None:
        self._js = js
        self._conn = js.conn
        self.stream = stream
        self.subject = subject
        self.queue = queue
        self.consumer = ""
        self.deliver_subject = ""
        self._user_cb = cb
        self._manual_ack = manual_ack
        self._ack_none = ack_none
        self._gap_check = gap_check
        self._delete_on_close = False
        self._sub: Subscription | None = None
        self._monitor: HeartbeatMonitor | None = None
        self._fc_lock = threading.Lock()
        self._fc_answered: str | None = None
        #: Flow-control requests answered (each subject once).
        self.flow_control_answers = 0
        # Written by the reader thread only.
        self.last_consumer_seq = 0
        self.last_stream_seq = 0
        self.gaps = 0

    def __repr__(self) -> str:
        return f"<PushSubscription stream={self.stream!r} consumer={self.consumer!r} subject={self.subject!r}>"

    # -- reader thread ---------------------------------------------------------
    def _on_receive(self, msg: Msg) -> bool:
        """Reader hook: True when the message is consumed here (heartbeats)."""
        header = msg.header
        if header is not None and status_of(header) == 100:
            status = classify(msg)
            if status.kind is not Kind.HEARTBEAT:
                return False  # flow control: answered when it reaches the head of the queue
            if self._gap_check and status.last_consumer is not None:
                self._check_gap(status.last_consumer, status.last_stream, heartbeat=True)
            if status.flow_control_subject:
                self._answer_flow_control(status.flow_control_subject)
            return True
        if self._gap_check:
            seqs = _ack_cseq(msg.reply)
            if seqs is not None:
                self._check_gap(seqs[0], seqs[1], heartbeat=False)
        return False

    def _check_gap(self, cseq: int, sseq: int | None, heartbeat: bool) -> None:
        last = self.last_consumer_seq
        if heartbeat:
            # A heartbeat states the last consumer sequence the server sent;
            # before any message it only tells where a bound consumer stands.
            if last == 0:
                self.last_consumer_seq = cseq
            elif cseq > last:
                self.gaps += 1
                self._conn.core.report_error(MessageGapError(last + 1, cseq + 1, self.consumer))
                self.last_consumer_seq = cseq
            return
        if cseq > last + 1 and last != 0:
            self.gaps += 1
            self._conn.core.report_error(MessageGapError(last + 1, cseq, self.consumer))
        self.last_consumer_seq = cseq
        if sseq is not None:
            self.last_stream_seq = sseq

    def _answer_flow_control(self, subject: str) -> None:
        with self._fc_lock:
            if subject == self._fc_answered:
                return
            self._fc_answered = subject
            self.flow_control_answers += 1
        with contextlib.suppress(ConnectionClosedError):
            self._conn.core.publish_control(subject, b"")

    # -- taking thread ---------------------------------------------------------
    def _core(self) -> Subscription:
        sub = self._sub
        if sub is None:
            raise SubscriptionClosedError("subscription is not active")
        return sub

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next user message; statuses are handled on the way (ADR-15)."""
        if self._user_cb is not None:
            raise Error("next_msg cannot be used on a subscription with a callback")
        sub = self._core()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            msg = sub._take(remaining)
            if msg.header is None or status_of(msg.header) is None:
                if self._ack_none:
                    msg._ack_state = ACK_DISABLED
                return msg
            self._handle_status(msg)

    def _handle_status(self, msg: Msg) -> None:
        status = classify(msg)
        if status.kind is Kind.FLOW_CONTROL:
            if status.flow_control_subject:
                self._answer_flow_control(status.flow_control_subject)
            return
        if status.kind is Kind.HEARTBEAT:
            return
        raise status_error(status)

    def __iter__(self) -> Iterator[Msg]:
        while True:
            try:
                yield self.next_msg(timeout=None)
            except (SubscriptionClosedError, ConnectionClosedError):
                return

    def _dispatch(self, msg: Msg) -> None:
        """Core callback on the dispatcher thread: statuses here, user messages to the user."""
        if msg.header is not None and status_of(msg.header) is not None:
            try:
                self._handle_status(msg)
            except Error as exc:
                self._conn.core.report_error(exc)
            return
        cb = self._user_cb
        assert cb is not None
        if self._ack_none:
            msg._ack_state = ACK_DISABLED
            cb(msg)
            return
        cb(msg)
        if not self._manual_ack:
            msg.ack()

    # -- heartbeats ----------------------------------------------------------------
    def _start_monitor(self, idle_heartbeat: float, alarm: float) -> None:
        sub = self._core()
        self._monitor = HeartbeatMonitor(
            self._conn.core.watchdog, sub, interval=idle_heartbeat, alarm=alarm, on_alarm=self._alarm
        ).start()

    def _alarm(self) -> None:
        """Watchdog thread: no message or heartbeat for the alarm time."""
        monitor = self._monitor
        sub = self._sub
        if monitor is None or sub is None:
            return
        error = HeartbeatsMissedError(
            f"no heartbeat or message for {monitor.alarm:g} s on consumer {self.consumer!r} "
            f"(stream {self.stream!r})"
        )
        self._conn.core.report_error(error)
        if self._user_cb is None:
            sub._interrupt(error)

    # -- info and ending -------------------------------------------------------------
    def consumer_info(self) -> ConsumerInfo:
        return self._js.consumer_info(self.stream, self.consumer)

    @property
    def pending_msgs(self) -> int:
        return self._core().pending_msgs

    @property
    def is_closed(self) -> bool:
        return self._sub is None or self._sub.is_closed

    def _stop_monitor(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None

    def unsubscribe(self) -> None:
        """Stop, and delete the consumer if this library created it (not for queue groups)."""
        sub = self._sub
        self._stop_monitor()
        if sub is not None:
            sub.unsubscribe()
        self._delete_consumer(raise_errors=True)

    def drain(self, timeout: float | None = None) -> None:
        """Deliver what is queued, then delete a library-made consumer (failure -> error callback)."""
        sub = self._sub
        self._stop_monitor()
        if sub is not None:
            sub.drain(timeout)
        self._delete_consumer(raise_errors=False)

    def _delete_consumer(self, raise_errors: bool) -> None:
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


# -- the subscribe workflow ----------------------------------------------------------


def check_push_options(
    subject: str | None,
    stream: str | None,
    queue: str | None,
    config: ConsumerConfig,
    durable: str | None,
    consumer: str | None,
) -> None:
    """Misuse that needs no server to detect (ADR-15 "Configuration"), before any request."""
    if not subject and not stream:
        raise InvalidArgumentError("subscribe needs a subject or a stream")
    if subject is not None:
        check_subscribe_subject(subject)
    if queue is not None:
        check_queue_name(queue)
        if _set(config.idle_heartbeat):
            raise InvalidArgumentError("queue subscriptions cannot use idle_heartbeat")
        if config.flow_control is True:
            raise InvalidArgumentError("queue subscriptions cannot use flow_control")
    for field in PULL_ONLY_FIELDS:
        if _set(getattr(config, field)):
            raise InvalidArgumentError(f"{field} is a pull consumer option; it cannot be used with a push subscription")
    if config.flow_control is True and not _set(config.idle_heartbeat):
        raise InvalidArgumentError("flow_control needs idle_heartbeat (the server requires heartbeats with it)")
    for what, value in (("durable", durable), ("consumer", consumer)):
        if value is not None:
            api.check_name(what, value)
    if durable and _set(config.durable_name) and config.durable_name != durable:
        raise InvalidArgumentError(f"durable {durable!r} differs from config durable_name {config.durable_name!r}")
    if consumer and durable and consumer != durable:
        raise InvalidArgumentError(f"consumer {consumer!r} and durable {durable!r} differ")
    if queue and _set(config.deliver_group) and config.deliver_group != queue:
        raise InvalidArgumentError(f"queue {queue!r} differs from config deliver_group {config.deliver_group!r}")


def check_bound_consumer(
    info: ConsumerInfo, subject: str | None, queue: str | None, user: ConsumerConfig, pull: bool
) -> None:
    """Every ADR-15 check of an existing consumer against what the user asked for."""
    cfg = info.config
    name = info.name
    deliver_subject = cfg.deliver_subject if _set(cfg.deliver_subject) else ""
    group = cfg.deliver_group if _set(cfg.deliver_group) else ""
    if pull and deliver_subject:
        raise JetStreamSubscribeError(
            f"consumer {name!r} is a push consumer (deliver subject {deliver_subject!r}); "
            "a pull subscription cannot use it"
        )
    if not pull and not deliver_subject:
        raise JetStreamSubscribeError(f"consumer {name!r} is a pull consumer; use pull_subscribe")
    if subject:
        filters = [cfg.filter_subject] if _set(cfg.filter_subject) else list(cfg.filter_subjects or [])
        if filters and subject not in filters:
            raise JetStreamSubscribeError(
                f"subject {subject!r} does not match consumer {name!r} filter subject(s) {filters}"
            )
    if not pull:
        if queue is None:
            if group:
                raise JetStreamSubscribeError(
                    f"cannot create a non-queue subscription for consumer {name!r}, which was created "
                    f"for queue group {group!r}"
                )
            if info.push_bound:
                raise JetStreamSubscribeError(f"duplicate subscription: consumer {name!r} is already bound")
        else:
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
            if _set(cfg.idle_heartbeat) and cfg.idle_heartbeat:
                raise JetStreamSubscribeError(f"consumer {name!r} uses heartbeats, which queue groups cannot")
    for field in ConsumerConfig.__struct_fields__:
        if field in _WORKFLOW_FIELDS:
            continue
        wanted = getattr(user, field)
        if not _set(wanted):
            continue
        actual = getattr(cfg, field)
        if wanted != actual:
            raise JetStreamSubscribeError(
                f"configuration requests {field}={wanted!r}, but consumer {name!r} has {field}={actual!r}; "
                "changes not applied (only the deliver subject of an existing consumer can change)"
            )


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
        raise InvalidArgumentError("cb must be callable")
    if not isinstance(flow_control, bool):
        raise InvalidArgumentError(f"flow_control must be a bool, not {flow_control!r}")
    user = config if config is not None else ConsumerConfig()
    overrides: dict[str, Any] = {}
    if idle_heartbeat is not None:
        overrides["idle_heartbeat"] = seconds("idle_heartbeat", idle_heartbeat)
    if flow_control:
        overrides["flow_control"] = True
    if overrides:
        user = msgspec.structs.replace(user, **overrides)
    # ADR-15: an explicit queue subscription without durable or consumer uses the queue name as durable.
    if durable is None and isinstance(user.durable_name, str):
        durable = user.durable_name
    check_push_options(subject, stream, queue, user, durable, consumer)
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

    stream_name = stream or js.find_stream(subject)  # type: ignore[arg-type]
    api.check_name("stream", stream_name)
    name = consumer or durable
    info: ConsumerInfo | None = None
    if name:
        try:
            info = js.consumer_info(stream_name, name)
        except ConsumerNotFoundError:
            if consumer:
                raise ConsumerNotFoundError(
                    404, 10014, f"cannot bind to consumer {consumer!r} on stream {stream_name!r}: it does not exist"
                ) from None
    ack_policy = str(user.ack_policy) if _set(user.ack_policy) else AckPolicy.EXPLICIT.value
    if info is not None:
        check_bound_consumer(info, subject, queue, user, pull=False)
        ack_policy = str(info.config.ack_policy)
    psub = PushSubscription(
        js, stream_name, subject, queue, cb, manual_ack, ack_policy == AckPolicy.NONE.value, gap_check=queue is None
    )
    limits = (pending_msgs_limit, pending_bytes_limit)
    if info is not None:
        _bind(psub, info, limits)
    else:
        _create(psub, user, name, limits)
    if hb is not None and alarm is not None:
        psub._start_monitor(hb, alarm)
    return psub


def _core_subscribe(psub: PushSubscription, deliver_subject: str, limits: tuple[int | None, int | None]) -> None:
    conn = psub._conn
    sub = conn.subscribe(
        deliver_subject,
        queue=psub.queue,
        cb=psub._dispatch if psub._user_cb is not None else None,
        pending_msgs_limit=limits[0],
        pending_bytes_limit=limits[1],
    )
    sub._hook = psub._on_receive
    psub._sub = sub
    psub.deliver_subject = deliver_subject


def _bind(psub: PushSubscription, info: ConsumerInfo, limits: tuple[int | None, int | None]) -> None:
    deliver = info.config.deliver_subject
    assert isinstance(deliver, str)
    _core_subscribe(psub, deliver, limits)
    psub.consumer = info.name


def _create(
    psub: PushSubscription, user: ConsumerConfig, name: str | None, limits: tuple[int | None, int | None]
) -> None:
    """ADR-15 order: subscribe on the deliver subject first, then create the consumer."""
    js = psub._js
    conn = psub._conn
    deliver = str(user.deliver_subject) if _set(user.deliver_subject) else conn.new_inbox()
    fields: dict[str, Any] = {"deliver_subject": deliver}
    if not _set(user.ack_policy):
        fields["ack_policy"] = AckPolicy.EXPLICIT.value
    if psub.subject and not _set(user.filter_subject) and not _set(user.filter_subjects):
        fields["filter_subject"] = psub.subject
    if psub.queue:
        fields["deliver_group"] = psub.queue
    if name:
        fields["durable_name"] = name
    cfg = msgspec.structs.replace(user, **fields)
    _core_subscribe(psub, deliver, limits)
    try:
        info = js.add_consumer(psub.stream, cfg, action="create" if name else "")
    except (ConsumerAlreadyExistsError, ConsumerNameInUseError):
        # Lost a race with another creator: bind to theirs, with the same checks.
        _unsubscribe_quietly(psub)
        assert name is not None
        info = js.consumer_info(psub.stream, name)
        check_bound_consumer(info, psub.subject, psub.queue, user, pull=False)
        _bind(psub, info, limits)
        return
    except BaseException:
        _unsubscribe_quietly(psub)  # no leaked NATS subscription
        raise
    psub.consumer = info.name
    # DESIGN: a queue group's consumer stays (other members may still use it).
    psub._delete_on_close = psub.queue is None


def _unsubscribe_quietly(psub: PushSubscription) -> None:
    sub = psub._sub
    psub._sub = None
    if sub is not None:
        with contextlib.suppress(Error):
            sub.unsubscribe()

