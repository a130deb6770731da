"""Telemetry: the tracer, the meter's instruments, span names and trace context in NATS headers.

One :class:`Telemetry` exists while jsclient is instrumented; the wrappers
in the sibling modules close over it.  Everything here runs on the thread
of the call being traced (a caller's, or a subscription's dispatcher for a
callback), never on the connection's reader: the reader only queues
messages, and their spans start where they are taken.  No lock is held by
jsclient while these run.
"""

from __future__ import annotations

import string
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from .._version import __version__
from ..errors import Error, InvalidArgumentError
from ..headers import Headers, HeadersInput

if TYPE_CHECKING:
    from ..connection import Connection
    from ..message import Msg

#: The instrumentation scope's name, as tracers and meters are asked for it.
SCOPE = "jsclient.instrumentation"
#: The span name used unless ``span_name=`` says otherwise: the operation and the message's subject.
DEFAULT_SPAN_NAME = "{operation} {subject}"
#: Set (in the OpenTelemetry context) while a part's span stands for a whole call, as a JetStream batch's:
#: the requests and encoded frames sent under it get no span of their own and are not counted again.
QUIET = otel_context.create_key("jsclient-quiet")
#: The fields a ``span_name`` template may use.
SPAN_NAME_FIELDS = frozenset({"operation", "subject", "pattern"})


class Operation(Enum):
    """A traced operation: its ``messaging.operation.name`` and its ``messaging.operation.type``."""

    PUBLISH = ("publish", "send")
    REQUEST = ("request", "send")
    RECEIVE = ("receive", "receive")
    PROCESS = ("process", "process")
    ACK = ("ack", "settle")
    NAK = ("nak", "settle")
    TERM = ("term", "settle")
    IN_PROGRESS = ("in_progress", "settle")
    # Key-value and object stores (:mod:`.stores`): named ``<operation> <bucket>``.
    KV_GET = ("kv.get", "receive")
    KV_PUT = ("kv.put", "send")
    KV_CREATE = ("kv.create", "send")
    KV_UPDATE = ("kv.update", "send")
    KV_DELETE = ("kv.delete", "send")
    KV_PURGE = ("kv.purge", "send")
    KV_HISTORY = ("kv.history", "receive")
    KV_KEYS = ("kv.keys", "receive")
    OBJ_PUT = ("obj.put", "send")
    OBJ_GET = ("obj.get", "receive")
    OBJ_INFO = ("obj.info", "receive")
    OBJ_DELETE = ("obj.delete", "send")

    def __init__(self, op_name: str, op_type: str) -> None:
        self.op_name = op_name
        self.op_type = op_type


def check_span_name(template: str) -> str:
    """The template itself, or InvalidArgumentError naming what it cannot format."""
    if not isinstance(template, str) or not template.strip():
        raise InvalidArgumentError(f"span_name must be a non-empty str template, not {template!r}")
    try:
        fields = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    except ValueError as exc:
        raise InvalidArgumentError(f"span_name {template!r} is not a format template: {exc}") from None
    unknown = sorted(f for f in fields if f not in SPAN_NAME_FIELDS)
    if unknown:
        raise InvalidArgumentError(
            f"span_name {template!r} names {', '.join(unknown)}; it may use {', '.join(sorted(SPAN_NAME_FIELDS))}"
        )
    return template


class _MsgGetter:
    """Reads trace context from a received message's headers (parsed only when it has a header block)."""

    def get(self, carrier: Msg, key: str) -> list[str] | None:
        if not carrier.header:
            return None
        values = carrier.headers.get_all(key)
        return values or None

    def keys(self, carrier: Msg) -> list[str]:
        return list(carrier.headers) if carrier.header else []


#: A plain class, not a subclass of Getter: without the otel extra installed, its type checks as well.
_GETTER = cast("Getter[Msg]", _MsgGetter())


