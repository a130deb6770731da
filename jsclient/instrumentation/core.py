"""Spans and metrics of core NATS: publish, request, receiving with ``next_msg`` and callbacks.

Each function returns the wrapper of one public method; :mod:`.patches`
installs them.  A wrapper runs on the thread that called the method.  A
callback is not wrapped when it is given to ``subscribe``: the dispatch seam
(:mod:`.dispatch`) wraps it in :func:`traced_callback` for each round of
messages while instrumented, so that its ``process`` span runs on the
subscription's dispatcher thread, where the callback itself runs, parented
by the trace context its message carries.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from .patches import Patches
from .telemetry import QUIET, Operation, Telemetry, failed

if TYPE_CHECKING:
    from ..connection import Connection
    from ..message import Msg
    from ..subscription import Subscription


def install(patches: Patches, tel: Telemetry) -> None:
    from ..connection import Connection
    from ..subscription import Subscription

    patches.wrap(Connection, "publish", lambda original: _publish(tel, original))
    patches.wrap(Connection, "publish_encoded", lambda original: _publish_encoded(tel, original))
    patches.wrap(Connection, "request", lambda original: _request(tel, original))
    patches.wrap(Connection, "request_async", lambda original: _request_async(tel, original))
    patches.wrap(Connection, "request_many", lambda original: _request_many(tel, original))
    patches.wrap(Subscription, "next_msg", lambda original: _next_msg(tel, original))


def _size(payload: Any) -> int | None:
    try:
        return len(payload)
    except TypeError:
        return None


def _publish(tel: Telemetry, original: Callable[..., None]) -> Callable[..., None]:
    def publish(
        self: Connection, subject: str, payload: bytes = b"", reply: str | None = None, headers: Any = None
    ) -> None:
        op = Operation.PUBLISH
        attrs = tel.attributes(op, self, subject, size=_size(payload))
        with tel.span(tel.name(op, subject), SpanKind.PRODUCER, attrs):
            original(self, subject, payload, reply, tel.inject(headers))
        tel.sent.add(1, tel.metric_attributes(op, subject))

    return publish


def _publish_encoded(tel: Telemetry, original: Callable[..., None]) -> Callable[..., None]:
    """Frames encoded by a batch publisher (the Spark sink, atomic batches): counted by ``messages=``, without a
    span per message (their subjects are inside the frames; the caller's span, if any, covers them)."""
    metric = {"messaging.system": "nats", "messaging.operation.name": Operation.PUBLISH.op_name}

    def publish_encoded(
        self: Connection, frames: bytes | memoryview, *, messages: int, payload_bytes: int, send_now: bool = False
    ) -> None:
        original(self, frames, messages=messages, payload_bytes=payload_bytes, send_now=send_now)
        if not otel_context.get_value(QUIET):  # a batch's span counted its members
            tel.sent.add(messages, metric)

    return publish_encoded


def _request(tel: Telemetry, original: Callable[..., Msg]) -> Callable[..., Msg]:
    def request(
        self: Connection, subject: str, payload: bytes = b"", timeout: float | None = 2.0, headers: Any = None
    ) -> Msg:
        op = Operation.REQUEST
        attrs = tel.attributes(op, self, subject, size=_size(payload))
        with tel.measured(op, subject), tel.span(tel.name(op, subject), SpanKind.CLIENT, attrs):
            return original(self, subject, payload, timeout, tel.inject(headers))

    return request


def _request_async(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    def request_async(
        self: Connection, subject: str, payload: bytes = b"", timeout: float | None = 2.0, headers: Any = None
    ) -> Any:
        op = Operation.REQUEST
        attrs = tel.attributes(op, self, subject, size=_size(payload))
        span = tel.tracer.start_span(tel.name(op, subject), kind=SpanKind.CLIENT, attributes=attrs)
        started = time.perf_counter()
        metric = tel.metric_attributes(op, subject)
        from opentelemetry import trace

        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                future = original(self, subject, payload, timeout, tel.inject(headers))
        except BaseException as exc:
            failed(span, exc)
            span.end()
            raise

        def ended(done: Any) -> None:  # on the events thread (or here, if it is already done)
            exc = done.exception()
            attrs = metric
            if exc is not None:
                failed(span, exc)
                attrs = {**metric, "error.type": type(exc).__qualname__}
            span.end()
            tel.duration.record(time.perf_counter() - started, attrs)
            tel.sent.add(1, attrs)

        future.add_done_callback(ended)
        return future

    return request_async


def _request_many(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    def request_many(self: Connection, subject: str, payload: bytes = b"", **kwargs: Any) -> Any:
        op = Operation.REQUEST
        attrs = tel.attributes(op, self, subject, size=_size(payload))
        with tel.span(tel.name(op, subject), SpanKind.CLIENT, attrs):
            kwargs["headers"] = tel.inject(kwargs.get("headers"))
            return original(self, subject, payload, **kwargs)

    return request_many


def traced_callback(
    tel: Telemetry, conn: Connection | None, pattern: str, group: str | None, callback: Callable[[Msg], None],
    extra: dict[str, Any] | None = None,
) -> Callable[[Msg], None]:
    """``callback`` inside a CONSUMER ``process`` span parented by the message's trace context."""
    op = Operation.PROCESS

    def process(msg: Msg) -> None:
        subject = msg.subject
        attrs = tel.attributes(op, conn, subject, size=len(msg.data), extra=extra)
        attrs["messaging.destination.template"] = pattern
        if group:
            attrs["messaging.consumer.group.name"] = group
        metric = tel.metric_attributes(op, subject, pattern)
        started = time.perf_counter()
        try:
            with tel.span(tel.name(op, subject, pattern), SpanKind.CONSUMER, attrs, context=tel.extract(msg)):
                callback(msg)
        except BaseException as exc:
            metric = {**metric, "error.type": type(exc).__qualname__}
            raise
        finally:
            tel.process_duration.record(time.perf_counter() - started, metric)
            tel.consumed.add(1, metric)

    process.__wrapped__ = callback  # type: ignore[attr-defined]
    return process


def _next_msg(tel: Telemetry, original: Callable[..., Msg]) -> Callable[..., Msg]:
    def next_msg(self: Subscription, timeout: float | None = 1.0) -> Msg:
        started = time.time_ns()
        msg = original(self, timeout)
        received(tel, self, msg, started)
        return msg

    return next_msg


def received(tel: Telemetry, sub: Subscription, msg: Msg, started: int) -> None:
    """A ``receive`` span from ``started`` to now, linked to the producer's context; only for a message taken,
    so that a loop polling with short timeouts does not fill a trace with empty waits."""
    op = Operation.RECEIVE
    attrs = tel.attributes(op, None, msg.subject, size=len(msg.data))
    attrs["messaging.destination.template"] = sub.subject
    if sub.queue:
        attrs["messaging.consumer.group.name"] = sub.queue
    link = tel.link(msg)
    span = tel.tracer.start_span(
        tel.name(op, msg.subject, sub.subject), kind=SpanKind.CONSUMER, attributes=attrs,
        links=[link] if link is not None else None, start_time=started,
    )
    span.end()
    metric = tel.metric_attributes(op, msg.subject, sub.subject)
    tel.consumed.add(1, metric)
    tel.duration.record((time.time_ns() - started) / 1e9, metric)
