"""Spans and metrics of JetStream: publishes and their acks, deliveries, settlements, direct gets and API calls.

- ``js.publish``, ``publish_async`` and ``publish_batch``: a PRODUCER ``publish`` span that ends with the
  stream's ack and carries its stream and sequence; its trace context travels in the message headers.  The
  ack latency is recorded as ``messaging.client.operation.duration`` (operation ``publish``): a JetStream
  publish is done only when the stream acks it, so the conventions' own histogram measures exactly that,
  and dashboards built on them find it (a core publish records none: it has no ack).
- Deliveries: a ``receive`` span per message taken (push and ordered ``next_msg`` and iteration, pull
  ``messages()``), and one per ``fetch`` that brought messages, linked to each message's producer; the
  callbacks of ``js.subscribe`` (ordered too) and ``Consumer.consume`` run in a ``process`` span parented by
  it, through the dispatch seam (:mod:`.dispatch`, :func:`traced_delivery`), whenever they were made.  A
  message is counted once: the threads the library runs callbacks on (``jsclient-consume``,
  ``jsclient-ordered``) take messages without a ``receive`` span of their own.
- ``ack``, ``nak``, ``term``, ``in_progress`` and ``ack_sync``: a short CLIENT span of operation type
  ``settle`` (the conventions' settlement span), not an event: an ack often happens where no span is
  current (after a fetch, after the callback that auto-acks), where an event would be lost, and
  ``ack_sync`` waits for the server, a latency that belongs in a span.  It is the child of the current span,
  else of the message's producer, so the ack is in the message's trace.
- Direct gets and ``get_msg``: a CLIENT span ``jetstream DIRECT.GET`` / ``jetstream STREAM.MSG.GET`` with the
  stream and the sequence and subject read.
- Every other ``$JS.API`` request: a CLIENT span named after its operation (``jetstream STREAM.INFO``), the
  stream and consumer as attributes (the subject carries them: the name stays one of a few dozen), and the
  server's error code when it refused.  These requests go through ``Connection.request``, which the core part
  traces too: for them this part's wrapper calls the method beneath the core's, so each call is one span
  (it must come after :mod:`.core` in the instrumentor's parts).  The API is recognized by its default
  prefixes (``$JS.API``, ``$JS.<domain>.API``); under a custom prefix the core's request span remains.

Threads: each wrapper runs on its caller's thread; a ``publish_async`` span ends in its future's
done-callback (the connection's events thread); a callback's ``process`` span runs on the thread the
callback runs on.  Nothing here runs on the reader thread.  While one of these spans stands for a call,
a context value tells the wrappers of the core requests beneath it not to make spans of their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind

from ..errors import BadAckSubjectError, Error, JetStreamAPIError
from ..headers import status_of
from ..jetstream import api
from ..jetstream.metadata import is_ack_subject
from ..jetstream.status import Request, classify_header, reply_error
from .core import traced_callback
from .patches import Patches
from .telemetry import QUIET, Operation, Telemetry, failed

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..connection import Connection
    from ..jetstream.batch import BatchAck
    from ..jetstream.bind import Bound
    from ..jetstream.context import JetStream
    from ..jetstream.direct import DirectBatch
    from ..jetstream.pull import PullSubscription
    from ..message import Msg

#: Set while an outer iterator takes a message from an inner one: the outer one makes the ``receive`` span.
_TAKING = otel_context.create_key("jsclient-jetstream-taking")
#: The threads the library runs JetStream callbacks on: a message they take is counted by its ``process`` span.
_CALLBACK_THREADS = frozenset({"jsclient-consume", "jsclient-ordered"})

#: The JetStream API's operations, with how many names (stream, then consumer) follow them in a request subject.
_API_NAMES = {
    "INFO": 0,
    "STREAM.CREATE": 1, "STREAM.UPDATE": 1, "STREAM.DELETE": 1, "STREAM.INFO": 1, "STREAM.PURGE": 1,
    "STREAM.LIST": 0, "STREAM.NAMES": 0, "STREAM.MSG.GET": 1, "STREAM.MSG.DELETE": 1, "STREAM.SNAPSHOT": 1,
    "STREAM.RESTORE": 1, "STREAM.LEADER.STEPDOWN": 1, "STREAM.PEER.REMOVE": 1,
    "CONSUMER.CREATE": 2, "CONSUMER.DURABLE.CREATE": 2, "CONSUMER.INFO": 2, "CONSUMER.DELETE": 2,
    "CONSUMER.LIST": 1, "CONSUMER.NAMES": 1, "CONSUMER.PAUSE": 2, "CONSUMER.RESET": 2, "CONSUMER.UNPIN": 2,
    "CONSUMER.LEADER.STEPDOWN": 2, "CONSUMER.MSG.NEXT": 2,
    "DIRECT.GET": 1,
    "ACCOUNT.PURGE": 0, "META.LEADER.STEPDOWN": 0, "SERVER.REMOVE": 0,
}
#: ``$JS.<token>.`` subjects that are not ``$JS.<domain>.API.``: acks, flow control, advisories.
_NOT_DOMAINS = frozenset({"ACK", "FC", "EVENT"})


def install(patches: Patches, tel: Telemetry) -> None:
    from ..connection import Connection
    from ..jetstream.context import JetStream
    from ..jetstream.direct import DirectBatch
    from ..jetstream.handles import ConsumerMessages
    from ..jetstream.ordered import OrderedSubscription
    from ..jetstream.pull import MessageStream, PullSubscription
    from ..jetstream.push import PushSubscription
    from ..jetstream.reads import Reads
    from ..message import Msg

    request = patches.beneath(Connection, "request")
    request_async = patches.beneath(Connection, "request_async")
    patches.wrap(Connection, "request", lambda original: _api_request(tel, original, request))
    patches.wrap(Connection, "request_async", lambda original: _api_request_async(tel, original, request_async))
    patches.wrap(JetStream, "publish", lambda original: _publish(tel, original))
    patches.wrap(JetStream, "publish_async", lambda original: _publish_async(tel, original))
    patches.wrap(JetStream, "publish_batch", lambda original: _publish_batch(tel, original))
    patches.wrap(Reads, "direct_get", lambda original: _direct_get(tel, original))
    patches.wrap(JetStream, "get_msg", lambda original: _get_msg(tel, original))
    patches.wrap(DirectBatch, "__iter__", lambda original: _direct_batch(tel, original))
    patches.wrap(PushSubscription, "next_msg", lambda original: _next_msg(tel, original))
    patches.wrap(OrderedSubscription, "next_msg", lambda original: _next_msg(tel, original))
    patches.wrap(PullSubscription, "fetch", lambda original: _fetch(tel, original))
    patches.wrap(MessageStream, "__iter__", lambda original: _iteration(tel, original))
    patches.wrap(ConsumerMessages, "__iter__", lambda original: _iteration(tel, original))
    for name, op in (("ack", Operation.ACK), ("nak", Operation.NAK), ("term", Operation.TERM),
                     ("in_progress", Operation.IN_PROGRESS), ("ack_sync", Operation.ACK)):
        patches.wrap(Msg, name, _settling(tel, op))


@contextmanager
def _within(ctx: otel_context.Context) -> Iterator[None]:
    """``ctx`` current for the block (a span started in it takes its values along: ``start_as_current_span``
    makes its span current in the context current then, not in the one it was given)."""
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def _quiet(parent: otel_context.Context | None = None) -> otel_context.Context:
    return otel_context.set_value(QUIET, True, parent)


# -- attributes ------------------------------------------------------------------------------------------------
def delivery(msg: Msg) -> dict[str, Any]:
    """What a JetStream message's ack subject says of its delivery; nothing for a message without one."""
    if not is_ack_subject(msg.reply):
        return {}
    try:
        meta = msg.metadata
    except BadAckSubjectError:
        return {}
    attrs: dict[str, Any] = {
        "messaging.nats.stream": meta.stream,
        "messaging.nats.consumer": meta.consumer,
        "messaging.consumer.group.name": meta.consumer,
        "messaging.nats.stream_sequence": meta.sequence.stream,
        "messaging.nats.consumer_sequence": meta.sequence.consumer,
        "messaging.nats.delivered": meta.num_delivered,
    }
    msg_id = msg.headers.get("Nats-Msg-Id") if msg.header else None
    if msg_id:
        attrs["messaging.message.id"] = msg_id
    return attrs


