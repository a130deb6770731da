"""Spans of services (ADR-32, :mod:`jsclient.micro`): a SERVER span around each request a handler takes.

The seam is the dispatch hook (:mod:`.dispatch`, :data:`jsclient.observe.dispatch`): while instrumented,
each round of requests an endpoint's subscription hands to the workers runs
the handler as :func:`served` wraps it.  So every endpoint is traced, also
those added before ``instrument()``, and after ``uninstrument()`` each runs
its plain handler again (from its next round).

The span, ``process <subject>`` (a ``span_name`` template sees the
endpoint's subject as the pattern), runs on the worker thread that runs the
handler, parented by the trace context in the request's headers: the
requester's CLIENT span.  The endpoint's subscription gets no CONSUMER span
of the core's (its callback is a :class:`jsclient.subscription.Relay`, which
the seam never wraps): it only hands the request to a worker, and one
request is one span.  A handler that raises
ends it with ``error.type`` (the exception's class) and the 500 the service
answers with; one that answers with ``respond_error(code, description)``
ends it with status ERROR, ``error.type`` the code, and the code in
``messaging.nats.service.error.code``.  The reply itself is sent by the
core's ``Msg.respond``, without a span.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .patches import Patches
from .telemetry import Operation, Telemetry

if TYPE_CHECKING:
    from ..headers import Headers
    from ..micro import Endpoint, Request, Service

SERVICE_NAME = "messaging.nats.service.name"
SERVICE_ENDPOINT = "messaging.nats.service.endpoint"
SERVICE_VERSION = "messaging.nats.service.version"
SERVICE_ID = "messaging.nats.service.id"
ERROR_CODE = "messaging.nats.service.error.code"
#: What a service answers when a handler raises (see ``Service.add_endpoint``).
RAISED_CODE = 500


class _Serving:
    """The request a handler is running for on this thread, its span, and the error code it answered."""

    __slots__ = ("code", "request", "span")

    def __init__(self, request: Request, span: Span) -> None:
        self.request = request
        self.span = span
        self.code: int | None = None


_serving: ContextVar[_Serving | None] = ContextVar("jsclient_service_request", default=None)


def install(patches: Patches, tel: Telemetry) -> None:
    from ..micro import Request

    patches.wrap(Request, "respond_error", _respond_error)


class _HeadersGetter:
    """Reads trace context from a request's headers."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        return carrier.get_all(key) or None

    def keys(self, carrier: Headers) -> list[str]:
        return list(carrier)


#: A plain class, not a subclass of Getter: without the otel extra installed, its type checks as well.
_GETTER = cast("Getter[Headers]", _HeadersGetter())


def _parent(request: Request) -> otel_context.Context | None:
    """The trace context the request carries, or None when it carries none."""
    headers = request.headers
    if not headers:
        return None
    ctx = propagate.extract(headers, getter=_GETTER)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def served(
    tel: Telemetry, service: Service, endpoint: Endpoint, handler: Callable[[Request], None]
) -> Callable[[Request], None]:
    """``handler`` inside a SERVER ``process`` span per request, parented by the request's trace context."""
    op = Operation.PROCESS
    pattern = endpoint.subject
    extra: dict[str, Any] = {
        SERVICE_NAME: service.name, SERVICE_ENDPOINT: endpoint.name, SERVICE_VERSION: service.version,
        SERVICE_ID: service.id, "messaging.destination.template": pattern,
    }
    if endpoint.queue_group:
        extra["messaging.consumer.group.name"] = endpoint.queue_group

    def serve(request: Request) -> None:
        subject = request.subject
        attrs = tel.attributes(op, None, subject, size=len(request.data), extra=extra)
        metric = tel.metric_attributes(op, subject, pattern)
        started = time.perf_counter()
        serving: _Serving | None = None
        try:
            with tel.span(tel.name(op, subject, pattern), SpanKind.SERVER, attrs, context=_parent(request)) as span:
                serving = _Serving(request, span)
                token = _serving.set(serving)
                try:
                    handler(request)
                except Exception:
                    serving.code = RAISED_CODE
                    span.set_attribute(ERROR_CODE, RAISED_CODE)
                    raise
                finally:
                    _serving.reset(token)
        except BaseException as exc:
            metric = {**metric, "error.type": type(exc).__qualname__}
            raise
        else:
            if serving is not None and serving.code is not None:
                metric = {**metric, "error.type": str(serving.code)}
        finally:
            tel.process_duration.record(time.perf_counter() - started, metric)
            tel.consumed.add(1, metric)

    serve.__wrapped__ = handler  # type: ignore[attr-defined]
    return serve


def _respond_error(original: Callable[..., None]) -> Callable[..., None]:
    def respond_error(self: Request, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)  # first: what it refuses is the handler's error, not an answer
        serving = _serving.get()
        if serving is None or serving.request is not self:
            return  # answered outside its handler's run: its span has ended
        code = args[0] if args else kwargs.get("code")
        description = args[1] if len(args) > 1 else kwargs.get("description", "")
        serving.code = code
        serving.span.set_attribute(ERROR_CODE, code)
        serving.span.set_attribute("error.type", str(code))
        serving.span.set_status(Status(StatusCode.ERROR, description))

    return respond_error
