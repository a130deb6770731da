"""Pull subscriptions (ADR-13): fetch and continuous consumption.

Threads: everything here runs on the user's thread except the reconnect hook
(the connection's reconnect thread, which only sets a flag and wakes the
taker).  Messages and statuses arrive through one core subscription on a
wildcard inbox (``<inbox>.*``); each pull request gets a fresh token, so a
status addressed to an older request is recognised and ignored.  Messages
cannot be attributed to a request (the server rewrites their subject), and
none is ever dropped: what arrives after a fetch returned waits in the queue
for the next one.  A PullSubscription is meant for one consuming thread at a
time; use one per thread (they may share a durable).

Only an ephemeral consumer the library created is deleted on unsubscribe: a
durable pull consumer is shared by design (several subscriptions, several
processes), so removing it when one of them leaves would break the others.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from ..checks import seconds, whole
from ..errors import (
    ConnectionClosedError,
    ConsumerNotFoundError,
    Error,
    HeartbeatsMissedError,
    InvalidArgumentError,
    LeadershipChangeError,
    MaxWaitingExceededError,
    NoRespondersStatusError,
    ServerShutdownError,
    SubscriptionClosedError,
    TimeoutError,
)
from ..headers import status_of
from ..message import Msg
from ..protocol import check_subscribe_subject
from . import api
from .api import AckPolicy, ConsumerConfig, ConsumerInfo
from .push import _set, check_bound_consumer
from .status import Kind, Status, classify, status_error

if TYPE_CHECKING:
    from ..subscription import Subscription
    from .context import JetStream

#: ``expires`` of a waiting request is the caller's remaining time minus this.
EXPIRES_MARGIN = 0.1
_PUSH_FIELDS = ("deliver_subject", "deliver_group", "flow_control", "idle_heartbeat")


class _Interrupted(Error):
    """Internal: wakes a blocked take (stop() or a reconnect)."""


class PullSubscription:
    """Fetch batches, or iterate with :meth:`messages`, from a pull consumer."""

    def __init__(self, js: JetStream, stream: str, consumer: str, subject: str | None, created: bool) -> None:
        self._js = js
        self._conn = js.conn
        self.stream = stream
        self.consumer = consumer
        self.subject = subject
        self._delete_on_close = created
        self._inbox = self._conn.new_inbox()
        self._tokens = itertools.count(1)
        self._next_subject = f"{js.prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._sub: Subscription = self._conn.subscribe(
            self._inbox + ".*", pending_msgs_limit=1 << 24, pending_bytes_limit=1 << 40
        )
        self._deferred: Error | None = None
        self._reconnected = False
        self._hook_key = self._conn.core.add_reconnect_hook(self._on_reconnect)

    def __repr__(self) -> str:
        return f"<PullSubscription stream={self.stream!r} consumer={self.consumer!r}>"

    # -- requests ---------------------------------------------------------------
    def _pull(self, batch: int, *, expires: float | None, no_wait: bool, max_bytes: int | None,
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
        self._conn.core.publish_message(
            self._next_subject, msgspec.json.encode(body), reply=f"{self._inbox}.{token}", send_now=True
        )
        return token

    def _token_of(self, msg: Msg) -> str:
        return msg.subject[len(self._inbox) + 1 :] if msg.subject.startswith(self._inbox) else ""

    def _on_reconnect(self) -> None:
        """Reconnect thread: outstanding pull requests died with the old connection."""
        self._reconnected = True
        self._sub._interrupt(_Interrupted("reconnected"))

    # -- fetch ------------------------------------------------------------------
    def fetch(
        self,
        batch: int = 1,
        timeout: float = 5.0,
        max_bytes: int | None = None,
        heartbeat: float | None = None,
    ) -> list[Msg]:
        """Up to ``batch`` messages within ``timeout``; ``[]`` when none came (not an error)."""
        whole("batch", batch)
        timeout = seconds("timeout", timeout)
        if max_bytes is not None:
            whole("max_bytes", max_bytes)
        if heartbeat is not None:
            heartbeat = seconds("heartbeat", heartbeat)
            if heartbeat >= timeout / 2:
                raise InvalidArgumentError(
                    f"heartbeat ({heartbeat} s) must be less than half the timeout ({timeout} s)"
                )
        if self._sub.is_closed:
            raise SubscriptionClosedError(f"pull subscription on consumer {self.consumer!r} is closed")
        deadline = time.monotonic() + timeout
        out = self._take_ready(batch)
        if self._deferred is not None and not out:
            error, self._deferred = self._deferred, None
            raise error
        if len(out) >= batch:
            return out
        # No-wait first: what is available now, without waiting.
        token = self._pull(batch - len(out), expires=None, no_wait=True, max_bytes=max_bytes, heartbeat=None)
        # A no-wait answer comes at once; a silent server counts as missed heartbeats here too.
        ended, _ = self._collect(out, batch, token, deadline, heartbeat)
        if out or ended == "error":
            return self._finish(out)
        remaining = deadline - time.monotonic()
        if remaining <= EXPIRES_MARGIN:
            return out
        token = self._pull(
            batch - len(out), expires=remaining - EXPIRES_MARGIN, no_wait=False, max_bytes=max_bytes,
            heartbeat=heartbeat,
        )
        self._collect(out, batch, token, deadline, heartbeat)
        return self._finish(out)

    def _finish(self, out: list[Msg]) -> list[Msg]:
        if not out and self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        return out

    def _take_ready(self, batch: int) -> list[Msg]:
        """Messages already queued (late arrivals of an earlier fetch); stale statuses skipped."""
        out: list[Msg] = []
        sub = self._sub
        while len(out) < batch and sub.pending_msgs:
            try:
                msg = sub._take(0)
            except (TimeoutError, _Interrupted):
                break
            if msg.header is None or status_of(msg.header) is None:
                out.append(msg)
        return out

    def _collect(
        self, out: list[Msg], batch: int, token: str, deadline: float, heartbeat: float | None
    ) -> tuple[str, Status | None]:
        """Take messages for the request ``token`` until it ends; returns how it ended."""
        sub = self._sub
        last_seen = time.monotonic()
        while len(out) < batch:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                return "timeout", None
            wait = remaining
            if heartbeat is not None:
                silent_for = now - last_seen
                if silent_for >= 2 * heartbeat:
                    missed = HeartbeatsMissedError(
                        f"no heartbeat or message for {silent_for:.2f} s on pull consumer {self.consumer!r}"
                    )
                    if out:
                        self._deferred = missed
                        return "error", None
                    raise missed
                wait = min(wait, 2 * heartbeat - silent_for)
            try:
                msg = sub._take(wait)
            except TimeoutError:
                continue
            except _Interrupted:
                if self._reconnected:
                    self._reconnected = False
                    return "reconnected", None  # the request is gone; the caller decides
                continue
            last_seen = time.monotonic()
            header = msg.header
            if header is None or status_of(header) is None:
                out.append(msg)
                continue
            status = classify(msg)
            if self._token_of(msg) != token:
                continue  # a status for an older request
            if status.kind is Kind.HEARTBEAT:
                continue
            if status.kind in (Kind.NO_MESSAGES, Kind.REQUEST_TIMEOUT, Kind.MAX_BYTES):
                return "done", status
            error = status_error(status)
            if out:
                self._deferred = error
                return "error", status
            raise error
        return "full", None

    # -- continuous consumption -----------------------------------------------------
    def messages(
        self,
        batch: int = 500,
        expires: float = 30.0,
        max_bytes: int | None = None,
        heartbeat: float | None = None,
        threshold: float = 0.5,
    ) -> MessageStream:
        """A blocking iterator that keeps pull requests outstanding; ``stop()`` ends it."""
        whole("batch", batch)
        expires = seconds("expires", expires)
        if max_bytes is not None:
            whole("max_bytes", max_bytes)
        if heartbeat is not None:
            heartbeat = seconds("heartbeat", heartbeat)
            if heartbeat >= expires / 2:
                raise InvalidArgumentError(f"heartbeat ({heartbeat} s) must be less than half of expires ({expires} s)")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise InvalidArgumentError(f"threshold must be in (0, 1], not {threshold!r}")
        return MessageStream(self, batch, expires, max_bytes, heartbeat, float(threshold))

    # -- ending ----------------------------------------------------------------------
    def consumer_info(self) -> ConsumerInfo:
        return self._js.consumer_info(self.stream, self.consumer)

    @property
    def is_closed(self) -> bool:
        return self._sub.is_closed

    def unsubscribe(self) -> None:
        """Stop, and delete the consumer if this subscription created it."""
        self._conn.core.remove_reconnect_hook(self._hook_key)
        self._sub.unsubscribe()
        if self._delete_on_close:
            self._delete_on_close = False
            with contextlib.suppress(ConsumerNotFoundError):
                self._js.delete_consumer(self.stream, self.consumer)

    drain = unsubscribe


#: Statuses that end one pull request in a continuous consume without ending the consume.
_REQUEST_ENDED = (LeadershipChangeError, ServerShutdownError)
_TRANSIENT = (MaxWaitingExceededError, NoRespondersStatusError)


class MessageStream:
    """Iterator of :meth:`PullSubscription.messages`; ``stop()`` from any thread ends it."""

    def __init__(
        self,
        psub: PullSubscription,
        batch: int,
        expires: float,
        max_bytes: int | None,
        heartbeat: float | None,
        threshold: float,
    ) -> None:
        self._psub = psub
        self.batch = batch
        self.expires = expires
        self.max_bytes = max_bytes
        self.heartbeat = heartbeat
        self._refill = max(1, int(batch * threshold))
        self._pending = 0  # messages requested and neither delivered nor expired
        self._stopped = threading.Event()
        self._tokens: dict[str, int] = {}  # outstanding request -> messages it asked for

    def stop(self) -> None:
        self._stopped.set()
        self._psub._sub._interrupt(_Interrupted("stopped"))

    def __enter__(self) -> MessageStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _request(self) -> None:
        want = self.batch - self._pending
        if want <= 0:
            return
        token = self._psub._pull(
            want, expires=self.expires, no_wait=False, max_bytes=self.max_bytes, heartbeat=self.heartbeat
        )
        self._tokens[token] = want
        self._pending += want

    def __iter__(self) -> Iterator[Msg]:
        psub = self._psub
        sub = psub._sub
        silence = 2 * self.heartbeat if self.heartbeat else self.expires + 1.0
        last_seen = time.monotonic()
        while not self._stopped.is_set():
            if self._pending < self._refill:
                try:
                    self._request()
                except ConnectionClosedError:
                    return
            try:
                msg = sub._take(silence)
            except TimeoutError:
                if time.monotonic() - last_seen >= silence:
                    # Lost requests (or a silent server): forget them and ask again.
                    if self.heartbeat:
                        psub._conn.core.report_error(
                            HeartbeatsMissedError(f"pull consumer {psub.consumer!r}: heartbeats missed; pulling again")
                        )
                    self._pending = 0
                    self._tokens.clear()
                continue
            except _Interrupted:
                if psub._reconnected:
                    psub._reconnected = False
                    self._pending = 0
                    self._tokens.clear()
                continue
            except (SubscriptionClosedError, ConnectionClosedError):
                return
            last_seen = time.monotonic()
            header = msg.header
            if header is None or status_of(header) is None:
                self._pending = max(0, self._pending - 1)
                yield msg
                continue
            status = classify(msg)
            token = psub._token_of(msg)
            if status.kind is Kind.HEARTBEAT:
                continue
            if token not in self._tokens:
                continue
            asked = self._tokens.pop(token)
            if status.kind in (Kind.REQUEST_TIMEOUT, Kind.NO_MESSAGES, Kind.MAX_BYTES):
                left = status.pending_msgs if status.pending_msgs is not None else 0
                self._pending = max(0, self._pending - left)
                continue
            error = status_error(status)
            if isinstance(error, _REQUEST_ENDED):
                # The request died (restart, leader move): pull again.
                self._pending = max(0, self._pending - asked)
                continue
            if isinstance(error, _TRANSIENT):
                self._pending = max(0, self._pending - asked)
                psub._conn.core.report_error(error)
                self._stopped.wait(min(self.expires, 0.5))
                continue
            raise error


def pull_subscribe(
    js: JetStream,
    subject: str | None,
    *,
    durable: str | None = None,
    stream: str | None = None,
    consumer: str | None = None,
    config: ConsumerConfig | None = None,
) -> PullSubscription:
    """Bind to or create a pull consumer (ADR-13), checking everything before any request."""
    if config is not None and not isinstance(config, ConsumerConfig):
        raise InvalidArgumentError(f"config must be a ConsumerConfig, not {type(config).__name__}")
    user = config if config is not None else ConsumerConfig()
    if not subject and not stream:
        raise InvalidArgumentError("pull_subscribe needs a subject or a stream")
    if subject is not None:
        check_subscribe_subject(subject)
    for field in _PUSH_FIELDS:
        if _set(getattr(user, field)):
            raise InvalidArgumentError(f"{field} is a push consumer option; it cannot be used with a pull subscription")
    if _set(user.ack_policy) and user.ack_policy in (AckPolicy.NONE, AckPolicy.ALL):
        raise InvalidArgumentError(f"a pull subscription needs ack_policy explicit, not {user.ack_policy!r}")
    for what, value in (("durable", durable), ("consumer", consumer)):
        if value is not None:
            api.check_name(what, value)
    if durable is None and isinstance(user.durable_name, str):
        durable = user.durable_name
    elif durable and _set(user.durable_name) and user.durable_name != durable:
        raise InvalidArgumentError(f"durable {durable!r} differs from config durable_name {user.durable_name!r}")
    if consumer and durable and consumer != durable:
        raise InvalidArgumentError(f"consumer {consumer!r} and durable {durable!r} differ")
    api.validate_consumer_config(user)
    stream_name = stream or js.find_stream(subject)  # type: ignore[arg-type]
    api.check_name("stream", stream_name)
    name = consumer or durable
    if name:
        try:
            info = js.consumer_info(stream_name, name)
        except ConsumerNotFoundError:
            if consumer:
                raise ConsumerNotFoundError(
                    404, 10014, f"cannot bind to consumer {consumer!r} on stream {stream_name!r}: it does not exist"
                ) from None
        else:
            check_bound_consumer(info, subject, None, user, pull=True)
            return PullSubscription(js, stream_name, info.name, subject, created=False)
    fields: dict[str, Any] = {}
    if not _set(user.ack_policy):
        fields["ack_policy"] = AckPolicy.EXPLICIT.value
    if subject and not _set(user.filter_subject) and not _set(user.filter_subjects):
        fields["filter_subject"] = subject
    if name:
        fields["durable_name"] = name
    elif user.inactive_threshold is UNSET:
        fields["inactive_threshold"] = 300.0  # an ephemeral pull consumer has no interest to expire on
    cfg = msgspec.structs.replace(user, **fields)
    info = js.add_consumer(stream_name, cfg)
    return PullSubscription(js, stream_name, info.name, subject, created=not name)