class Telemetry:
    """What the wrappers need while instrumented: spans, metrics, names, propagation."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        span_name: str,
    ) -> None:
        #: The providers given to ``instrument()`` (None: the global ones), for a flush where a process may end
        #: without running its exit handlers (Spark's Python workers).
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer: Tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        from opentelemetry import metrics

        self.meter: Meter = metrics.get_meter(SCOPE, __version__, meter_provider)
        self.span_name = span_name
        self._by_subject = span_name == DEFAULT_SPAN_NAME
        self._servers: weakref.WeakKeyDictionary[Connection, tuple[str | None, dict[str, Any]]] = (
            weakref.WeakKeyDictionary()
        )
        self.sent: Counter = self.meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Messages a producer sent."
        )
        self.consumed: Counter = self.meter.create_counter(
            "messaging.client.consumed.messages", unit="{message}", description="Messages a consumer took."
        )
        self.duration: Histogram = self.meter.create_histogram(
            "messaging.client.operation.duration", unit="s",
            description="How long a publish, request, receive or JetStream call took.",
        )
        self.process_duration: Histogram = self.meter.create_histogram(
            "messaging.process.duration", unit="s", description="How long a callback took with its message."
        )

    # -- names and attributes ---------------------------------------------
    def name(self, op: Operation, subject: str, pattern: str | None = None) -> str:
        """The span's name: ``<operation> <subject>`` unless a template says otherwise."""
        if self._by_subject:
            return f"{op.op_name} {subject}"
        return self.span_name.format(operation=op.op_name, subject=subject, pattern=pattern or subject)

    def destination(self, subject: str, pattern: str | None = None) -> str:
        """The destination that metrics carry: the subject, or the pattern when spans are named by it."""
        if self._by_subject or "{subject}" in self.span_name:
            return subject
        return pattern or subject

    def server(self, conn: Connection) -> dict[str, Any]:
        """``server.address`` and ``server.port`` of the server the connection is on (cached per URL)."""
        url = conn.connected_url
        known = self._servers.get(conn)
        if known is not None and known[0] == url:
            return known[1]
        attrs: dict[str, Any] = {}
        if url:
            parts = urlsplit(url)
            if parts.hostname:
                attrs["server.address"] = parts.hostname
            if parts.port:
                attrs["server.port"] = parts.port
        self._servers[conn] = (url, attrs)
        return attrs

    def attributes(
        self, op: Operation, conn: Connection | None, subject: str, *, size: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "messaging.system": "nats",
            "messaging.operation.name": op.op_name,
            "messaging.operation.type": op.op_type,
            "messaging.destination.name": subject,
        }
        if size is not None:
            attrs["messaging.message.body.size"] = size
        if conn is not None:
            attrs.update(self.server(conn))
        if extra:
            attrs.update(extra)
        return attrs

    def metric_attributes(self, op: Operation, subject: str, pattern: str | None = None) -> dict[str, Any]:
        return {
            "messaging.system": "nats",
            "messaging.operation.name": op.op_name,
            "messaging.destination.name": self.destination(subject, pattern),
        }

    # -- trace context in headers -----------------------------------------
    @staticmethod
    def inject(headers: HeadersInput | None) -> HeadersInput | None:
        """The headers with the current trace context added; the caller's object is never changed, and a
        message that already carries ``traceparent`` keeps its own."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier, setter=_SETTER)
        if not carrier:
            return headers
        if headers is None:
            return carrier
        if "traceparent" in headers:
            return headers
        if isinstance(headers, Headers):
            merged = headers.copy()
            for key, value in carrier.items():
                if key not in merged:
                    merged[key] = value
            return merged
        return {**carrier, **headers}

    @staticmethod
    def extract(msg: Msg) -> otel_context.Context | None:
        """The trace context a received message carries, or None when it carries none."""
        if not msg.header:
            return None
        ctx = propagate.extract(msg, getter=_GETTER)
        if trace.get_current_span(ctx).get_span_context().is_valid:
            return ctx
        return None

    @staticmethod
    def link(msg: Msg) -> Link | None:
        ctx = Telemetry.extract(msg)
        if ctx is None:
            return None
        return Link(trace.get_current_span(ctx).get_span_context())

    # -- metrics ----------------------------------------------------------
    def finishing(self, op: Operation, subject: str, count: int = 1) -> Callable[[BaseException | None], None]:
        """Starts timing an operation: the function returned records how long it took and ``count`` messages
        sent, with ``error.type`` when an error ended it (for an operation that ends on another thread)."""
        metric = self.metric_attributes(op, subject)
        started = time.perf_counter()

        def finish(exc: BaseException | None) -> None:
            attrs = metric if exc is None else {**metric, "error.type": type(exc).__qualname__}
            self.duration.record(time.perf_counter() - started, attrs)
            self.sent.add(count, attrs)

        return finish

    @contextmanager
    def measured(self, op: Operation, subject: str, count: int = 1) -> Iterator[None]:
        """:meth:`finishing` around a block, with the error it raised."""
        finish = self.finishing(op, subject, count)
        try:
            yield
        except BaseException as exc:
            finish(exc)
            raise
        finish(None)

    # -- spans ------------------------------------------------------------
    @contextmanager
    def span(
        self, name: str, kind: SpanKind, attributes: dict[str, Any], *,
        context: otel_context.Context | None = None, links: list[Link] | None = None,
        start_time: int | None = None,
    ) -> Iterator[Span]:
        """A current span that records the error an operation raises (``error.type``: its class name)."""
        with self.tracer.start_as_current_span(
            name, context=context, kind=kind, attributes=attributes, links=links, start_time=start_time,
            record_exception=False, set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                failed(span, exc)
                raise


def failed(span: Span, exc: BaseException) -> None:
    """Mark a span as ended by ``exc``: its status, ``error.type`` and, for a server error, its code."""
    span.set_attribute("error.type", type(exc).__qualname__)
    code = getattr(exc, "err_code", None)
    if isinstance(exc, Error) and isinstance(code, int):
        span.set_attribute("messaging.nats.jetstream.error_code", code)
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)))


def now_ns() -> int:
    return time.time_ns()


class _Setter:
    def set(self, carrier: dict[str, str], key: str, value: str) -> None:
        carrier[key] = value


_SETTER = cast("Setter[dict[str, str]]", _Setter())
