"""Publishing with acks: ``publish``, ``publish_async`` and its window, and :class:`PublishOptions`.

Runs on the calling (user) thread.  ``publish_async`` acks are decoded on the
connection's reader thread (library code only; done-callbacks run on its
events thread, a retry's next try is sent from its timer thread).  The
async-publish window (:class:`_Window`: the count of outstanding async
publishes, guarded by its lock) is the only mutable state here, so one
publisher may be shared by many threads.  A forked child gets a new window:
the parent's acks never reach the child, and a lock a parent's thread held at
the fork would stay held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

import msgspec

from ..backoff import Backoff
from ..checks import whole
from ..core import fork
from ..errors import (
    Error,
    InvalidArgumentError,
    NoRespondersError,
    NoStreamResponseError,
    TimeoutError,
    WrongLastSequenceError,
)
from ..futures import ReplyKind
from ..headers import Headers, HeadersInput, status_of
from . import api, features, msgopts
from .api import PubAck
from .status import Request, classify_header, no_stream, reply_error

if TYPE_CHECKING:
    from ..connection import Connection
    from ..message import Msg
    from ..protocol import MsgEvent
    from .context import JetStream

#: A 503 from a JetStream publish usually means a leader election: four more tries after the first, 50 ms
#: doubling up to 1 s apart.  A blocking publish makes them only while its one timeout lasts.
PUBLISH_RETRY = Backoff(initial=0.05, maximum=1.0, attempts=4)


class PublishOptions(msgspec.Struct, frozen=True, gc=False):
    """The per-message options of one publish: what it expects of the stream, its TTL and its schedule.

    Built once per call by :func:`publish_options`; :meth:`headers` checks
    every option, naming a bad one, before anything is sent.  Untracked by
    the garbage collector (cheaper to make): built after its values and
    frozen, it cannot be part of a reference cycle.
    """

    msg_id: str | None = None
    expected_stream: str | None = None
    expected_last_seq: int | None = None
    expected_last_subject_seq: int | None = None
    expected_last_msg_id: str | None = None
    ttl: msgopts.TTL | None = None
    schedule: msgopts.Schedule | None = None
    schedule_target: str | None = None
    schedule_source: str | None = None
    schedule_ttl: msgopts.TTL | None = None
    schedule_time_zone: str | None = None

    def headers(self, subject: str, headers: HeadersInput | None, require: Callable[..., int]) -> Headers:
        """The caller's headers plus those the options ask for; ``require`` checks the server has what they need."""
        hdrs = Headers(headers) if headers is not None else Headers()
        for name, value in (("Nats-Msg-Id", self.msg_id), ("Nats-Expected-Last-Msg-Id", self.expected_last_msg_id)):
            if value is not None:
                if not isinstance(value, str) or not value:
                    raise InvalidArgumentError(f"{name} must be a non-empty str, not {value!r}")
                hdrs[name] = value
        if self.expected_stream is not None:
            hdrs["Nats-Expected-Stream"] = api.check_name("expected_stream", self.expected_stream)
        for name, number in (
            ("Nats-Expected-Last-Sequence", self.expected_last_seq),
            ("Nats-Expected-Last-Subject-Sequence", self.expected_last_subject_seq),
        ):
            if number is not None:
                hdrs[name] = str(whole(name, number, 0))
        needs: list[features.Feature] = []
        if self.ttl is not None:
            hdrs[msgopts.TTL_HEADER] = msgopts.ttl_value("ttl", self.ttl)
            needs.append(features.MESSAGE_TTL)
        if self.schedule is not None:
            scheduled = msgopts.schedule_headers(
                subject, self.schedule, self.schedule_target, self.schedule_source, self.schedule_ttl,
                self.schedule_time_zone,
            )
            for name, value in scheduled.items():
                hdrs[name] = value
            needs.append(features.SCHEDULES)
            if msgopts.repeats(scheduled):
                needs.append(features.REPEATING_SCHEDULES)
            if self.schedule_source is not None:
                needs.append(features.SCHEDULE_SOURCE)  # 2.12 would publish the schedule's own body instead
        else:
            for name, option in (("schedule_target", self.schedule_target), ("schedule_source", self.schedule_source),
                                 ("schedule_ttl", self.schedule_ttl), ("schedule_time_zone", self.schedule_time_zone)):
                if option is not None:
                    raise InvalidArgumentError(f"{name} needs schedule")
        require(*needs)
        return hdrs


#: A publish without msg_id, expectations, ttl or schedule: the common case, told apart by identity.
NO_OPTIONS = PublishOptions()