def _msg_id(msg_id: object, headers: object) -> str | None:
    """The ``Nats-Msg-Id`` a publish sets: its ``msg_id``, else the caller's header."""
    if isinstance(msg_id, str) and msg_id:
        return msg_id
    if isinstance(headers, Mapping):
        value = headers.get("Nats-Msg-Id")
        if isinstance(value, str):
            return value or None
    return None


def _acked(span: Span, stream: str, seq: int, *, duplicate: bool = False) -> None:
    span.set_attribute("messaging.nats.stream", stream)
    span.set_attribute("messaging.nats.sequence", seq)
    if duplicate:
        span.set_attribute("messaging.nats.duplicate", True)


def _size(payload: Any) -> int | None:
    try:
        return len(payload)
    except TypeError:
        return None


def _error_metric(metric: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    return {**metric, "error.type": type(exc).__qualname__}


# -- publishing ------------------------------------------------------------------------------------------------
def _publishing(tel: Telemetry, js: JetStream, subject: str, payload: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A publish span's attributes before the ack: the conventions' and the ``Nats-Msg-Id`` it sets."""
    msg_id = _msg_id(kwargs.get("msg_id"), kwargs.get("headers"))
    return tel.attributes(Operation.PUBLISH, js.conn, subject, size=_size(payload),
                          extra={"messaging.message.id": msg_id} if msg_id else None)


def _publish(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    def publish(self: JetStream, subject: str, payload: bytes = b"", **kwargs: Any) -> Any:
        op = Operation.PUBLISH
        attrs = _publishing(tel, self, subject, payload, kwargs)
        with tel.measured(op, subject), tel.span(tel.name(op, subject), SpanKind.PRODUCER, attrs) as span:
            kwargs["headers"] = tel.inject(kwargs.get("headers"))
            ack = original(self, subject, payload, **kwargs)
            _acked(span, ack.stream, ack.seq, duplicate=ack.duplicate)
            return ack

    return publish


def _publish_async(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    def publish_async(self: JetStream, subject: str, payload: bytes = b"", **kwargs: Any) -> Any:
        op = Operation.PUBLISH
        span = tel.tracer.start_span(tel.name(op, subject), kind=SpanKind.PRODUCER,
                                     attributes=_publishing(tel, self, subject, payload, kwargs))
        finish = tel.finishing(op, subject)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                kwargs["headers"] = tel.inject(kwargs.get("headers"))
                future: Future[Any] = original(self, subject, payload, **kwargs)
        except BaseException as exc:  # nothing was sent (a bad option, a full window): no ack to wait for
            failed(span, exc)
            span.end()
            raise

        def ended(done: Future[Any]) -> None:  # the events thread (or here, when it is done already)
            exc = None if done.cancelled() else done.exception()
            if exc is not None:
                failed(span, exc)
            elif not done.cancelled():
                ack = done.result()
                _acked(span, ack.stream, ack.seq, duplicate=ack.duplicate)
            span.end()
            finish(exc)

        future.add_done_callback(ended)
        return future

    return publish_async


def _with_context(tel: Telemetry, entry: Any) -> Any:
    """A batch entry with the current trace context in its headers, as a new mapping; a malformed one as it is
    (the batch refuses it, naming it)."""
    if isinstance(entry, Mapping):
        return {**entry, "headers": tel.inject(entry.get("headers"))}
    if isinstance(entry, tuple) and len(entry) == 2:
        subject, data = entry
        headers = tel.inject(None)
        return {"subject": subject, "data": data} if headers is None else {
            "subject": subject, "data": data, "headers": headers}
    return entry


def _entry_subject(entry: Any) -> object:
    if isinstance(entry, Mapping):
        return entry.get("subject")
    if isinstance(entry, tuple) and len(entry) == 2:
        return entry[0]
    return None


def _publish_batch(tel: Telemetry, original: Callable[..., BatchAck]) -> Callable[..., BatchAck]:
    def publish_batch(self: JetStream, messages: Any, **kwargs: Any) -> BatchAck:
        try:
            entries = list(messages)
        except TypeError:  # not iterable: the batch refuses it
            return original(self, messages, **kwargs)
        op = Operation.PUBLISH
        subjects = {_entry_subject(e) for e in entries}
        subject = next(iter(subjects)) if len(subjects) == 1 else None
        if not isinstance(subject, str):
            subject = None
        attrs = tel.attributes(op, self.conn, subject or "", extra={"messaging.batch.message_count": len(entries)})
        if subject is None:  # several destinations: the conventions name none, and the span by the operation
            del attrs["messaging.destination.name"]
        name = tel.name(op, subject) if subject is not None else op.op_name
        # The commit's request is this span's.
        with tel.measured(op, subject or "", len(entries)), _within(_quiet()), tel.span(
            name, SpanKind.PRODUCER, attrs
        ) as span:
            ack = original(self, [_with_context(tel, e) for e in entries], **kwargs)
            _acked(span, ack.stream, ack.seq)
            return ack

    return publish_batch


# -- deliveries ------------------------------------------------------------------------------------------------
def received(tel: Telemetry, msg: Msg, pattern: str | None, started: int) -> None:
    """A ``receive`` span of one message from ``started`` to now, linked to its producer's context."""
    op = Operation.RECEIVE
    extra = delivery(msg)
    pattern = pattern or extra.get("messaging.nats.stream") or msg.subject
    attrs = tel.attributes(op, None, msg.subject, size=len(msg.data), extra=extra)
    attrs["messaging.destination.template"] = pattern
    link = tel.link(msg)
    span = tel.tracer.start_span(
        tel.name(op, msg.subject, pattern), kind=SpanKind.CONSUMER, attributes=attrs,
        links=[link] if link is not None else None, start_time=started,
    )
    span.end()
    metric = tel.metric_attributes(op, msg.subject, pattern)
    tel.consumed.add(1, metric)
    tel.duration.record((time.time_ns() - started) / 1e9, metric)


def _own_take() -> bool:
    """Whether the message taken now is the application's (not a callback thread's, nor an inner iterator's)."""
    return not otel_context.get_value(_TAKING) and threading.current_thread().name not in _CALLBACK_THREADS


def _next_msg(tel: Telemetry, original: Callable[..., Msg]) -> Callable[..., Msg]:
    def next_msg(self: Bound, timeout: float | None = 1.0) -> Msg:
        started = time.time_ns()
        msg = original(self, timeout)
        if _own_take():
            received(tel, msg, self.subject or self.stream, started)
        return msg

    return next_msg


def _iteration(tel: Telemetry, original: Callable[[Any], Iterator[Msg]]) -> Callable[[Any], Iterator[Msg]]:
    def __iter__(self: Any) -> Iterator[Msg]:
        return _receiving(tel, original(self))

    return __iter__


def _receiving(tel: Telemetry, inner: Iterator[Msg]) -> Iterator[Msg]:
    """``inner``'s messages, each with a ``receive`` span unless an outer iterator makes them."""
    try:
        while True:
            own = _own_take()
            started = time.time_ns()
            try:
                with _within(otel_context.set_value(_TAKING, True)):
                    msg = next(inner)
            except StopIteration:
                return
            if own:
                received(tel, msg, None, started)
            yield msg
    finally:
        close = getattr(inner, "close", None)
        if close is not None:
            close()


def _fetch(tel: Telemetry, original: Callable[..., list[Msg]]) -> Callable[..., list[Msg]]:
    def fetch(self: PullSubscription, *args: Any, **kwargs: Any) -> list[Msg]:
        started = time.time_ns()
        try:
            msgs = original(self, *args, **kwargs)
        except Exception as exc:
            _received_batch(tel, self, [], started, exc)
            raise
        if msgs and _own_take():  # an empty fetch gives none, as a next_msg that timed out
            _received_batch(tel, self, msgs, started, None)
        return msgs

    return fetch


def _received_batch(
    tel: Telemetry, sub: PullSubscription, msgs: list[Msg], started: int, error: Exception | None
) -> None:
    """One ``receive`` span for a fetch: the count, and a link to each message's producer."""
    op = Operation.RECEIVE
    destination = sub.subject or sub.stream
    attrs = tel.attributes(op, None, destination, extra={
        "messaging.batch.message_count": len(msgs), "messaging.nats.stream": sub.stream,
        "messaging.nats.consumer": sub.consumer, "messaging.consumer.group.name": sub.consumer,
    })
    links = [link for link in (tel.link(m) for m in msgs) if link is not None]
    span = tel.tracer.start_span(
        tel.name(op, destination), kind=SpanKind.CONSUMER, attributes=attrs, links=links or None, start_time=started,
    )
    metric = tel.metric_attributes(op, destination)
    if error is not None:
        failed(span, error)
        metric = _error_metric(metric, error)
    span.end()
    if msgs:
        tel.consumed.add(len(msgs), metric)
    tel.duration.record((time.time_ns() - started) / 1e9, metric)


def traced_delivery(
    tel: Telemetry, conn: Connection | None, pattern: str, callback: Callable[[Msg], None]
) -> Callable[[Msg], None]:
    """``callback`` in the core's ``process`` span (:func:`.core.traced_callback`), with the delivery's attributes."""

    def with_delivery(msg: Msg) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(delivery(msg))
        callback(msg)

    with_delivery.__wrapped__ = callback  # type: ignore[attr-defined]
    return traced_callback(tel, conn, pattern, None, with_delivery)


# -- settling --------------------------------------------------------------------------------------------------
def _settling(tel: Telemetry, op: Operation) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return lambda original: _settle(tel, op, original)


def _settle(tel: Telemetry, op: Operation, original: Callable[..., None]) -> Callable[..., None]:
    def settle(self: Msg, *args: Any, **kwargs: Any) -> None:
        if self.is_acked:  # nothing is sent
            return original(self, *args, **kwargs)
        subject = self.subject
        attrs = tel.attributes(op, None, subject, extra=delivery(self))
        links: list[Link] | None = None
        if trace.get_current_span().get_span_context().is_valid:
            parent = otel_context.get_current()
            link = tel.link(self)
            links = [link] if link is not None else None
        else:  # no span here (after a fetch, after an auto-ack): in the message's own trace
            produced = tel.extract(self)
            parent = produced if produced is not None else otel_context.get_current()
        # ack_sync's request is this span's.
        with _within(_quiet(parent)), tel.span(tel.name(op, subject), SpanKind.CLIENT, attrs, links=links):
            return original(self, *args, **kwargs)

    return settle


# -- direct gets -----------------------------------------------------------------------------------------------
@contextmanager
def _reading(tel: Telemetry, conn: Connection, op: str, stream: str, seq: object, subject: object) -> Iterator[Span]:
    """The span of one read of a stored message; the request it makes gets none of its own."""
    attrs = _api_attributes(tel, conn, ApiCall(op, stream if isinstance(stream, str) else None, None))
    if isinstance(seq, int):
        attrs["messaging.nats.sequence"] = seq
    if isinstance(subject, str):
        attrs["messaging.destination.name"] = subject
    with _within(_quiet()), tel.span(f"jetstream {op}", SpanKind.CLIENT, attrs) as span:
        yield span


def _found(span: Span, subject: str, seq: int, data: bytes) -> None:
    span.set_attribute("messaging.destination.name", subject)
    span.set_attribute("messaging.nats.sequence", seq)
    span.set_attribute("messaging.message.body.size", len(data))


def _direct_get(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    def direct_get(
        self: JetStream, stream: str, seq: int | None = None, *, last_by_subj: str | None = None,
        next_by_subj: str | None = None, **kwargs: Any,
    ) -> Any:
        with _reading(tel, self.conn, "DIRECT.GET", stream, seq, last_by_subj or next_by_subj) as span:
            got = original(self, stream, seq, last_by_subj=last_by_subj, next_by_subj=next_by_subj, **kwargs)
            _found(span, got.subject, got.seq, got.data)
            return got

    return direct_get


def _get_msg(tel: Telemetry, original: Callable[..., Any]) -> Callable[..., Any]:
    def get_msg(
        self: JetStream, stream: str, seq: int | None = None, last_by_subj: str | None = None,
        next_by_subj: str | None = None, *args: Any, **kwargs: Any,
    ) -> Any:
        with _reading(tel, self.conn, "STREAM.MSG.GET", stream, seq, last_by_subj or next_by_subj) as span:
            got = original(self, stream, seq, last_by_subj, next_by_subj, *args, **kwargs)
            _found(span, got.subject, got.seq, got.data)
            return got

    return get_msg


def _direct_batch(
    tel: Telemetry, original: Callable[[DirectBatch], Iterator[Any]]
) -> Callable[[DirectBatch], Iterator[Any]]:
    def __iter__(self: DirectBatch) -> Iterator[Any]:
        call = ApiCall("DIRECT.GET", self.stream, None)
        span = tel.tracer.start_span("jetstream DIRECT.GET", kind=SpanKind.CLIENT,
                                     attributes=_api_attributes(tel, None, call))
        inside = trace.set_span_in_context(span, _quiet())
        try:
            with _within(inside):
                inner = original(self)
        except BaseException as exc:
            failed(span, exc)
            span.end()
            raise
        return _batch_steps(span, inside, inner, self)

    return __iter__


def _batch_steps(span: Span, inside: otel_context.Context, inner: Iterator[Any], batch: DirectBatch) -> Iterator[Any]:
    """A batched direct get's messages; its span is current only while the batch reads, and ends with it."""
    count = 0
    try:
        while True:
            try:
                with _within(inside):
                    stored = next(inner)
            except StopIteration:
                return
            except BaseException as exc:
                failed(span, exc)
                raise
            count += 1
            yield stored
    finally:
        span.set_attribute("messaging.batch.message_count", count)
        if batch.last_sequence is not None:
            span.set_attribute("messaging.nats.sequence", batch.last_sequence)
        span.end()
        close = getattr(inner, "close", None)
        if close is not None:
            close()


# -- API calls -------------------------------------------------------------------------------------------------
class ApiCall(NamedTuple):
    """A JetStream API request: its operation (``STREAM.INFO``) and the names its subject carries."""

    op: str
    stream: str | None
    consumer: str | None


def api_call(subject: object) -> ApiCall | None:
    """The API call a request subject makes (``$JS.API.<op>.<names>`` or ``$JS.<domain>.API...``); None for any
    other subject.  An operation not in the table is named by its first token: span names stay few."""
    if type(subject) is not str or not subject.startswith("$JS."):
        return None
    tokens = subject.split(".")
    if tokens[1] == "API":
        at = 2
    elif len(tokens) > 3 and tokens[2] == "API" and tokens[1] not in _NOT_DOMAINS:
        at = 3
    else:
        return None
    if len(tokens) <= at:
        return None
    for size in (3, 2, 1):
        op = ".".join(tokens[at:at + size])
        names = _API_NAMES.get(op)
        if names is not None:
            break
    else:
        op, size, names = tokens[at], 1, 0
    rest = tokens[at + size:]
    return ApiCall(op, rest[0] if names >= 1 and rest else None, rest[1] if names >= 2 and len(rest) > 1 else None)


def _api_attributes(tel: Telemetry, conn: Connection | None, call: ApiCall) -> dict[str, Any]:
    attrs: dict[str, Any] = {"messaging.system": "nats", "messaging.operation.name": call.op}
    if conn is not None:
        attrs.update(tel.server(conn))
    if call.stream:
        attrs["messaging.nats.stream"] = call.stream
    if call.consumer:
        attrs["messaging.nats.consumer"] = call.consumer
    return attrs


def _refusal(call: ApiCall, reply: Msg) -> Error | None:
    """The error the server answered an API request with, as the caller raises it once it reads the reply
    (the request itself got its answer, so only the reply tells)."""
    if call.op == "DIRECT.GET":  # the reply is a stored message, or a status that says why not
        if reply.header and status_of(reply.header) is not None:
            return reply_error(classify_header(reply.header), Request.DIRECT_GET, call.stream or "")
        return None
    if not reply.data.startswith(b"{"):
        return None
    try:
        api.check_error(reply.data)
    except JetStreamAPIError as exc:
        return exc
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return None


def _answered(span: Span, call: ApiCall, reply: Msg) -> None:
    """An API reply that refuses ends its span with the refusal (``jsclient.jetstream.api.errors`` counts it, once,
    through :mod:`jsclient.observe`: see :mod:`.metrics`)."""
    refused = _refusal(call, reply)
    if refused is not None:
        failed(span, refused)


def _api_routed(
    original: Callable[..., Any], plain: Callable[..., Any],
    traced: Callable[[Connection, ApiCall, Callable[[], Any]], Any],
) -> Callable[..., Any]:
    """A wrapper of a core request method: ``traced`` makes an API request's span (and sends it with the core's
    own method, ``plain``); under a span of this part that stands for the call, no span; else the core's."""

    def request(
        self: Connection, subject: str, payload: bytes = b"", timeout: float | None = 2.0, headers: Any = None
    ) -> Any:
        if otel_context.get_value(QUIET):
            return plain(self, subject, payload, timeout, headers)
        call = api_call(subject)
        if call is None:
            return original(self, subject, payload, timeout, headers)
        # No trace context in the headers: the server answers API requests itself, and no consumer reads them.
        return traced(self, call, lambda: plain(self, subject, payload, timeout, headers))

    return request


def _api_request(
    tel: Telemetry, original: Callable[..., Msg], plain: Callable[..., Msg]
) -> Callable[..., Msg]:
    def traced(conn: Connection, call: ApiCall, send: Callable[[], Msg]) -> Msg:
        with tel.span(f"jetstream {call.op}", SpanKind.CLIENT, _api_attributes(tel, conn, call)) as span:
            reply = send()
            _answered(span, call, reply)
            return reply

    return _api_routed(original, plain, traced)


def _api_request_async(
    tel: Telemetry, original: Callable[..., Any], plain: Callable[..., Any]
) -> Callable[..., Any]:
    def traced(conn: Connection, call: ApiCall, send: Callable[[], Future[Msg]]) -> Future[Msg]:
        span = tel.tracer.start_span(f"jetstream {call.op}", kind=SpanKind.CLIENT,
                                     attributes=_api_attributes(tel, conn, call))
        try:
            future = send()
        except BaseException as exc:
            failed(span, exc)
            span.end()
            raise

        def ended(done: Future[Msg]) -> None:  # the events thread (or here, when it is done already)
            if not done.cancelled():
                exc = done.exception()
                if exc is not None:
                    failed(span, exc)
                else:
                    _answered(span, call, done.result())
            span.end()

        future.add_done_callback(ended)
        return future

    return _api_routed(original, plain, traced)
