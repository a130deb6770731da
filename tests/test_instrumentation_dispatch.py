"""jsclient.instrumentation's dispatch seam (jsclient.observe.dispatch): callbacks, JetStream callbacks and service
handlers are traced whenever they were given, and are the user's own again after ``uninstrument()``.

Each test makes its subscription (or endpoint, or consumer) on the side of ``instrument()`` that a wrapper applied
when the callback is given would miss: before it, or while instrumented and then used after ``uninstrument()``.
A callback reports whether a span was current where it ran (the traced wrapper makes its span current).
"""

from __future__ import annotations

import queue
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

import jsclient
from jsclient import micro, observe
from jsclient.server import NatsServer

from .otelkit import Otel

pytestmark = pytest.mark.timeout(60)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id




def in_span() -> bool:
    """Whether the code calling this runs inside a recording span (the traced wrapper's)."""
    return trace.get_current_span().is_recording()


def untraced_after_uninstrument(send: Any, ran: queue.Queue[tuple[str, bool]], subject: str) -> str:
    """After ``uninstrument()``: send messages (``send(subject)``) until one runs outside any span, and return its
    subject.  A subscription may be in the middle of a round that began while instrumented (its callback is
    chosen once per round); the next round is the user's own.  A callback wrapped when it was given stays wrapped
    for good, and this fails."""
    for i in range(10):
        name = f"{subject}.{i}"
        send(name)
        got, traced = ran.get(timeout=5)
        assert got == name
        if not traced:
            return name
    raise AssertionError("every callback after uninstrument() still ran inside a span")


def test_a_callback_subscription_made_before_instrument_gets_process_spans(server: NatsServer) -> None:
    ran: queue.Queue[tuple[str, bool]] = queue.Queue()
    with jsclient.connect(server.url) as nc:
        nc.subscribe("early.*", "workers", callback=lambda m: ran.put((m.subject, in_span())))
        nc.flush()
        with Otel() as otel:
            nc.publish("early.1", b"abc")
            assert ran.get(timeout=5) == ("early.1", True)
            process = otel.finished("process early.1")
    assert process.kind is SpanKind.CONSUMER
    assert parent_id(process) == span_id(otel.span("publish early.1"))
    assert {k: attrs(process)[k] for k in (
        "messaging.destination.name", "messaging.destination.template", "messaging.consumer.group.name",
        "messaging.message.body.size", "server.address",
    )} == {
        "messaging.destination.name": "early.1", "messaging.destination.template": "early.*",
        "messaging.consumer.group.name": "workers", "messaging.message.body.size": 3, "server.address": "127.0.0.1",
    }


def test_after_uninstrument_a_callback_subscribed_while_instrumented_is_the_users_own(server: NatsServer) -> None:
    ran: queue.Queue[tuple[str, bool]] = queue.Queue()
    with jsclient.connect(server.url) as nc:
        with Otel() as otel:
            nc.subscribe("late.>", callback=lambda m: ran.put((m.subject, in_span())))
            nc.flush()
            nc.publish("late.traced", b"")
            assert ran.get(timeout=5) == ("late.traced", True)
            otel.finished("process late.traced")
        assert observe.dispatch is None
        plain = untraced_after_uninstrument(lambda s: nc.publish(s, b""), ran, "late.plain")
    assert otel.spans(f"process {plain}") == []


def _reporting(ran: queue.Queue[tuple[str, bool]]) -> micro.Handler:
    def handle(request: micro.Request) -> None:
        ran.put((request.subject, in_span()))
        request.respond(b"ok")

    return handle


def test_a_service_endpoint_added_before_instrument_gets_server_spans(server: NatsServer) -> None:
    ran: queue.Queue[tuple[str, bool]] = queue.Queue()
    with jsclient.connect(server.url) as nc:
        svc = micro.add_service(nc, name="early", version="1.0.0")
        svc.add_endpoint("before", _reporting(ran), subject="svc.before")
        nc.flush()
        with Otel() as otel:
            with otel.tracer.start_as_current_span("root"):
                assert nc.request("svc.before", b"", timeout=5).data == b"ok"
            assert ran.get(timeout=5) == ("svc.before", True)
            svc.stop()  # drains: the handler has returned, its span has ended
    served = otel.span("process svc.before")
    assert served.kind is SpanKind.SERVER
    assert parent_id(served) == span_id(otel.span("request svc.before"))
    assert attrs(served)["messaging.nats.service.endpoint"] == "before"
    assert attrs(served)["messaging.destination.template"] == "svc.before"
    # The endpoint's hand-over to a worker gets no span of its own: one request, one span.
    assert [s.name for s in otel.spans() if s.name.startswith("process svc")] == ["process svc.before"]


def test_after_uninstrument_an_endpoint_added_while_instrumented_runs_its_plain_handler(server: NatsServer) -> None:
    ran: queue.Queue[tuple[str, bool]] = queue.Queue()
    with jsclient.connect(server.url) as nc:
        svc = micro.add_service(nc, name="late", version="1.0.0")
        with Otel() as otel:
            svc.add_endpoint("during", _reporting(ran), subject="svc.during.>")
            nc.flush()
            nc.request("svc.during.traced", b"", timeout=5)
            assert ran.get(timeout=5) == ("svc.during.traced", True)
        plain = untraced_after_uninstrument(lambda s: nc.request(s, b"", timeout=5), ran, "svc.during.plain")
        svc.stop()
    assert otel.spans(f"process {plain}") == []


def test_a_push_callback_made_before_instrument_gets_process_spans_with_the_delivery(
    js: jsclient.JetStream,
) -> None:
    js.add_stream(name="EARLY", subjects=["jearly.>"])
    ran: queue.Queue[tuple[str, bool]] = queue.Queue()
    js.subscribe("jearly.>", callback=lambda m: ran.put((m.subject, in_span())))
    with Otel() as otel:
        js.publish("jearly.1", b"x")
        assert ran.get(timeout=5) == ("jearly.1", True)
        process = otel.finished("process jearly.1")
    assert parent_id(process) == span_id(otel.span("publish jearly.1"))
    assert attrs(process)["messaging.destination.template"] == "jearly.>"
    assert attrs(process)["messaging.nats.stream"] == "EARLY" and attrs(process)["messaging.nats.stream_sequence"] == 1


def test_after_uninstrument_a_consume_callback_started_while_instrumented_is_the_users_own(
    js: jsclient.JetStream,
) -> None:
    js.add_stream(name="LATE", subjects=["jlate.>"])
    consumer = js.create_consumer("LATE", durable_name="c")
    ran: queue.Queue[tuple[str, bool]] = queue.Queue()
    with Otel() as otel:
        context = consumer.consume(lambda m: ran.put((m.subject, in_span())))
        js.publish("jlate.traced", b"")
        assert ran.get(timeout=5) == ("jlate.traced", True)
        otel.finished("process jlate.traced")
    try:
        js.publish("jlate.plain", b"")
        assert ran.get(timeout=5) == ("jlate.plain", False)  # the consume thread asks the seam for each message
    finally:
        context.stop()
    assert otel.spans("process jlate.plain") == []
