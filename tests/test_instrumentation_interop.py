"""Traces that cross clients and frameworks: nats-py (plain, and instrumented by otel-instrumentation-nats) and a
WSGI app under opentelemetry-instrumentation-wsgi, each against a real nats-server.

nats-py is asyncio: it runs on an event loop in a thread of the test's own (:class:`Loop`), while jsclient runs
on the test's thread, as an asyncio service and a threaded worker would in two processes.  Every library
reports to the providers of the ``otel`` fixture, so one in-memory exporter sees the whole trace.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.request
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import nats
import pytest
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from otel_instrumentation_nats import NatsInstrumentor

import jsclient
from jsclient.server import NatsServer

from .otelkit import Otel

pytestmark = pytest.mark.timeout(60)
T = TypeVar("T")


class Loop:
    """An asyncio event loop on a thread of its own, for nats-py beside jsclient's threads."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nats-py-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def loop() -> Iterator[Loop]:
    running = Loop()
    yield running
    running.close()


@pytest.fixture
def peer(server: NatsServer, loop: Loop) -> Iterator[Any]:
    """A nats-py client, connected on ``loop``."""
    client = loop.run(nats.connect(server.url))
    yield client
    loop.run(client.close())


@pytest.fixture
def natspy_traced(otel: Otel) -> Iterator[None]:
    """nats-py instrumented by otel-instrumentation-nats, reporting to the same providers as jsclient."""
    NatsInstrumentor().instrument(tracer_provider=otel.tracer_provider)
    yield
    NatsInstrumentor().uninstrument()


def ids(span: ReadableSpan | trace.Span) -> tuple[int, int]:
    """(trace id, span id) of a span, finished or not."""
    context = span.get_span_context()
    assert context is not None
    return context.trace_id, context.span_id




def parent_of(span: ReadableSpan) -> tuple[int, int]:
    assert span.parent is not None, f"{span.name} has no parent"
    return span.parent.trace_id, span.parent.span_id


def test_a_nats_py_publish_carrying_an_sdk_traceparent_parents_the_callback_and_links_the_receive(
    nc: jsclient.Connection, otel: Otel, peer: Any, loop: Loop
) -> None:
    processed = threading.Event()
    nc.subscribe("from.py", callback=lambda m: processed.set())
    pulled = nc.subscribe("from.py")
    nc.flush()

    async def publish() -> tuple[int, int]:
        with otel.tracer.start_as_current_span("py producer", kind=SpanKind.PRODUCER) as producer:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            await peer.publish("from.py", b"order", headers=headers)
            await peer.flush()
        return ids(producer)

    producer = loop.run(publish())
    assert processed.wait(5)
    pulled.next_msg(timeout=5)
    process = otel.finished("process from.py")
    assert process.kind is SpanKind.CONSUMER
    assert parent_of(process) == producer
    receive = otel.span("receive from.py")
    assert [(link.context.trace_id, link.context.span_id) for link in receive.links] == [producer]


def test_a_nats_py_subscriber_reads_the_traceparent_of_jsclients_publish_span(
    nc: jsclient.Connection, otel: Otel, peer: Any, loop: Loop
) -> None:
    sub = loop.run(peer.subscribe("to.py"))
    loop.run(peer.flush())
    with otel.tracer.start_as_current_span("root"):
        nc.publish("to.py", b"order")
    msg = loop.run(sub.next_msg(timeout=5))
    published = otel.span("publish to.py")
    trace_id, span_id = ids(published)
    flags = published.get_span_context().trace_flags  # sampled, and random with a newer SDK
    assert msg.headers["traceparent"] == f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"
    extracted = trace.get_current_span(propagate.extract(msg.headers)).get_span_context()
    assert (extracted.trace_id, extracted.span_id) == (trace_id, span_id)


@pytest.mark.usefixtures("natspy_traced")
def test_a_request_from_instrumented_nats_py_is_one_trace_through_a_jsclient_service(
    nc: jsclient.Connection, otel: Otel, peer: Any, loop: Loop
) -> None:
    nc.subscribe("svc.py2js", callback=lambda m: m.respond(m.data.upper()))
    nc.flush()

    async def ask() -> tuple[tuple[int, int], bytes]:
        with otel.tracer.start_as_current_span("asyncio caller") as root:
            reply = await peer.request("svc.py2js", b"hi", timeout=5)
        return ids(root), reply.data

    root, data = loop.run(ask())
    assert data == b"HI"
    process = otel.finished("process svc.py2js")
    request = otel.span("svc.py2js request")  # otel-instrumentation-nats names spans "<subject> <operation>"
    send = otel.span("svc.py2js send")  # nats-py's request publishes: a span of its own, inside the request's
    assert request.kind is SpanKind.CLIENT and process.kind is SpanKind.CONSUMER
    assert parent_of(request) == root
    assert parent_of(send) == ids(request)
    assert parent_of(process) == ids(send)
    # (nats-py's instrumentation also gives the reply's arrival on its inbox a span; jsclient's respond sends
    # no trace context, so that span starts a trace of its own.)


@pytest.mark.usefixtures("natspy_traced")
def test_a_request_from_jsclient_is_one_trace_through_an_instrumented_nats_py_service(
    nc: jsclient.Connection, otel: Otel, peer: Any, loop: Loop
) -> None:
    async def serve() -> None:
        async def handler(msg: Any) -> None:
            await msg.respond(msg.data.upper())

        await peer.subscribe("svc.js2py", cb=handler)
        await peer.flush()

    loop.run(serve())
    with otel.tracer.start_as_current_span("threaded caller") as root:
        assert nc.request("svc.js2py", b"hi", timeout=5).data == b"HI"
    handled = otel.finished("svc.js2py receive")  # the handler's CONSUMER span (otel-instrumentation-nats)
    request = otel.span("request svc.js2py")
    replied = next(s for s in otel.spans() if s.name.endswith(" send"))  # the handler's respond, to the inbox
    assert request.kind is SpanKind.CLIENT and handled.kind is SpanKind.CONSUMER
    assert parent_of(request) == ids(root)
    assert parent_of(handled) == ids(request)
    assert parent_of(replied) == ids(handled)
    assert {s.context.trace_id for s in otel.spans() if s.context is not None} == {ids(root)[0]}


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def test_a_wsgi_requests_span_parents_its_nats_request_and_the_remote_handlers_span(
    server: NatsServer, otel: Otel
) -> None:
    with jsclient.connect(server.url, name="service") as service, jsclient.connect(server.url, name="web") as web:
        service.subscribe("svc.orders", callback=lambda m: m.respond(b"accepted " + m.data))
        service.flush()

        def view(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            reply = web.request("svc.orders", environ["PATH_INFO"].encode(), timeout=5)
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [reply.data]

        app = OpenTelemetryMiddleware(view, tracer_provider=otel.tracer_provider)
        httpd: WSGIServer = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
        serving = threading.Thread(target=httpd.serve_forever, name="wsgi", daemon=True)
        serving.start()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{httpd.server_port}/order-7", timeout=10) as response:
                assert response.read() == b"accepted /order-7"
        finally:
            httpd.shutdown()  # returns once the request is handled whole, its span ended
            httpd.server_close()
            serving.join(timeout=10)
        process = otel.finished("process svc.orders")
    http = next(s for s in otel.spans() if s.kind is SpanKind.SERVER)
    request = otel.span("request svc.orders")
    assert http.parent is None
    assert parent_of(request) == ids(http)
    assert parent_of(process) == ids(request)