def publish_options(
    msg_id: str | None,
    expected_stream: str | None,
    expected_last_seq: int | None,
    expected_last_subject_seq: int | None,
    expected_last_msg_id: str | None,
    ttl: msgopts.TTL | None,
    schedule: msgopts.Schedule | None,
    schedule_target: str | None,
    schedule_source: str | None,
    schedule_ttl: msgopts.TTL | None,
    schedule_time_zone: str | None,
) -> PublishOptions:
    """The options of one publish, in field order; :data:`NO_OPTIONS` itself when none is given.

    Positional, and nothing is allocated in the common case without options:
    every publish makes this call, so it is kept as cheap as a tuple.
    """
    if (
        msg_id is None and expected_stream is None and expected_last_seq is None and expected_last_subject_seq is None
        and expected_last_msg_id is None and ttl is None and schedule is None and schedule_target is None
        and schedule_source is None and schedule_ttl is None and schedule_time_zone is None
    ):
        return NO_OPTIONS
    return PublishOptions(
        msg_id, expected_stream, expected_last_seq, expected_last_subject_seq, expected_last_msg_id, ttl, schedule,
        schedule_target, schedule_source, schedule_ttl, schedule_time_zone,
    )


def window_size(publish_async_max_pending: object) -> int:
    """A context's ``publish_async_max_pending``, checked: how many async publishes may await their acks."""
    if (
        isinstance(publish_async_max_pending, bool)
        or not isinstance(publish_async_max_pending, int)
        or publish_async_max_pending < 1
    ):
        raise InvalidArgumentError(
            f"publish_async_max_pending must be a positive int, not {publish_async_max_pending!r}"
        )
    return publish_async_max_pending


class _Window:
    """The async-publish window of one context in one process."""

    __slots__ = ("blocked", "cond", "lock", "pending")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.pending = 0  # async publishes not settled yet (guarded by lock)
        self.blocked = 0  # publishers waiting for the window to reopen (guarded by lock)


class Publisher:
    """The publishing part of a :class:`~jsclient.jetstream.context.JetStream`: acks awaited or as futures.

    It reads the context's ``conn``, ``timeout`` and
    ``publish_async_max_pending`` at each call, so they stay the context's.
    """

    def __init__(self, js: JetStream) -> None:
        self._js = js
        self._window = _Window()
        # A publish's reply, read by the one quick check (api.read_pub_ack) and then, when that leaves it,
        # by this publisher's full decoder: js.publish's shape, and publish_async's kinds.
        self._ack_shape = api.pub_ack_shape(self._decode_reply)
        # How an async publish's reply settles its future: decoded as an ack, reopening the window.
        self._ack_kind = ReplyKind(
            self._decode_async_reply, self._release_pending, self._send_pending, read=api.read_pub_ack
        )
        # Tries of a publish with retries: their caller's future reopens the window, once, when it resolves.
        self._retry_kind = ReplyKind(self._decode_async_reply, None, self._send_pending, read=api.read_pub_ack)
        limit = js.publish_async_max_pending
        self._resume_at = limit - max(1, limit // 8)
        fork.track(self)

    def _after_fork_in_child(self) -> None:
        """The fork hook (see :mod:`jsclient.core.fork`): the child's publishes start with a window of their own."""
        self._window = _Window()

    def publish(
        self, subject: str, payload: bytes, options: PublishOptions, headers: HeadersInput | None,
        wait: float,
    ) -> PubAck:
        """:meth:`JetStream.publish <jsclient.jetstream.context.JetStream.publish>`, its ``timeout`` resolved."""
        hdrs = headers if options is NO_OPTIONS else options.headers(subject, headers, self._js.require)
        js = self._js
        deadline = time.monotonic() + wait  # the one deadline of the first try and every retry
        try:
            return js.conn.core.request(subject, payload, wait, hdrs, self._ack_shape)
        except NoRespondersError:
            request = js.conn.core.request
            shape = self._ack_shape
            return _retry_unanswered(
                lambda left: request(subject, payload, left, hdrs, shape), subject, wait, deadline
            )

    def _decode_reply(self, msg: MsgEvent) -> PubAck:
        """The full decoder, with a refused expectation's outcome as this server gives it."""
        try:
            return api.decode_pub_ack(msg.data)
        except WrongLastSequenceError as exc:
            api.conditional_refusal(exc, self._js.conn.server_info)
            raise

    def _decode_async_reply(self, msg: Msg, subject: str) -> PubAck:
        """Reader thread: what the quick check left of the reply to a publish to ``subject`` (the reply's own
        subject is only our inbox), which names a status by the publish."""
        if not msg.data and msg.header and status_of(msg.header) is not None:
            raise reply_error(classify_header(msg.header), Request.PUBLISH, subject)
        return self._decode_reply(msg)

    def publish_async(
        self, subject: str, payload: bytes, options: PublishOptions, headers: HeadersInput | None,
        wait: float, retry_on_no_responders: int,
    ) -> Future[PubAck]:
        """:meth:`JetStream.publish_async <jsclient.jetstream.context.JetStream.publish_async>`, its ``timeout``
        resolved."""
        hdrs = headers if options is NO_OPTIONS else options.headers(subject, headers, self._js.require)
        js = self._js
        retries = (  # whole() only when the common plain int would not pass: it costs a call per message
            retry_on_no_responders
            if type(retry_on_no_responders) is int and retry_on_no_responders >= 0
            else whole("retry_on_no_responders", retry_on_no_responders, 0)
        )
        window = self._window
        limit = js.publish_async_max_pending
        lock = window.lock
        lock.acquire()
        try:
            if window.pending >= limit:
                lock.release()
                try:
                    js.conn.core.send_pending()  # what the window holds goes now: its acks reopen it
                finally:
                    lock.acquire()
                window.blocked += 1
                try:
                    reopened = window.cond.wait_for(lambda: window.pending < limit, wait)
                finally:
                    window.blocked -= 1
                if not reopened:
                    raise TimeoutError(
                        f"publish_async: {window.pending} acks still outstanding after {wait} s "
                        f"(publish_async_max_pending={limit})"
                    )
            window.pending += 1
        finally:
            lock.release()
        try:
            if not retries:
                return js.conn.core.request_async(subject, payload, wait, hdrs, self._ack_kind)
            outer: Future[PubAck] = Future()
            self._attempt(outer, subject, payload, wait, hdrs, retries, 0)
            return outer
        except BaseException:
            self._release_pending(1)
            raise

    def _attempt(
        self, outer: Future[PubAck], subject: str, payload: bytes, wait: float, hdrs: HeadersInput | None,
        left: int, attempt: int,
    ) -> None:
        """One try of a publish_async with retries; the window slot is released when ``outer`` resolves."""
        conn = self._js.conn
        inner = conn.core.request_async(subject, payload, wait, hdrs, self._retry_kind)

        def settled(done: Future[PubAck]) -> None:  # the events thread
            error = done.exception()
            if isinstance(error, NoStreamResponseError) and left > 0:
                def again() -> None:  # the timer thread
                    try:
                        self._attempt(outer, subject, payload, wait, hdrs, left - 1, attempt + 1)
                    except Error as exc:
                        outer.set_exception(exc)
                        self._release_pending(1)

                conn.core.timers.call_later(PUBLISH_RETRY.delay(attempt + 1), again)
                return
            if error is not None:
                outer.set_exception(error)
            else:
                outer.set_result(done.result())
            self._release_pending(1)

        inner.add_done_callback(settled)

    def _send_pending(self) -> None:
        """Before a publish_async future blocks: send what the connection buffered (its current session)."""
        self._js.conn.core.send_pending()

    def _release_pending(self, settled: int) -> None:
        """Reader or timer thread (or a failed publish): ``settled`` async publishes settled."""
        window = self._window
        with window.lock:
            window.pending -= settled
            # A full window wakes its publishers only once an eighth has drained (or all of it):
            # waking them for every single ack would cost a thread switch per message.
            if window.pending == 0 or (window.blocked and window.pending <= self._resume_at):
                window.cond.notify_all()

    @property
    def pending(self) -> int:
        """Async publishes not settled yet."""
        return self._window.pending

    @property
    def connection(self) -> Connection:
        """The connection its context publishes on."""
        return self._js.conn

    def completed(self, timeout: float | None) -> None:
        """:meth:`JetStream.publish_async_completed <jsclient.jetstream.context.JetStream.publish_async_completed>`."""
        self._js.conn.core.send_pending()
        window = self._window
        with window.cond:
            if not window.cond.wait_for(lambda: window.pending == 0, timeout):
                raise TimeoutError(
                    f"publish_async_completed: {window.pending} acks still outstanding after {timeout} s"
                )


def publish_async_in_flight() -> list[tuple[Connection, int]]:
    """Each JetStream context's ``publish_async`` window in this process: its connection, and the async
    publishes that await their acks (:attr:`JetStream.publish_async_pending
    <jsclient.jetstream.context.JetStream.publish_async_pending>`).

    For monitors (the OpenTelemetry metrics' gauge): any thread, no lock (each count is read as it
    stands).  Publishers are listed through the fork registry, where each one is put once, when its
    context is made, and from which it goes with its context.
    """
    return [(obj.connection, obj.pending) for obj in fork.tracked() if isinstance(obj, Publisher)]


def _retry_unanswered(send: Callable[[float], PubAck], subject: str, wait: float, deadline: float) -> PubAck:
    """Send again, with backoff, while no stream answers (a leader election); then NoStreamResponseError.

    The first try already failed.  The retries share the call's ``deadline`` (``wait`` seconds after the
    first try began): ``send(left)`` is given only the time left, and a retry whose backoff would end at
    or past the deadline is not made.  PUBLISH_RETRY's schedule: the first retry at once, then
    ``delay(1)``, ``delay(2)``, ... before each next one, ``attempts`` retries at most.
    """
    tries = 1
    attempts = PUBLISH_RETRY.attempts
    why = f"no time was left for another within the {wait:g} s timeout"  # what a break means
    while attempts is None or tries <= attempts:
        pause = PUBLISH_RETRY.delay(tries - 1) if tries > 1 else 0.0
        if time.monotonic() + pause >= deadline:
            break
        if pause:
            time.sleep(pause)
        left = deadline - time.monotonic()
        if left <= 0:  # the sleep ended past the deadline
            break
        tries += 1
        try:
            return send(left)
        except NoRespondersError:
            pass
    else:
        why = "as many as the retry policy makes"
    made = "1 try" if tries == 1 else f"{tries} tries"
    raise NoStreamResponseError(f"{no_stream(subject)} ({made}; {why})")
